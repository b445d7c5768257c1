//! The token endpoint: one request per grant (`client_credentials`, `refresh_token`,
//! `authorization_code` with its PKCE verifier), the client authenticated by the method the
//! settings and the server agree on (`client_secret_basic`, `client_secret_post`,
//! `private_key_jwt`, `none`), the `resource` (RFC 8707) on each request.
//!
//! Nothing here logs a secret: the form and the `Authorization` header are built in memory and
//! only the endpoint, the status and the server's `error` appear in messages.

use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};

use crate::config::Secret;
use crate::mcp::config::TokenAuthMethod;
use crate::mcp::oauth::{OAuthError, with_causes};

/// A token endpoint that answers slower than this is treated as down.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a `private_key_jwt` assertion is valid (RFC 7523 §3: short).
const ASSERTION_LIFETIME: Duration = Duration::from_secs(300);
const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

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
    /// The authorization server's issuer: the `aud` of a `private_key_jwt` assertion (what
    /// servers check; RFC 7523 §3 allows it); `None`: the token endpoint.
    pub issuer: Option<String>,
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

/// How the client authenticates, when the settings do not say: a private key signs
/// (`private_key_jwt`), a secret goes in `Authorization: Basic` when the server lists that
/// method or lists none (RFC 6749 §2.3.1's default), else in the form; no credential at all
/// is a public client (`none`).
pub(crate) fn choose_method(
    configured: Option<TokenAuthMethod>,
    has_private_key: bool,
    has_secret: bool,
    supported: Option<&[String]>,
) -> TokenAuthMethod {
    if let Some(method) = configured {
        return method;
    }
    let supports = |name: &str| {
        supported
            .filter(|list| !list.is_empty())
            .is_none_or(|list| list.iter().any(|m| m == name))
    };
    if has_private_key && supports("private_key_jwt") {
        return TokenAuthMethod::PrivateKeyJwt;
    }
    if has_secret {
        if supports("client_secret_basic") {
            return TokenAuthMethod::ClientSecretBasic;
        }
        if supports("client_secret_post") {
            return TokenAuthMethod::ClientSecretPost;
        }
        return TokenAuthMethod::ClientSecretBasic;
    }
    if has_private_key {
        return TokenAuthMethod::PrivateKeyJwt;
    }
    TokenAuthMethod::None
}

/// Sends `request`; a refusal names the endpoint, the status and the server's `error`.
pub(crate) async fn request_token(
    http: &reqwest::Client,
    request: &TokenRequest,
) -> Result<TokenResponse, OAuthError> {
    let url = &request.token_endpoint;
    let (form, basic) = build_form(request)?;
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().map(|(k, v)| (*k, v.expose())))
        .finish();
    let mut builder = http
        .post(url)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(TOKEN_TIMEOUT)
        .body(body);
    if let Some(basic) = basic
        && let Ok(mut value) = reqwest::header::HeaderValue::from_str(basic.expose())
    {
        value.set_sensitive(true);
        builder = builder.header(reqwest::header::AUTHORIZATION, value);
    }
    let response = builder.send().await.map_err(|e| OAuthError::Unreachable {
        url: url.clone(),
        detail: with_causes(&e),
    })?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(refusal(url, status.as_u16(), &text, request));
    }
    serde_json::from_str::<TokenResponse>(&text)
        .ok()
        .filter(|t| !t.access_token.is_empty())
        .ok_or_else(|| OAuthError::NoToken { url: url.clone() })
}

/// The form (values kept as secrets until serialised) and the `Authorization: Basic` value.
type Form = Vec<(&'static str, Secret)>;

fn build_form(request: &TokenRequest) -> Result<(Form, Option<Secret>), OAuthError> {
    let plain = |v: &str| Secret::new(v.to_string());
    let mut form: Form = Vec::new();
    match &request.grant {
        Grant::ClientCredentials => form.push(("grant_type", plain("client_credentials"))),
        Grant::RefreshToken(token) => {
            form.push(("grant_type", plain("refresh_token")));
            form.push(("refresh_token", token.clone()));
        }
        Grant::AuthorizationCode {
            code,
            code_verifier,
            redirect_uri,
        } => {
            form.push(("grant_type", plain("authorization_code")));
            form.push(("code", code.clone()));
            form.push(("code_verifier", code_verifier.clone()));
            form.push(("redirect_uri", plain(redirect_uri)));
        }
    }
    for (key, value) in [
        ("scope", &request.scope),
        ("resource", &request.resource),
        ("audience", &request.audience),
    ] {
        if let Some(value) = value.as_deref().filter(|v| !v.trim().is_empty()) {
            form.push((key, plain(value)));
        }
    }
    let client = &request.client;
    let missing = |what: &str| {
        OAuthError::Unsupported(format!(
            "oauth.token_endpoint_auth_method {} needs oauth.{what}; set it or choose another method",
            method_name(client.method)
        ))
    };
    let mut basic = None;
    match client.method {
        TokenAuthMethod::ClientSecretBasic => {
            let secret = client
                .client_secret
                .as_ref()
                .ok_or_else(|| missing("client_secret"))?;
            basic = Some(basic_header(&client.client_id, secret.expose()));
        }
        TokenAuthMethod::ClientSecretPost => {
            let secret = client
                .client_secret
                .as_ref()
                .ok_or_else(|| missing("client_secret"))?;
            form.push(("client_id", plain(&client.client_id)));
            form.push(("client_secret", secret.clone()));
        }
        // A refresh_token grant configured without a client_id sends none.
        TokenAuthMethod::None if client.client_id.is_empty() => {}
        TokenAuthMethod::None => form.push(("client_id", plain(&client.client_id))),
        TokenAuthMethod::PrivateKeyJwt => {
            let key = client
                .private_key
                .as_ref()
                .ok_or_else(|| missing("private_key"))?;
            let audience = request
                .issuer
                .clone()
                .unwrap_or_else(|| request.token_endpoint.clone());
            let assertion = client_assertion(
                &client.client_id,
                &audience,
                key,
                client.signing_algorithm.as_deref(),
            )?;
            form.push(("client_id", plain(&client.client_id)));
            form.push(("client_assertion_type", plain(JWT_BEARER)));
            form.push(("client_assertion", assertion));
        }
    }
    Ok((form, basic))
}

/// RFC 6749 §2.3.1: `Basic base64(urlencode(id) ":" urlencode(secret))`.
fn basic_header(client_id: &str, secret: &str) -> Secret {
    let encode =
        |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", encode(client_id), encode(secret));
    Secret::new(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    ))
}

#[derive(Serialize)]
struct AssertionClaims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    jti: String,
    iat: u64,
    exp: u64,
}

/// An RFC 7523 §2.2 client assertion signed with `pem`: `iss` = `sub` = the client, `aud` the
/// authorization server, a fresh `jti`, five minutes of validity.
fn client_assertion(
    client_id: &str,
    audience: &str,
    pem: &Secret,
    algorithm: Option<&str>,
) -> Result<Secret, OAuthError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let claims = AssertionClaims {
        iss: client_id,
        sub: client_id,
        aud: audience,
        jti: uuid::Uuid::new_v4().to_string(),
        iat: now,
        exp: now + ASSERTION_LIFETIME.as_secs(),
    };
    let key = pem.expose().as_bytes();
    let candidates: Vec<Algorithm> = match algorithm {
        Some(name) => vec![Algorithm::from_str(name).map_err(|_| {
            OAuthError::Unsupported(format!(
                "oauth.signing_algorithm {name:?} is not one of ES256, ES384, RS256, RS384, \
                 RS512, PS256, PS384, PS512, EdDSA; fix it or remove it to use the key's own"
            ))
        })?],
        // The key's type decides; a P-384 key fails ES256 and is tried as ES384.
        None => vec![
            Algorithm::ES256,
            Algorithm::ES384,
            Algorithm::RS256,
            Algorithm::EdDSA,
        ],
    };
    for alg in candidates {
        let encoding = match alg {
            Algorithm::ES256 | Algorithm::ES384 => EncodingKey::from_ec_pem(key),
            Algorithm::EdDSA => EncodingKey::from_ed_pem(key),
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => {
                return Err(OAuthError::Unsupported(
                    "oauth.signing_algorithm: private_key_jwt signs with a private key, not an \
                     HMAC; use ES256, RS256 or EdDSA"
                        .into(),
                ));
            }
            _ => EncodingKey::from_rsa_pem(key),
        };
        let Ok(encoding) = encoding else { continue };
        if let Ok(jwt) = jsonwebtoken::encode(&Header::new(alg), &claims, &encoding) {
            return Ok(Secret::new(jwt));
        }
    }
    Err(OAuthError::Unsupported(format!(
        "oauth.private_key could not sign a client assertion{}; it must be a PKCS#8 PEM \
         (-----BEGIN PRIVATE KEY-----) EC, RSA or Ed25519 key{}",
        algorithm.map(|a| format!(" with {a}")).unwrap_or_default(),
        if algorithm.is_some() {
            " matching oauth.signing_algorithm"
        } else {
            ""
        }
    )))
}

/// RFC 6749 §5.2 error answer.
#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

fn refusal(url: &str, status: u16, body: &str, request: &TokenRequest) -> OAuthError {
    let Ok(answer) = serde_json::from_str::<ErrorAnswer>(body) else {
        return OAuthError::Refused {
            url: url.to_string(),
            status,
            body: body.chars().take(300).collect(),
        };
    };
    let hint = match answer.error.as_str() {
        "invalid_client" | "unauthorized_client" => format!(
            "check oauth.client_id and its credential (the server was sent {})",
            method_name(request.client.method)
        ),
        "invalid_scope" => "check oauth.scope".to_string(),
        "invalid_grant" => match request.grant {
            Grant::RefreshToken(_) => {
                "the refresh token is no longer valid; authorize again".to_string()
            }
            _ => "the grant was refused; authorize again".to_string(),
        },
        "unsupported_grant_type" => "check oauth.grant_type".to_string(),
        _ => "check the oauth settings of this server".to_string(),
    };
    OAuthError::TokenRefused {
        url: url.to_string(),
        status,
        error: answer.error,
        description: answer
            .error_description
            .map(|d| d.chars().take(300).collect()),
        hint,
    }
}

/// The RFC 7591 name of `method` (in messages and the token file).
pub(crate) fn method_name(method: TokenAuthMethod) -> &'static str {
    match method {
        TokenAuthMethod::ClientSecretBasic => "client_secret_basic",
        TokenAuthMethod::ClientSecretPost => "client_secret_post",
        TokenAuthMethod::PrivateKeyJwt => "private_key_jwt",
        TokenAuthMethod::None => "none",
    }
}

#[cfg(test)]
#[path = "token_tests.rs"]
mod tests;
