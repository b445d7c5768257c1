//! The HTTP API (axum): health, threads, streaming runs, uploads, artifacts, models, agents.
//!
//! Route handlers only translate HTTP to harness calls and errors to `{"error": …}` bodies; the
//! behaviour lives in the harness and the domain modules.

mod agents;
mod approvals;
mod artifacts;
mod auth;
mod auth_failures;
mod channels;
mod commands;
mod edge;
mod error;
mod health;
mod hooks;
mod json_errors;
pub(crate) mod langgraph;
mod mcp;
mod me;
mod memory;
mod memory_history;
mod metrics;
mod models;
mod origin;
pub mod peer;
pub(crate) mod runs;
mod schedules;
mod skills;
mod threads;
mod uploads;
mod usage;
mod users;
mod web;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, patch, post, put};
use tower_http::timeout::TimeoutLayer;

use crate::config::ConfigHandle;
use crate::harness::Harness;

pub use artifacts::artifact_url;
pub use auth::{AuthUser, Caller, LOCAL_USER};
pub use auth_failures::AuthFailures;
pub use error::ApiError;
pub use langgraph::run_live::ApiRuns;

/// Largest JSON body accepted by ordinary routes.
pub(crate) const JSON_BODY_LIMIT: usize = 1024 * 1024;
/// Time limit of ordinary requests; run routes get the run limit instead.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Time limit of `/runs/stream` and `/runs/wait` (a run that long is cancelled by the client).
pub(crate) const RUN_REQUEST_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// Shared state of every handler.
pub struct AppState {
    pub harness: Arc<Harness>,
    pub config: ConfigHandle,
    /// Channel health (for `/readyz`) and webhook endpoints.
    pub channels: crate::channels::ChannelHub,
    /// The listener accepts connections from other hosts (its address is not loopback). With
    /// no `gateway.api_tokens` the API is then locked; see `auth::lock_gate`.
    pub exposed: bool,
    /// The default model's reachability (for `/readyz`), probed at most every 30 s.
    pub model_probe: crate::model::probe::ModelProbe,
    /// Wrong API tokens per client (see `edge`); its log task is the daemon's.
    pub auth_failures: Arc<AuthFailures>,
    /// The webhook channel (`POST /hooks/{endpoint}`).
    pub hooks: crate::hooks::Hooks,
    /// The LangGraph API's runs: their records, frames and followers.
    pub api_runs: Arc<ApiRuns>,
}

/// Builds the full router.
///
/// Layers outside the routes: the edge gate (the Host without tokens, cross-site requests,
/// wrong tokens; see `edge`), the lock gate around it (401 for all but probes and webhooks while
/// the API is locked), then, outermost, the rewrite of every non-JSON error into `{"error": …}`.
pub fn router(state: Arc<AppState>) -> Router {
    let upload_limit = {
        let config = state.config.current();
        // The multipart framing adds a little on top of the files themselves.
        usize::try_from(config.uploads.max_total_size)
            .unwrap_or(usize::MAX)
            .saturating_add(1024 * 1024)
    };
    // The LangGraph-compatible routes answer under `/api` and `/api/langgraph`.
    let runs = langgraph::long_routes()
        // A decision, or a typed `/approve`, may go on to wait for the run it resumes.
        .route(
            "/api/threads/{thread_id}/approvals/{approval_id}",
            post(approvals::decide),
        )
        .route("/api/commands", post(commands::run))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            RUN_REQUEST_TIMEOUT,
        ));
    let uploads = Router::new()
        .route("/api/threads/{thread_id}/uploads", post(uploads::upload))
        .route("/api/skills/install", post(skills::install))
        .layer(DefaultBodyLimit::max(upload_limit));
    let rest = langgraph::short_routes()
        .route("/", get(web::index))
        .route("/favicon.ico", get(web::favicon_ico))
        .route("/favicon.svg", get(web::favicon_svg))
        .route("/assets/{version}/{*path}", get(web::asset))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::metrics))
        .route("/channels/{channel}/webhook", post(channels::webhook))
        .route("/api/models", get(models::list))
        .route("/api/usage", get(usage::usage))
        .route("/api/me", get(me::get))
        .route("/api/me/link", post(me::link))
        .route("/api/users", get(users::list))
        .route("/api/users/link", post(users::link))
        .route("/api/users/unlink", post(users::unlink))
        .route("/api/users/{user_id}", get(users::show))
        .route("/api/approvals", get(approvals::list))
        .route(
            "/api/schedules",
            get(schedules::list).post(schedules::create),
        )
        .route(
            "/api/schedules/{id}",
            get(schedules::get)
                .patch(schedules::change)
                .delete(schedules::remove),
        )
        .route("/api/schedules/{id}/run", post(schedules::run_now))
        .route("/api/agents", get(agents::list).post(agents::create))
        .route("/api/agents/check", get(agents::check))
        .route(
            "/api/agents/{name}",
            get(agents::get).put(agents::update).delete(agents::delete),
        )
        .route("/api/agents/{name}/history", get(agents::history))
        .route("/api/skills", get(skills::list))
        .route(
            "/api/skills/{name}",
            put(skills::update).delete(skills::delete),
        )
        .route("/api/agents/{name}/revert", post(agents::revert))
        .route(
            "/api/mcp/config",
            get(mcp::get_config)
                .put(mcp::put_config)
                .patch(mcp::patch_config),
        )
        .route("/api/mcp/servers", get(mcp::servers))
        .route("/api/memory", get(memory::get).delete(memory::clear))
        .route("/api/memory/facts", post(memory::add_fact))
        .route(
            "/api/memory/facts/{id}",
            patch(memory::patch_fact).delete(memory::delete_fact),
        )
        .route("/api/memory/facts/{id}/confirm", post(memory::confirm_fact))
        .route("/api/memory/export", get(memory::export))
        .route("/api/memory/import", post(memory::import))
        .route("/api/memory/history", get(memory_history::list))
        .route("/api/memory/history/{version}", get(memory_history::get))
        .route("/api/memory/revert", post(memory_history::revert))
        .route(
            "/api/threads/{thread_id}/approvals",
            get(approvals::for_thread),
        )
        .route(
            "/api/threads/{thread_id}/messages/page",
            get(langgraph::messages_page::page),
        )
        .route("/api/threads/{thread_id}/uploads/list", get(uploads::list))
        .route(
            "/api/threads/{thread_id}/uploads/limits",
            get(uploads::limits),
        )
        .route(
            "/api/threads/{thread_id}/uploads/{filename}",
            delete(uploads::remove),
        )
        .route(
            "/api/threads/{thread_id}/artifacts/{*path}",
            get(artifacts::serve),
        )
        .layer(DefaultBodyLimit::max(JSON_BODY_LIMIT))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ));
    // Each endpoint has its own body limit (`max_body_kb`), enforced by the handler.
    let hooks = Router::new()
        .route("/hooks/{endpoint}", post(hooks::deliver))
        .layer(DefaultBodyLimit::disable())
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ));
    let routes = Router::new()
        .merge(runs)
        .merge(hooks)
        .merge(uploads)
        .merge(rest)
        .fallback(error::fallback_not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            edge::edge_gate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::lock_gate,
        ))
        .with_state(state);
    json_errors::with_json_errors(routes)
}
