//! Who Antler is to an authorization server in the authorization-code flow: a configured,
//! pre-registered client (its secret or key authenticating by a method the server supports),
//! else a Client ID Metadata Document URL where the server accepts one, else a client
//! registered on the spot (RFC 7591) for this login's redirect URI.

use serde::Deserialize;
use serde_json::json;

use crate::config::Secret;
use crate::mcp::config::{OAuthConfig, TokenAuthMethod};
use crate::mcp::oauth::discovery::AuthServerMetadata;
use crate::mcp::oauth::login::LoginError;
use crate::mcp::oauth::token::ClientCredentials;

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
        let method = config.token_endpoint_auth_method.unwrap_or_else(|| {
            configured_method(
                supported,
                config.client_secret.is_some(),
                config.private_key.is_some(),
            )
        });
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

/// The method of a configured client: a key where the server takes `private_key_jwt`, else its
/// secret in the header (the default of RFC 8414 when the server lists none) or the body,
/// whichever the server supports; a client without either is public (`none`).
pub(crate) fn configured_method(
    supported: Option<&[String]>,
    has_secret: bool,
    has_key: bool,
) -> TokenAuthMethod {
    let offers = |name: &str| supported.is_none_or(|list| list.iter().any(|m| m == name));
    let listed = |name: &str| supported.is_some_and(|list| list.iter().any(|m| m == name));
    if has_key && listed("private_key_jwt") {
        return TokenAuthMethod::PrivateKeyJwt;
    }
    if has_secret {
        if offers("client_secret_basic") {
            return TokenAuthMethod::ClientSecretBasic;
        }
        if listed("client_secret_post") {
            return TokenAuthMethod::ClientSecretPost;
        }
        if listed("none") {
            return TokenAuthMethod::None;
        }
        return TokenAuthMethod::ClientSecretBasic;
    }
    if has_key {
        return TokenAuthMethod::PrivateKeyJwt;
    }
    TokenAuthMethod::None
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

/// The RFC 7591 name of `method` (as kept in the token file).
pub(crate) fn method_name(method: TokenAuthMethod) -> &'static str {
    match method {
        TokenAuthMethod::ClientSecretBasic => "client_secret_basic",
        TokenAuthMethod::ClientSecretPost => "client_secret_post",
        TokenAuthMethod::PrivateKeyJwt => "private_key_jwt",
        TokenAuthMethod::None => "none",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(methods: &[&str]) -> Vec<String> {
        methods.iter().map(|m| m.to_string()).collect()
    }

    #[test]
    fn a_configured_secret_goes_where_the_server_takes_it() {
        use TokenAuthMethod as M;
        let cases: &[(Option<&[&str]>, bool, bool, M)] = &[
            (None, true, false, M::ClientSecretBasic),
            (
                Some(&["client_secret_post"]),
                true,
                false,
                M::ClientSecretPost,
            ),
            (
                Some(&["client_secret_basic", "client_secret_post"]),
                true,
                false,
                M::ClientSecretBasic,
            ),
            (Some(&["none"]), true, false, M::None),
            (
                Some(&["private_key_jwt", "client_secret_basic"]),
                true,
                true,
                M::PrivateKeyJwt,
            ),
            (Some(&["none"]), false, false, M::None),
            (None, false, false, M::None),
        ];
        for (supported, secret, key, expected) in cases {
            let supported = supported.map(list);
            assert_eq!(
                configured_method(supported.as_deref(), *secret, *key),
                *expected,
                "{supported:?} secret={secret} key={key}"
            );
        }
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
