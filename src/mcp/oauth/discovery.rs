//! Finding a server's authorization server and endpoints: protected-resource metadata (RFC
//! 9728, from the challenge's `resource_metadata` or the well-known paths), authorization
//! server metadata (RFC 8414 and OpenID Connect discovery, path-inserted and appended forms),
//! and the 2025-03-26 fallbacks (metadata at the server's origin, then `/authorize`, `/token`,
//! `/register` there). Also the scope a client asks for (challenge, else the resource's
//! `scopes_supported`, else none).
//!
//! Contract: owned by the oauth-core lane.

#![allow(dead_code)] // contract: the owning lane removes this

use crate::mcp::oauth::OAuthError;
use crate::mcp::oauth::challenge::Challenge;

/// Authorization-server metadata, as far as a client needs it.
#[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize)]
pub(crate) struct AuthServerMetadata {
    #[serde(default)]
    pub issuer: Option<String>,
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    #[serde(default)]
    pub grant_types_supported: Option<Vec<String>>,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub client_id_metadata_document_supported: Option<bool>,
}

/// What discovery found for one MCP server.
#[derive(Clone, Debug)]
pub(crate) struct Discovered {
    /// The resource the tokens are for (`resource` parameter, RFC 8707): the protected-resource
    /// metadata's `resource`, checked against the server URL; the server URL without PRM.
    pub resource: String,
    /// The protected resource's `scopes_supported`, when it publishes metadata.
    pub resource_scopes: Option<Vec<String>>,
    pub auth_server: AuthServerMetadata,
}

/// Discovers the authorization server of the MCP endpoint `server_url` given its challenge.
pub(crate) async fn discover(
    http: &reqwest::Client,
    server_url: &str,
    challenge: &Challenge,
) -> Result<Discovered, OAuthError> {
    let _ = (http, challenge);
    Err(OAuthError::Unsupported(format!(
        "discovering the authorization server of {server_url} is not built yet"
    )))
}

/// The scope to ask for: the configured one, else the challenge's, else the resource's
/// `scopes_supported`, else none (the parameter is then omitted).
pub(crate) fn select_scope(
    configured: Option<&str>,
    challenge: &Challenge,
    discovered: &Discovered,
) -> Option<String> {
    let _ = discovered;
    configured
        .map(str::to_string)
        .or_else(|| challenge.scope.clone())
}
