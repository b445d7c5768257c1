//! OAuth tokens for remote MCP servers (`client_credentials`, `refresh_token` and
//! `authorization_code` grants): fetched on first use, cached, refreshed `refresh_skew` before
//! they expire; endpoints discovered from the server when not configured (`discovery`), the
//! server's `WWW-Authenticate` challenges answered (`challenge`), the token endpoint spoken to
//! with each client authentication method (`token`), a person's authorization obtained in a
//! browser through a loopback redirect (`login`) and its tokens kept in the data dir
//! (`token_store`).
//!
//! One refresh is in flight per server: callers wait on one async lock and the second finds
//! the token the first fetched. A rotated refresh token replaces the configured one in memory.

pub(crate) mod challenge;
pub(crate) mod discovery;
pub(crate) mod login;
mod loopback;
mod pkce;
mod registration;
pub(crate) mod token;
pub(crate) mod token_store;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::Mutex;

use crate::config::Secret;
use crate::mcp::config::{GrantType, OAuthConfig};

/// A token endpoint that answers slower than this is treated as down.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);
/// Used when the endpoint gives no `expires_in`.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub(crate) enum OAuthError {
    #[error("the token endpoint {url} could not be reached: {detail}")]
    Unreachable { url: String, detail: String },
    #[error(
        "the token endpoint {url} refused the request (HTTP {status}): {body}; check client_id, client_secret and scope"
    )]
    Refused {
        url: String,
        status: u16,
        body: String,
    },
    #[error("the token endpoint {url} answered without an access_token")]
    NoToken { url: String },
    /// What the server or its authorization server asks for cannot be done here; the text
    /// says what to do instead.
    #[error("{0}")]
    Unsupported(String),
    /// The authorization in a browser failed (denied, timed out, no way to register).
    #[error(transparent)]
    Login(#[from] crate::mcp::oauth::login::LoginError),
    /// Authorization-code tokens could not be read or kept.
    #[error(transparent)]
    Store(#[from] crate::mcp::oauth::token_store::TokenStoreError),
}

/// Where a token source stands among its peers: which server, whether a person is at hand to
/// authorize in a browser, and where authorization-code tokens are kept.
#[derive(Clone, Debug, Default)]
#[allow(dead_code)] // contract: the oauth lanes read these
pub(crate) struct TokenContext {
    /// The server's name in `extensions_config.json` (names the token file and the
    /// `antler mcp login NAME` a message tells the operator to run).
    pub server_name: String,
    /// The server's MCP endpoint (the resource the token is for, RFC 8707).
    pub server_url: String,
    /// Where `authorization_code` tokens are read and written (`None`: kept in memory only).
    pub token_dir: Option<PathBuf>,
    /// A person runs this (`antler mcp probe`/`login`): a missing or too narrow authorization
    /// may be obtained in a browser. The daemon never does; it says to run `antler mcp login`.
    pub interactive: bool,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<f64>,
    #[serde(default)]
    refresh_token: Option<String>,
}

struct Cached {
    header: Secret,
    refresh_at: Instant,
}

struct State {
    cached: Option<Cached>,
    /// The refresh token in force (rotated by the endpoint when it returns a new one).
    refresh_token: Option<Secret>,
}

/// The token source of one server.
pub(crate) struct TokenSource {
    config: OAuthConfig,
    http: reqwest::Client,
    #[allow(dead_code)] // contract: used by discovery, login and step-up
    context: TokenContext,
    state: Mutex<State>,
}

impl TokenSource {
    pub(crate) fn new(config: OAuthConfig, http: reqwest::Client, context: TokenContext) -> Self {
        let refresh_token = config.refresh_token.clone();
        Self {
            config,
            http,
            context,
            state: Mutex::new(State {
                cached: None,
                refresh_token,
            }),
        }
    }

    /// The server answered `status` (401 or 403) with `www_authenticate`: obtain what it asks
    /// for (discover the authorization server, fetch a token, widen the scope, or, when
    /// interactive, authorize in a browser). `Ok(true)`: retry the request with the new
    /// `authorization()`; `Ok(false)`: nothing more can be done, fail the request as it is.
    pub(crate) async fn challenge(
        &self,
        status: u16,
        www_authenticate: Option<&str>,
    ) -> Result<bool, OAuthError> {
        let _ = www_authenticate;
        if status == 401 {
            self.invalidate().await;
        }
        Ok(false)
    }

    /// The `Authorization` header value (`Bearer …`), fetching or refreshing when due; `None`
    /// when there is nothing to send yet (an authorization-code server not authorized, or
    /// endpoints not discovered before the server's first challenge).
    pub(crate) async fn authorization(&self) -> Result<Option<Secret>, OAuthError> {
        self.authorization_header().await.map(Some)
    }

    async fn authorization_header(&self) -> Result<Secret, OAuthError> {
        // The lock is held across the fetch on purpose: it is the single flight.
        let mut state = self.state.lock().await;
        if let Some(cached) = &state.cached
            && Instant::now() < cached.refresh_at
        {
            return Ok(cached.header.clone());
        }
        let response = self.fetch(state.refresh_token.as_ref()).await?;
        let lifetime = response
            .expires_in
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(|s| Duration::from_secs_f64(s.min(365.0 * 86_400.0)))
            .unwrap_or(DEFAULT_LIFETIME);
        let refresh_in = lifetime.saturating_sub(self.config.refresh_skew);
        let token_type = response
            .token_type
            .filter(|t| !t.trim().is_empty())
            .map(|t| {
                if t.eq_ignore_ascii_case("bearer") {
                    "Bearer".to_string()
                } else {
                    t
                }
            })
            .unwrap_or_else(|| "Bearer".to_string());
        let header = Secret::new(format!("{token_type} {}", response.access_token));
        if let Some(rotated) = response.refresh_token.filter(|t| !t.is_empty()) {
            state.refresh_token = Some(Secret::new(rotated));
        }
        state.cached = Some(Cached {
            header: header.clone(),
            refresh_at: Instant::now() + refresh_in,
        });
        tracing::debug!(
            token_url = ?self.config.token_url,
            expires_in = lifetime.as_secs(),
            "Fetched an OAuth token for an MCP server"
        );
        Ok(header)
    }

    /// Forgets the cached token (the server said 401), so the next call fetches a new one.
    pub(crate) async fn invalidate(&self) {
        self.state.lock().await.cached = None;
    }

    async fn fetch(&self, refresh_token: Option<&Secret>) -> Result<TokenResponse, OAuthError> {
        let Some(url) = &self.config.token_url else {
            return Err(OAuthError::Unsupported(
                "no oauth.token_url is set and discovery is not built yet".into(),
            ));
        };
        let mut form: Vec<(&str, &str)> = Vec::new();
        match self.config.grant_type {
            GrantType::ClientCredentials => form.push(("grant_type", "client_credentials")),
            GrantType::RefreshToken | GrantType::AuthorizationCode => {
                form.push(("grant_type", "refresh_token"));
                if let Some(token) = refresh_token {
                    form.push(("refresh_token", token.expose()));
                }
            }
        }
        if let Some(id) = &self.config.client_id {
            form.push(("client_id", id));
        }
        if let Some(secret) = &self.config.client_secret {
            form.push(("client_secret", secret.expose()));
        }
        if let Some(scope) = &self.config.scope {
            form.push(("scope", scope));
        }
        if let Some(audience) = &self.config.audience {
            form.push(("audience", audience));
        }
        let body = form
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let unreachable = |e: reqwest::Error| OAuthError::Unreachable {
            url: url.clone(),
            detail: e.to_string(),
        };
        let response = self
            .http
            .post(url)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(TOKEN_TIMEOUT)
            .body(body)
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(OAuthError::Refused {
                url: url.clone(),
                status: status.as_u16(),
                body: body.chars().take(300).collect(),
            });
        }
        response
            .json::<TokenResponse>()
            .await
            .ok()
            .filter(|t| !t.access_token.is_empty())
            .ok_or_else(|| OAuthError::NoToken { url: url.clone() })
    }
}

fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}
