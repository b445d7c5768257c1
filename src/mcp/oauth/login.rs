//! A person's authorization in a browser (OAuth 2.1 authorization code with PKCE S256): the
//! client registered dynamically (RFC 7591), by a Client ID Metadata Document, or as
//! configured; a one-shot listener on `127.0.0.1` receives the redirect (RFC 8252 §7.3); the
//! browser is `$BROWSER URL` when set, else the URL is printed for the person to open.
//!
//! Contract: owned by the oauth-login lane.

#![allow(dead_code)] // contract: the owning lane removes this

use crate::mcp::config::OAuthConfig;
use crate::mcp::oauth::OAuthError;
use crate::mcp::oauth::challenge::Challenge;
use crate::mcp::oauth::token_store::StoredTokens;

/// One authorization to run.
pub(crate) struct LoginRequest<'a> {
    pub server_name: &'a str,
    pub server_url: &'a str,
    pub config: &'a OAuthConfig,
    /// The challenge that asked for it (its scope and metadata URL), if any.
    pub challenge: Option<&'a Challenge>,
    /// Scope to ask for beyond the selected one (step-up after `insufficient_scope`).
    pub extra_scope: Option<&'a str>,
    /// Where the URL to open is told to the person (stderr in the CLI).
    pub prompt: &'a (dyn Fn(&str) + Send + Sync),
}

/// Runs the authorization and returns the tokens obtained (not yet saved).
pub(crate) async fn authorize(
    http: &reqwest::Client,
    request: &LoginRequest<'_>,
) -> Result<StoredTokens, OAuthError> {
    let _ = http;
    Err(OAuthError::Unsupported(format!(
        "authorizing {} in a browser is not built yet",
        request.server_name
    )))
}
