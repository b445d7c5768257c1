//! `GET /api/me`: who the caller is and which accounts act as them. `POST /api/me/link`: with
//! no body, a one-time code for the caller's user; with `{"code": …}`, the caller's API account
//! joins the user the code was issued for (see [`crate::identity`]).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{ApiError, AppState, AuthUser};
use crate::identity::{AccountView, Identities, IdentityError, Refusal, rfc3339};
use crate::users::UsersError;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkBody {
    code: Option<String>,
}

pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
) -> Result<Json<Value>, ApiError> {
    let config = state.config.current();
    let identities = Identities::new(state.harness.threads().store().clone());
    let accounts = identities
        .all_accounts_of(&config, &user.0, user.2.as_ref())
        .map_err(identity_error)?;
    let accounts: Vec<AccountView> = accounts.iter().map(AccountView::of).collect();
    Ok(Json(json!({"user_id": user.0, "accounts": accounts})))
}

pub(crate) async fn link(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let body: LinkBody = if body.iter().all(u8::is_ascii_whitespace) {
        LinkBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|error| {
            ApiError::bad_request(format!(
                "the body must be empty (for a code) or {{\"code\": \"…\"}}: {error}"
            ))
        })?
    };
    let Some(account) = user.2.clone() else {
        return Err(ApiError::bad_request(
            "a socket request naming its user has no account to link; leave out the user \
             header, or use `antler users link`",
        ));
    };
    let config = state.config.current();
    let identities = Identities::new(state.harness.threads().store().clone());
    let now_ms = state.harness.cluster().now_ms();
    match body.code {
        None => {
            let issued = identities
                .issue(&config, &account, now_ms)
                .map_err(identity_error)?;
            Ok(Json(json!({
                "code": issued.code,
                "expires_at": rfc3339(issued.expires_at_ms),
                "user_id": issued.user_id,
            })))
        }
        Some(code) => {
            let joined = identities
                .redeem(&config, &account, &code, now_ms)
                .map_err(identity_error)?;
            let reply = crate::commands::link_reply(&state.harness, &config, &account, &joined)
                .map_err(users_error)?;
            Ok(Json(json!({
                "user_id": joined.user_id,
                "previous_user_id": joined.previous_user,
                "account": account.key(),
                "message": reply,
            })))
        }
    }
}

pub(crate) fn users_error(error: UsersError) -> ApiError {
    match error {
        UsersError::Identity(error) => identity_error(error),
        other => ApiError::internal(other),
    }
}

/// A refusal is the caller's to fix (4xx, its text saying how); anything else is ours.
pub(crate) fn identity_error(error: IdentityError) -> ApiError {
    let IdentityError::Refused(refusal) = error else {
        return ApiError::internal(error);
    };
    let (status, code) = match &refusal {
        Refusal::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
        Refusal::AlreadyLinked { .. } | Refusal::Provisioned { .. } | Refusal::SameUser { .. } => {
            (StatusCode::CONFLICT, "link_conflict")
        }
        Refusal::NotLinked { .. } => (StatusCode::NOT_FOUND, "not_linked"),
        _ => (StatusCode::BAD_REQUEST, "link_refused"),
    };
    ApiError::new(status, code, refusal.to_string())
}
