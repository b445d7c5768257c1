//! The LangGraph Platform API's subset that the official SDKs (`langgraph-sdk` for Python,
//! `@langchain/langgraph-sdk` for JS) and DeerFlow's web UI use, served under Antler's own
//! `/api` and under `/api/langgraph` (DeerFlow's proxy path), with the same auth as every
//! `/api` route.
//!
//! Shapes follow the SDKs' types. Antler's own routes that predate it (`/api/threads`,
//! `/api/threads/{id}/runs/stream|wait`, `/api/threads/{id}/state`) are the same handlers:
//! their documented fields stay, the SDK's are added beside them.
//!
//! - `assistants`: `lead_agent` and the caller's custom agents as assistants.
//! - `threads`: search, metadata patch, state read and update, history.
//! - `messages_page`: DeerFlow's reload of a conversation, a page of messages at a time.
//! - `shapes`: a thread and its state as the SDK's `Thread`, `ThreadState`, `Checkpoint`.
//! - `runs`: run records, background runs, join, stream join with `Last-Event-ID`, cancel,
//!   stateless runs, `multitask_strategy`.
//! - `stream`: one run's events as the SSE frames a request's `stream_mode` asks for.
//! - `errors`: what the SDK reads of a refusal (`detail`), 422 naming an unsupported field.

pub(crate) mod assistants;
pub(crate) mod errors;
pub(crate) mod messages_page;
pub(crate) mod run_buffer;
pub(crate) mod run_live;
pub(crate) mod run_start;
pub(crate) mod runs;
pub(crate) mod shapes;
pub(crate) mod stream;
pub(crate) mod thread_runs;
pub(crate) mod threads;

use std::sync::Arc;

use axum::Router;
use axum::routing::{MethodRouter, get, post};

use crate::http::AppState;

/// The bases the LangGraph-compatible routes answer under: Antler's own and DeerFlow's proxy
/// path (`/api/langgraph/threads/…`).
pub(crate) const BASES: [&str; 2] = ["/api", "/api/langgraph"];

/// Adds `route` (a path below a base, such as `/threads/{thread_id}`) under every base.
fn under_bases(
    mut router: Router<Arc<AppState>>,
    route: &str,
    method: MethodRouter<Arc<AppState>>,
) -> Router<Arc<AppState>> {
    for base in BASES {
        router = router.route(&format!("{base}{route}"), method.clone());
    }
    router
}

/// Routes that last as long as a run (streams, waits, joins, a cancel that waits): they get
/// the run time limit.
pub(crate) fn long_routes() -> Router<Arc<AppState>> {
    let mut router = Router::new();
    let routes: [(&str, MethodRouter<Arc<AppState>>); 7] = [
        (
            "/threads/{thread_id}/runs/stream",
            post(thread_runs::stream),
        ),
        ("/threads/{thread_id}/runs/wait", post(thread_runs::wait)),
        ("/threads/{thread_id}/runs/{run_id}/join", get(runs::join)),
        (
            "/threads/{thread_id}/runs/{run_id}/stream",
            get(runs::join_stream).post(runs::join_stream),
        ),
        (
            "/threads/{thread_id}/runs/{run_id}/cancel",
            post(runs::cancel),
        ),
        ("/runs/stream", post(runs::stateless_stream)),
        ("/runs/wait", post(runs::stateless_wait)),
    ];
    for (route, method) in routes {
        router = under_bases(router, route, method);
    }
    router
}

/// Routes answered at once: assistants, threads, run records.
pub(crate) fn short_routes() -> Router<Arc<AppState>> {
    let mut router = Router::new();
    let routes: [(&str, MethodRouter<Arc<AppState>>); 13] = [
        ("/assistants/search", post(assistants::search)),
        ("/assistants/{assistant_id}", get(assistants::get)),
        ("/assistants/{assistant_id}/graph", get(assistants::graph)),
        (
            "/assistants/{assistant_id}/schemas",
            get(assistants::schemas),
        ),
        (
            "/threads",
            post(threads::create).get(crate::http::threads::list),
        ),
        ("/threads/search", post(threads::search)),
        (
            "/threads/{thread_id}",
            get(threads::get)
                .patch(threads::patch)
                .delete(crate::http::threads::delete),
        ),
        (
            "/threads/{thread_id}/state",
            get(threads::state).post(threads::update_state),
        ),
        (
            "/threads/{thread_id}/state/checkpoint",
            post(threads::state_at_checkpoint),
        ),
        (
            "/threads/{thread_id}/state/{checkpoint_id}",
            get(threads::state_at),
        ),
        (
            "/threads/{thread_id}/history",
            get(threads::history).post(threads::history),
        ),
        (
            "/threads/{thread_id}/runs",
            get(runs::list).post(runs::create),
        ),
        ("/threads/{thread_id}/runs/{run_id}", get(runs::get)),
    ];
    for (route, method) in routes {
        router = under_bases(router, route, method);
    }
    router
}
