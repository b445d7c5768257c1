//! Bearer-token authentication: `gateway.api_tokens` maps tokens to user ids.
//!
//! With no tokens configured on a loopback listener every request acts as the single local
//! user, so a fresh install works without set-up. On a listener other hosts can reach, no tokens
//! means the API is *locked*: the daemon still starts (a container must be reachable for its
//! probes and channel webhooks), but everything except those answers 401 until a token is added.
//!
//! Requests over the daemon's Unix socket (`daemon::local_socket` marks them with
//! [`LocalOperator`]) are the local operator, locked or not: no token, they act as the user
//! named by the `x-antler-user` header (default `local`) and may manage any user's agents, as
//! the `antler agents` CLI may on the data dir.
//!
//! The user a token (or the token-less `local`) names is an account, `api:{user}`: when
//! `identities:` or a link joins it to another user, the request acts as that user
//! ([`crate::identity`]). A socket request naming its user explicitly acts as exactly that user.

use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::config::ApiToken;
use crate::http::AppState;
use crate::http::error::ApiError;
use crate::http::peer::{LocalOperator, USER_HEADER};
use crate::identity::{Account, Identities};

/// The user id every request acts as when no API tokens are configured.
pub const LOCAL_USER: &str = "local";

/// The authenticated caller: the user id the request acts as, how it got it, and the account it
/// came as (`None`: a socket request naming its user, which is no account of anyone's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthUser(pub String, pub Caller, pub Option<Account>);

/// How a caller was authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// A bearer token from `gateway.api_tokens`.
    Token,
    /// No tokens are configured and the listener is loopback: the single local user.
    Tokenless,
    /// The daemon's local socket: the operator, trusted like the CLI on the data dir.
    LocalOperator,
}

impl AuthUser {
    /// Whether the caller is the local operator (over the socket), who may act for any user.
    pub fn is_operator(&self) -> bool {
        self.1 == Caller::LocalOperator
    }
}

impl FromRequestParts<Arc<AppState>> for AuthUser {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let config = state.config.current();
        let (account, caller) = if parts.extensions.get::<LocalOperator>().is_some() {
            match operator(parts)? {
                Some(user) => return Ok(AuthUser(user, Caller::LocalOperator, None)),
                None => (Account::api(LOCAL_USER), Caller::LocalOperator),
            }
        } else {
            let tokens = &config.gateway.api_tokens;
            if tokens.is_empty() {
                // The lock gate refuses these requests first; this keeps a route that slipped
                // past it from acting as the local user for the whole network.
                if state.exposed {
                    return Err(ApiError::api_locked());
                }
                (Account::api(LOCAL_USER), Caller::Tokenless)
            } else {
                let presented = bearer(&parts.headers).ok_or_else(ApiError::unauthorized)?;
                let user = token_user(tokens, presented).ok_or_else(ApiError::unauthorized)?;
                (Account::api(user), Caller::Token)
            }
        };
        let user = Identities::new(state.harness.threads().store().clone())
            .user_of(&config, &account)
            .map_err(ApiError::internal)?;
        Ok(AuthUser(user, caller, Some(account)))
    }
}

/// The token of an `Authorization: Bearer …` header.
pub(crate) fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
}

/// The user a presented token acts as, if it is one of `tokens`. The one check of a token: the
/// edge gate (which slows down wrong ones) and this extractor both ask it.
pub(crate) fn token_user<'a>(tokens: &'a [ApiToken], presented: &str) -> Option<&'a str> {
    // Compare against every token in constant time so timing reveals nothing.
    let mut matched: Option<&str> = None;
    for entry in tokens {
        if bool::from(entry.token.expose().as_bytes().ct_eq(presented.as_bytes())) {
            matched = Some(&entry.user);
        }
    }
    matched
}

/// The user a socket request's header names (checked like every id); `None` without one (the
/// request is then the `local` account).
fn operator(parts: &Parts) -> Result<Option<String>, ApiError> {
    let Some(value) = parts.headers.get(USER_HEADER) else {
        return Ok(None);
    };
    let user = value.to_str().unwrap_or_default().trim().to_string();
    crate::paths::validate_id("user", &user)?;
    Ok(Some(user))
}

/// Whether the API is locked: reachable from other hosts with no token to check.
///
/// The tokens are read live, so adding one to the config file unlocks without a restart.
pub(crate) fn api_locked(state: &AppState) -> bool {
    state.exposed && state.config.current().gateway.api_tokens.is_empty()
}

/// Routes served while the API is locked: probes, channel webhooks (each checks its own
/// platform secret) and webhook endpoints (each checks its signature). Matched against the route pattern, not the raw path, so no spelling of a
/// URL reaches a locked route through an open prefix; unmatched paths stay locked too.
pub(crate) fn open_while_locked(route: &str) -> bool {
    matches!(route, "/healthz" | "/readyz" | "/metrics")
        || route.starts_with("/channels/")
        || route.starts_with("/hooks/")
}

/// Layer answering 401 `api_locked` for every route but the open ones while the API is locked.
/// The local socket is never locked: it is the operator's, guarded by file permissions.
pub(crate) async fn lock_gate(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if api_locked(&state) && request.extensions().get::<LocalOperator>().is_none() {
        let route = request
            .extensions()
            .get::<MatchedPath>()
            .map(MatchedPath::as_str);
        if !route.is_some_and(open_while_locked) {
            return ApiError::api_locked().into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_probes_and_channel_webhooks_stay_open() {
        for open in [
            "/healthz",
            "/readyz",
            "/channels/telegram/webhook",
            "/channels/{name}/webhook",
            "/hooks/{endpoint}",
        ] {
            assert!(open_while_locked(open), "{open}");
        }
        for locked in [
            "/",
            "/api/threads",
            "/api/threads/{thread_id}/state",
            "/healthz/x",
            "/channels",
            "/api/channels/x",
        ] {
            assert!(!open_while_locked(locked), "{locked}");
        }
    }
}
