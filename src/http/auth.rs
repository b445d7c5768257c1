//! Bearer-token authentication: `gateway.api_tokens` maps tokens to user ids.
//!
//! With no tokens configured the daemon only binds loopback (enforced at startup) and every
//! request acts as the single local user, so a fresh install works without set-up.
//!
//! Requests over the daemon's Unix socket (see [`crate::local_socket`]) are the local operator:
//! no token, they act as the user named by the `x-antler-user` header (default `local`) and may
//! manage any user's agents, as the `antler agents` CLI may on the data dir itself.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use subtle::ConstantTimeEq;

use crate::http::AppState;
use crate::http::error::ApiError;
use crate::local_socket::{LocalOperator, USER_HEADER};

/// The user id every request acts as when no API tokens are configured.
pub const LOCAL_USER: &str = "local";

/// The authenticated caller: the user id the request acts as, and how it got it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthUser(pub String, pub Caller);

/// How a caller was authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// A bearer token from `gateway.api_tokens`.
    Token,
    /// No tokens are configured, so the daemon listens on loopback only.
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

impl FromRequestParts<std::sync::Arc<AppState>> for AuthUser {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &std::sync::Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        if parts.extensions.get::<LocalOperator>().is_some() {
            return operator(parts);
        }
        let config = state.config.current();
        let tokens = &config.gateway.api_tokens;
        if tokens.is_empty() {
            return Ok(AuthUser(LOCAL_USER.to_string(), Caller::Tokenless));
        }
        let presented = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .ok_or_else(ApiError::unauthorized)?;
        // Compare against every token in constant time so timing reveals nothing.
        let mut matched: Option<&str> = None;
        for entry in tokens {
            if bool::from(entry.token.expose().as_bytes().ct_eq(presented.as_bytes())) {
                matched = Some(&entry.user);
            }
        }
        matched
            .map(|user| AuthUser(user.to_string(), Caller::Token))
            .ok_or_else(ApiError::unauthorized)
    }
}

/// A socket request acts as the user its header names (checked like every id), else `local`.
fn operator(parts: &Parts) -> Result<AuthUser, ApiError> {
    let user = match parts.headers.get(USER_HEADER) {
        None => LOCAL_USER.to_string(),
        Some(value) => {
            let user = value.to_str().unwrap_or_default().trim().to_string();
            crate::paths::validate_id("user", &user)?;
            user
        }
    };
    Ok(AuthUser(user, Caller::LocalOperator))
}
