//! OAuth tokens for remote MCP servers (`client_credentials`, `refresh_token` and
//! `authorization_code` grants): fetched on first use, cached, refreshed `refresh_skew` before
//! they expire; endpoints discovered from the server when not configured (`discovery`), the
//! server's `WWW-Authenticate` challenges answered (`challenge`), the token endpoint spoken to
//! with each client authentication method (`token`), a person's authorization obtained in a
//! browser through a loopback redirect (`login`) and its tokens kept in the data dir
//! (`token_store`).
//!
//! One refresh is in flight per server: callers wait on one async lock and the second finds
//! the token the first fetched. A rotated refresh token replaces the configured one in memory
//! (and, for `authorization_code`, on disk).
//!
//! Without `token_url` nothing is sent until the server's first 401: its challenge says where
//! the protected-resource metadata is, and from there the authorization server (`discovery`).
//! A 403 `insufficient_scope` asks again for the scopes held plus the challenge's (step-up),
//! at most [`attempts::MAX_AUTHORIZATIONS`] times for one scope set.

mod attempts;
pub(crate) mod challenge;
pub(crate) mod discovery;
mod grant;
pub(crate) mod login;
mod login_error;
mod loopback;
mod pkce;
mod registration;
pub(crate) mod token;
pub(crate) mod token_store;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use crate::config::Secret;
use crate::mcp::config::{GrantType, OAuthConfig};
use crate::mcp::oauth::attempts::Attempts;
use crate::mcp::oauth::challenge::Challenge;
use crate::mcp::oauth::discovery::Discovered;
use crate::mcp::oauth::token_store::StoredTokens;

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
    /// An RFC 6749 §5.2 error answer; `hint` says which setting to check.
    #[error(
        "the token endpoint {url} refused the request (HTTP {status}): {error}{}; {hint}",
        description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
    )]
    TokenRefused {
        url: String,
        status: u16,
        error: String,
        description: Option<String>,
        hint: String,
    },
    #[error("the token endpoint {url} answered without an access_token")]
    NoToken { url: String },
    /// Metadata discovery could not find the authorization server.
    #[error("OAuth discovery for {url} failed: {detail}")]
    Discovery { url: String, detail: String },
    /// RFC 9728 §3.3: the metadata is for another resource; authorizing would hand a token
    /// for it to this server.
    #[error(
        "the server {server_url} publishes protected-resource metadata for {resource}, another resource; refusing to authorize (check the server's url, or ask its operator to fix its metadata)"
    )]
    ResourceMismatch {
        server_url: String,
        resource: String,
    },
    /// An authorization-code server without (enough) saved authorization, and nobody at hand
    /// to authorize in a browser.
    #[error(
        "the MCP server {server} needs {}; run `antler mcp login {server}{}` and try again",
        scope.as_deref().map(|s| format!("the scope \"{s}\", beyond its saved authorization")).unwrap_or_else(|| "authorization".to_string()),
        scope.as_deref().map(|s| format!(" --scope \"{s}\"")).unwrap_or_default()
    )]
    LoginRequired {
        server: String,
        scope: Option<String>,
    },
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

struct Cached {
    header: Secret,
    refresh_at: Instant,
}

/// What one server's token source knows; behind the single-flight lock.
#[derive(Default)]
struct State {
    cached: Option<Cached>,
    /// The refresh token in force (rotated by the endpoint when it returns a new one).
    refresh_token: Option<Secret>,
    /// The authorization server, once a challenge led to it.
    discovered: Option<Arc<Discovered>>,
    /// The scope of the token in force (as granted, else as asked for).
    scope: Option<String>,
    /// `authorization_code`: the saved tokens (`None` until loaded or authorized).
    stored: Option<StoredTokens>,
    stored_loaded: bool,
    attempts: Attempts,
}

/// The token source of one server.
pub(crate) struct TokenSource {
    config: OAuthConfig,
    http: reqwest::Client,
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
                refresh_token,
                ..State::default()
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
        let challenge = www_authenticate.map(Challenge::parse).unwrap_or_default();
        let step_up = match status {
            401 => false,
            403 if challenge.is_insufficient_scope() => true,
            _ => return Ok(false),
        };
        // The lock is held across discovery and the token request: the single flight.
        let mut state = self.state.lock().await;
        if !step_up {
            // Refused: whatever happens next, it is not to be sent again.
            state.cached = None;
        }
        if !step_up && self.needs_discovery(&state) {
            let discovered =
                discovery::discover(&self.http, &self.context.server_url, &challenge).await?;
            state.discovered = Some(Arc::new(discovered));
        }
        let scope = if step_up {
            union_scope(state.scope.as_deref(), &challenge.scopes())
        } else {
            self.initial_scope(&state, &challenge)
        };
        let wanted = scope
            .as_deref()
            .map(challenge::split_scope)
            .unwrap_or_default();
        if !state.attempts.allow(&wanted, Instant::now()) {
            tracing::warn!(
                server = %self.context.server_name,
                status,
                scope = scope.as_deref().unwrap_or(""),
                "The MCP server keeps refusing the authorization it asked for; giving up on this request"
            );
            return Ok(false);
        }
        // A step-up replaces the token in force even if the new one cannot be had: the
        // server said what it lacks.
        state.cached = None;
        match self.config.grant_type {
            GrantType::ClientCredentials | GrantType::RefreshToken => {
                self.fetch_into(&mut state, scope).await?;
            }
            GrantType::AuthorizationCode => {
                self.authorize_code(&mut state, &challenge, step_up, scope)
                    .await?;
            }
        }
        Ok(true)
    }

    /// The `Authorization` header value (`Bearer …`), fetching or refreshing when due; `None`
    /// when there is nothing to send yet (an authorization-code server not authorized, or
    /// endpoints not discovered before the server's first challenge).
    pub(crate) async fn authorization(&self) -> Result<Option<Secret>, OAuthError> {
        // The lock is held across the fetch on purpose: it is the single flight.
        let mut state = self.state.lock().await;
        if let Some(cached) = &state.cached
            && Instant::now() < cached.refresh_at
        {
            return Ok(Some(cached.header.clone()));
        }
        match self.config.grant_type {
            GrantType::ClientCredentials | GrantType::RefreshToken => {
                if self.needs_discovery(&state) {
                    return Ok(None);
                }
                let scope = state.scope.clone().or_else(|| self.config.scope.clone());
                self.fetch_into(&mut state, scope).await?;
            }
            GrantType::AuthorizationCode => {
                if !self.use_stored(&mut state).await? {
                    return Ok(None);
                }
            }
        }
        Ok(state.cached.as_ref().map(|c| c.header.clone()))
    }

    /// Endpoints come from discovery (no `token_url`) and it has not run yet.
    fn needs_discovery(&self, state: &State) -> bool {
        self.config.grant_type != GrantType::AuthorizationCode
            && self.config.token_url.is_none()
            && state.discovered.is_none()
    }

    /// The scope of a first authorization: configured, else the challenge's, else the
    /// resource's `scopes_supported` (when discovered), else none.
    fn initial_scope(&self, state: &State, challenge: &Challenge) -> Option<String> {
        match &state.discovered {
            Some(discovered) if self.config.token_url.is_none() => {
                discovery::select_scope(self.config.scope.as_deref(), challenge, discovered)
            }
            _ => self
                .config
                .scope
                .clone()
                .or_else(|| challenge.scope.clone()),
        }
    }

    /// Caches `response` as the token in force.
    fn cache(
        &self,
        state: &mut State,
        token_type: Option<String>,
        access_token: &str,
        lifetime: Duration,
    ) {
        let token_type = token_type
            .filter(|t| !t.trim().is_empty() && !t.eq_ignore_ascii_case("bearer"))
            .unwrap_or_else(|| "Bearer".to_string());
        state.cached = Some(Cached {
            header: Secret::new(format!("{token_type} {access_token}")),
            refresh_at: Instant::now() + lifetime.saturating_sub(self.config.refresh_skew),
        });
    }
}

/// The token's lifetime from `expires_in` (bounded to a year), else [`DEFAULT_LIFETIME`].
fn lifetime_of(expires_in: Option<f64>) -> Duration {
    expires_in
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| Duration::from_secs_f64(s.min(365.0 * 86_400.0)))
        .unwrap_or(DEFAULT_LIFETIME)
}

/// The scopes held plus those asked for, in order, without repeats; `None` when both are empty.
fn union_scope(held: Option<&str>, asked: &[String]) -> Option<String> {
    let mut scopes: Vec<String> = held.map(challenge::split_scope).unwrap_or_default();
    for scope in asked {
        if !scopes.contains(scope) {
            scopes.push(scope.clone());
        }
    }
    (!scopes.is_empty()).then(|| scopes.join(" "))
}

/// An error's text followed by each cause it does not already quote.
pub(crate) fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_up_asks_for_the_scopes_held_and_the_challenged_ones() {
        let asked = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            union_scope(Some("mcp:basic"), &asked(&["mcp:basic", "mcp:write"])).as_deref(),
            Some("mcp:basic mcp:write")
        );
        assert_eq!(union_scope(None, &asked(&["a"])).as_deref(), Some("a"));
        assert_eq!(union_scope(Some(" "), &[]), None);
    }

    #[test]
    fn errors_say_what_to_do() {
        let login = OAuthError::LoginRequired {
            server: "docs".into(),
            scope: None,
        };
        assert_eq!(
            login.to_string(),
            "the MCP server docs needs authorization; run `antler mcp login docs` and try again"
        );
        let step_up = OAuthError::LoginRequired {
            server: "docs".into(),
            scope: Some("a b".into()),
        };
        assert!(
            step_up
                .to_string()
                .contains("run `antler mcp login docs --scope \"a b\"`"),
            "{step_up}"
        );
        let mismatch = OAuthError::ResourceMismatch {
            server_url: "http://localhost:1/mcp".into(),
            resource: "https://evil.example.com/mcp".into(),
        };
        let text = mismatch.to_string();
        assert!(
            text.contains("http://localhost:1/mcp")
                && text.contains("https://evil.example.com/mcp"),
            "{text}"
        );
    }
}
