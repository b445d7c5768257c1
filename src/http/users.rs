//! The operator's view of users and their accounts (`antler users` talks to these over the
//! daemon's socket): `GET /api/users`, `GET /api/users/{user_id}`, `POST /api/users/link`
//! (`{"account": "slack:U1", "user": "alice"}`) and `POST /api/users/unlink`
//! (`{"account": …}`). Admins and the local operator only.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::custom_agents::AgentStore;
use crate::http::me::{identity_error, users_error};
use crate::http::{ApiError, AppState, AuthUser};
use crate::identity::{Account, Identities, is_admin};
use crate::users::{Holdings, HoldingsView};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LinkBody {
    account: String,
    #[serde(default)]
    user: Option<String>,
}

fn require_admin(state: &AppState, user: &AuthUser) -> Result<(), ApiError> {
    if user.is_operator() || is_admin(&state.config.current(), &user.0) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        "only admins may see or change other users' accounts; GET /api/me shows your own",
    ))
}

fn identities(state: &AppState) -> Identities {
    Identities::new(state.harness.threads().store().clone())
}

pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &user)?;
    let config = state.config.current();
    let users = identities(&state)
        .summaries(&config)
        .map_err(identity_error)?;
    Ok(Json(json!({ "users": users })))
}

pub(crate) async fn show(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(user_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &user)?;
    crate::paths::validate_id("user", &user_id)?;
    let config = state.config.current();
    let report = crate::users::report(
        &identities(&state),
        &config,
        state.harness.threads().store(),
        state.harness.agents(),
        &user_id,
    )
    .map_err(users_error)?;
    Ok(Json(json!(report)))
}

pub(crate) async fn link(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Json(body): Json<LinkBody>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &user)?;
    let account =
        Account::parse(&body.account).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let Some(target) = body.user else {
        return Err(ApiError::bad_request(
            "`user` is required: the user the account joins",
        ));
    };
    crate::paths::validate_id("user", &target)?;
    let config = state.config.current();
    let now_ms = state.harness.cluster().now_ms();
    let joined = identities(&state)
        .link_by_admin(&config, &account, &target, now_ms)
        .map_err(identity_error)?;
    let left = Holdings::of(
        state.harness.threads().store(),
        &AgentStore::new(config.data_dir()),
        &joined.previous_user,
    )
    .map_err(users_error)?;
    Ok(Json(json!({
        "account": account.key(),
        "user_id": joined.user_id,
        "previous_user_id": joined.previous_user,
        "previous_user_holds": HoldingsView::from(left),
    })))
}

pub(crate) async fn unlink(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Json(body): Json<LinkBody>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &user)?;
    let account =
        Account::parse(&body.account).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let config = state.config.current();
    let unlinked = identities(&state)
        .unlink(&config, &account)
        .map_err(identity_error)?;
    Ok(Json(json!({
        "account": account.key(),
        "user_id": unlinked.user_id,
        "from_user_id": unlinked.from_user,
    })))
}
