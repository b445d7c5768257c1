//! `GET /api/usage`: usage by user, day, model and kind of call, with costs in
//! `pricing.currency` and the unpriced models named. Admins (and the local operator) see
//! everyone's, or one user's with `?user=`; anyone else sees only their own.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use crate::http::{ApiError, AppState, AuthUser};
use crate::lead_agent::access::is_admin;
use crate::usage::{MAX_DAYS, UsageStore, report_json, window_rows};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageQuery {
    /// Days up to and including today (1 = today only).
    days: Option<u64>,
    user: Option<String>,
}

pub(crate) async fn usage(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<UsageQuery>,
) -> Result<Json<Value>, ApiError> {
    let config = state.config.current();
    let admin = user.is_operator() || is_admin(&config, &user.0);
    let who = match query.user.map(|u| u.trim().to_string()) {
        Some(other) if !other.is_empty() && other != user.0 => {
            if !admin {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "only admins may see another user's usage; leave out `user`",
                ));
            }
            Some(other)
        }
        _ if admin => None,
        _ => Some(user.0.clone()),
    };
    let days = query.days.unwrap_or(1);
    if !(1..=MAX_DAYS).contains(&days) {
        return Err(ApiError::bad_request(format!(
            "days must be between 1 and {MAX_DAYS}"
        )));
    }
    let store = UsageStore::new(state.harness.threads().store().clone());
    let rows = window_rows(&store, who.as_deref(), days).map_err(ApiError::internal)?;
    Ok(Json(report_json(&rows, &config, days)))
}
