//! The `oauth` block of a remote server: how Antler gets its tokens (grant, client, how the
//! client authenticates, where the endpoints are when not discovered), validated with every
//! problem named by key.

use std::time::Duration;

use serde::Deserialize;

use crate::config::Secret;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantType {
    ClientCredentials,
    RefreshToken,
    /// A person authorizes once in a browser (`antler mcp login NAME`); the tokens are kept in
    /// the data dir and refreshed from then on.
    AuthorizationCode,
}

/// How the client proves who it is to the token endpoint (RFC 7591 names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenAuthMethod {
    ClientSecretBasic,
    ClientSecretPost,
    PrivateKeyJwt,
    None,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuth {
    #[serde(default = "super::yes")]
    pub(super) enabled: bool,
    #[serde(default)]
    token_url: Option<String>,
    grant_type: GrantType,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    audience: Option<String>,
    #[serde(default = "default_skew")]
    refresh_skew_seconds: u64,
    #[serde(default)]
    token_endpoint_auth_method: Option<TokenAuthMethod>,
    #[serde(default)]
    private_key: Option<String>,
    #[serde(default)]
    signing_algorithm: Option<String>,
    #[serde(default)]
    client_metadata_url: Option<String>,
    #[serde(default)]
    redirect_port: Option<u16>,
}

fn default_skew() -> u64 {
    60
}

#[derive(Clone, Debug)]
pub struct OAuthConfig {
    /// `None`: discovered from the server (protected-resource and authorization-server
    /// metadata) on its first 401.
    pub token_url: Option<String>,
    pub grant_type: GrantType,
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    pub refresh_token: Option<Secret>,
    pub scope: Option<String>,
    pub audience: Option<String>,
    pub refresh_skew: Duration,
    /// `None`: the first the authorization server supports that the settings allow.
    pub token_endpoint_auth_method: Option<TokenAuthMethod>,
    /// PEM (PKCS#8) for `private_key_jwt`.
    pub private_key: Option<Secret>,
    /// JWS algorithm of `private_key` (`ES256`, `RS256`, …); `None`: from the key.
    pub signing_algorithm: Option<String>,
    /// A Client ID Metadata Document URL used as `client_id` where the server supports it.
    pub client_metadata_url: Option<String>,
    /// The loopback port of the authorization-code redirect (`None`: any free port).
    pub redirect_port: Option<u16>,
}

impl OAuthConfig {
    /// The settings of a server that asks for OAuth when none are configured (`antler mcp
    /// probe` and `login`): authorization code with dynamic registration, all discovered.
    pub fn discovered_authorization_code() -> Self {
        Self {
            token_url: None,
            grant_type: GrantType::AuthorizationCode,
            client_id: None,
            client_secret: None,
            refresh_token: None,
            scope: None,
            audience: None,
            refresh_skew: Duration::from_secs(default_skew()),
            token_endpoint_auth_method: None,
            private_key: None,
            signing_algorithm: None,
            client_metadata_url: None,
            redirect_port: None,
        }
    }
}

/// The JWS algorithms a `private_key_jwt` assertion can be signed with.
const SIGNING_ALGORITHMS: [&str; 9] = [
    "ES256", "ES384", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA",
];

pub(super) fn parse_oauth(
    key: &str,
    raw: &RawOAuth,
    resolve: &dyn Fn(&str) -> String,
    problems: &mut Vec<String>,
) -> OAuthConfig {
    let token_url = raw
        .token_url
        .as_deref()
        .map(resolve)
        .filter(|v| !v.trim().is_empty());
    if let Some(token_url) = &token_url
        && !url::Url::parse(token_url).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
    {
        problems.push(format!("{key}.oauth.token_url: must be an http(s) URL"));
    }
    let optional = |value: &Option<String>| {
        value
            .as_deref()
            .map(resolve)
            .filter(|v| !v.trim().is_empty())
    };
    let client_id = optional(&raw.client_id);
    let client_secret = optional(&raw.client_secret).map(Secret::new);
    let refresh_token = optional(&raw.refresh_token).map(Secret::new);
    let private_key = optional(&raw.private_key).map(Secret::new);
    let signing_algorithm = optional(&raw.signing_algorithm);
    let client_metadata_url = optional(&raw.client_metadata_url);
    let at = |field: &str| format!("{key}.oauth.{field}");
    match raw.grant_type {
        GrantType::ClientCredentials if client_id.is_none() => problems.push(format!(
            "{}: client_credentials needs a client_id (and a client_secret or private_key)",
            at("client_id")
        )),
        GrantType::RefreshToken if refresh_token.is_none() => problems.push(format!(
            "{}: the refresh_token grant needs a refresh_token (is its $VAR set?)",
            at("refresh_token")
        )),
        // authorization_code needs nothing: the client registers itself, unless a
        // pre-registered client_id (and secret) is given.
        _ => {}
    }
    match raw.token_endpoint_auth_method {
        Some(TokenAuthMethod::PrivateKeyJwt) => {
            if private_key.is_none() {
                problems.push(format!(
                    "{}: private_key_jwt needs a private_key (a PKCS#8 PEM; is its $VAR set?)",
                    at("private_key")
                ));
            }
            if client_id.is_none() {
                problems.push(format!(
                    "{}: private_key_jwt needs the client_id the key is registered for",
                    at("client_id")
                ));
            }
        }
        Some(method @ (TokenAuthMethod::ClientSecretBasic | TokenAuthMethod::ClientSecretPost)) => {
            let name = if method == TokenAuthMethod::ClientSecretBasic {
                "client_secret_basic"
            } else {
                "client_secret_post"
            };
            if client_secret.is_none() {
                problems.push(format!(
                    "{}: {name} needs a client_secret (is its $VAR set?)",
                    at("client_secret")
                ));
            }
            if client_id.is_none() {
                problems.push(format!("{}: {name} needs a client_id", at("client_id")));
            }
        }
        Some(TokenAuthMethod::None) | None => {}
    }
    if let Some(pem) = &private_key
        && !pem.expose().trim_start().starts_with("-----BEGIN")
    {
        problems.push(format!(
            "{}: must be a PEM key (-----BEGIN PRIVATE KEY----- …); put the file's content, or $VAR holding it",
            at("private_key")
        ));
    }
    if let Some(algorithm) = &signing_algorithm
        && !SIGNING_ALGORITHMS.contains(&algorithm.as_str())
    {
        problems.push(format!(
            "{}: {algorithm:?} is not one of {}",
            at("signing_algorithm"),
            SIGNING_ALGORITHMS.join(", ")
        ));
    }
    if let Some(url) = &client_metadata_url
        && !url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
    {
        problems.push(format!(
            "{}: must be the https URL of the client's metadata document",
            at("client_metadata_url")
        ));
    }
    OAuthConfig {
        token_url,
        grant_type: raw.grant_type,
        client_id,
        client_secret,
        refresh_token,
        scope: optional(&raw.scope),
        audience: optional(&raw.audience),
        refresh_skew: Duration::from_secs(raw.refresh_skew_seconds),
        token_endpoint_auth_method: raw.token_endpoint_auth_method,
        private_key,
        signing_algorithm,
        client_metadata_url,
        redirect_port: raw.redirect_port,
    }
}
