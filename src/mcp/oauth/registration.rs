//! Who Antler is to an authorization server in the authorization-code flow: a configured,
//! pre-registered client (its secret or key authenticating by a method the server supports),
//! else a Client ID Metadata Document URL where the server accepts one, else a client
//! registered on the spot (RFC 7591) for this login's redirect URI.

use serde::Deserialize;
use serde_json::json;

use crate::config::Secret;
use crate::mcp::config::{OAuthConfig, TokenAuthMethod};
use crate::mcp::oauth::discovery::AuthServerMetadata;
use crate::mcp::oauth::login_error::LoginError;
use crate::mcp::oauth::token::{self, ClientCredentials};

/// A registration endpoint that answers slower than this is treated as down.
const REGISTRATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The client of one login.
pub(crate) async fn choose_client(
    http: &reqwest::Client,
    server_name: &str,
    config: &OAuthConfig,
    metadata: &AuthServerMetadata,
    redirect_uri: &str,
    scope: Option<&str>,
) -> Result<ClientCredentials, LoginError> {
    let supported = metadata.token_endpoint_auth_methods_supported.as_deref();
    if let Some(client_id) = &config.client_id {
        let method = token::choose_method(
            config.token_endpoint_auth_method,
            config.private_key.is_some(),
            config.client_secret.is_some(),
            supported,
        );
        return Ok(ClientCredentials {
            client_id: client_id.clone(),
            client_secret: config.client_secret.clone(),
            private_key: config.private_key.clone(),
            signing_algorithm: config.signing_algorithm.clone(),
            method,
        });
    }
    if let Some(url) = &config.client_metadata_url
        && metadata.client_id_metadata_document_supported == Some(true)
    {
        let method = if config.private_key.is_some() {
            TokenAuthMethod::PrivateKeyJwt
        } else {
            TokenAuthMethod::None
        };
        return Ok(ClientCredentials {
            client_id: url.clone(),
            client_secret: None,
            private_key: config.private_key.clone(),
            signing_algorithm: config.signing_algorithm.clone(),
            method,
        });
    }
    match &metadata.registration_endpoint {
        Some(endpoint) => register(http, endpoint, supported, redirect_uri, scope).await,
        None => Err(LoginError::NoClient {
            server: server_name.to_string(),
            metadata_hint: metadata.client_id_metadata_document_supported == Some(true),
        }),
    }
}

/// The method asked for at registration: a public client (`none`) unless the server supports
/// only others; then a secret in the header, else in the body.
fn registration_method(supported: Option<&[String]>) -> &'static str {
    let listed = |name: &str| supported.is_some_and(|list| list.iter().any(|m| m == name));
    match supported {
        None => "none",
        Some(_) if listed("none") => "none",
        Some(_) if listed("client_secret_basic") => "client_secret_basic",
        Some(_) if listed("client_secret_post") => "client_secret_post",
        Some(_) => "none",
    }
}

#[derive(Deserialize)]
struct Registered {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

/// Registers Antler for this login's redirect URI (RFC 7591 §3).
async fn register(
    http: &reqwest::Client,
    endpoint: &str,
    supported: Option<&[String]>,
    redirect_uri: &str,
    scope: Option<&str>,
) -> Result<ClientCredentials, LoginError> {
    let requested = registration_method(supported);
    let mut body = json!({
        "client_name": "Antler",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": requested,
    });
    if let Some(scope) = scope {
        body["scope"] = json!(scope);
    }
    let failed = |detail: String| LoginError::Registration {
        url: endpoint.to_string(),
        detail,
    };
    let response = http
        .post(endpoint)
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(REGISTRATION_TIMEOUT)
        .json(&body)
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        return Err(failed(format!(
            "HTTP {}: {}",
            status.as_u16(),
            text.chars().take(300).collect::<String>()
        )));
    }
    let registered: Registered = response
        .json()
        .await
        .map_err(|e| failed(format!("the answer is not a client registration: {e}")))?;
    let method_name = registered
        .token_endpoint_auth_method
        .as_deref()
        .unwrap_or(requested);
    let method = serde_json::from_value::<TokenAuthMethod>(json!(method_name))
        .map_err(|_| failed(format!("it assigned the unsupported method {method_name}")))?;
    Ok(ClientCredentials {
        client_id: registered.client_id,
        client_secret: registered
            .client_secret
            .filter(|s| !s.is_empty() && method != TokenAuthMethod::None)
            .map(Secret::new),
        private_key: None,
        signing_algorithm: None,
        method,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(methods: &[&str]) -> Vec<String> {
        methods.iter().map(|m| m.to_string()).collect()
    }

    #[test]
    fn registration_asks_for_a_public_client_unless_the_server_supports_only_others() {
        assert_eq!(registration_method(None), "none");
        assert_eq!(
            registration_method(Some(&list(&["client_secret_basic", "none"]))),
            "none"
        );
        assert_eq!(
            registration_method(Some(&list(&["client_secret_post", "client_secret_basic"]))),
            "client_secret_basic"
        );
        assert_eq!(
            registration_method(Some(&list(&["client_secret_post"]))),
            "client_secret_post"
        );
    }
}
