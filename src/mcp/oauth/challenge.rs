//! A resource server's `WWW-Authenticate: Bearer …` challenge (RFC 6750 §3, RFC 9728 §5.1):
//! where its protected-resource metadata is, the scope it wants, and why it refused.
//!
//! Contract: owned by the oauth-core lane.

#![allow(dead_code)] // contract: the owning lane removes this

/// The parameters of a `Bearer` challenge that matter to a client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// `resource_metadata`: the URL of the protected-resource metadata.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs, space separated.
    pub scope: Option<String>,
    /// `error` (`invalid_token`, `insufficient_scope`, …).
    pub error: Option<String>,
}

impl Challenge {
    /// Parses a header value; a value with no `Bearer` challenge is an empty `Challenge`.
    pub(crate) fn parse(header: &str) -> Self {
        let _ = header;
        Self::default()
    }
}
