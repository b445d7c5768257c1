//! The token endpoint: one request per grant (`client_credentials`, `refresh_token`,
//! `authorization_code` with its PKCE verifier), the client authenticated by the method the
//! settings and the server agree on (`client_secret_basic`, `client_secret_post`,
//! `private_key_jwt`, `none`), the `resource` (RFC 8707) on each request.
//!
//! Contract: owned by the oauth-core lane.

#![allow(dead_code)] // contract: the owning lane removes this

use serde::Deserialize;

use crate::config::Secret;
use crate::mcp::config::TokenAuthMethod;
use crate::mcp::oauth::OAuthError;

/// Who the client is and how it proves it.
#[derive(Clone, Debug)]
pub(crate) struct ClientCredentials {
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// PKCS#8 PEM, for `private_key_jwt`.
    pub private_key: Option<Secret>,
    pub signing_algorithm: Option<String>,
    pub method: TokenAuthMethod,
}

/// The grant of one token request.
#[derive(Clone, Debug)]
pub(crate) enum Grant {
    ClientCredentials,
    RefreshToken(Secret),
    AuthorizationCode {
        code: Secret,
        code_verifier: Secret,
        redirect_uri: String,
    },
}

/// One request to a token endpoint.
#[derive(Clone, Debug)]
pub(crate) struct TokenRequest {
    pub token_endpoint: String,
    pub client: ClientCredentials,
    pub grant: Grant,
    pub scope: Option<String>,
    pub resource: Option<String>,
    pub audience: Option<String>,
}

/// A token endpoint's answer.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct TokenResponse {
    pub access_token: String,
    #[serde(default)]
    pub token_type: Option<String>,
    #[serde(default)]
    pub expires_in: Option<f64>,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
}

/// Sends `request`; a refusal names the endpoint, the status and the server's `error`.
pub(crate) async fn request_token(
    http: &reqwest::Client,
    request: &TokenRequest,
) -> Result<TokenResponse, OAuthError> {
    let _ = http;
    Err(OAuthError::Unsupported(format!(
        "token requests to {} are not built yet",
        request.token_endpoint
    )))
}
