//! Bearer-token authentication: `gateway.api_tokens` maps tokens to user ids.
//!
//! With no tokens configured the daemon only binds loopback (enforced at startup) and every
//! request acts as the single local user, so a fresh install works without set-up.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use subtle::ConstantTimeEq;

use crate::http::AppState;
use crate::http::error::ApiError;

/// The user id every request acts as when no API tokens are configured.
pub const LOCAL_USER: &str = "local";

/// The authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthUser(pub String);

impl FromRequestParts<std::sync::Arc<AppState>> for AuthUser {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &std::sync::Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let config = state.config.current();
        let tokens = &config.gateway.api_tokens;
        if tokens.is_empty() {
            return Ok(AuthUser(LOCAL_USER.to_string()));
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
            .map(|user| AuthUser(user.to_string()))
            .ok_or_else(ApiError::unauthorized)
    }
}
