//! `GET /metrics`: the Prometheus text exposition. Open like the probes (scrapers rarely carry
//! tokens); it holds counts by channel, model and tool, never user ids or message text.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use crate::http::AppState;

pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let (in_flight, _) = state.harness.run_activity();
    crate::metrics::queue_depth("runs_in_flight", in_flight);
    if let Some(memory) = state.harness.memory() {
        crate::metrics::queue_depth("memory_updates", memory.queue.pending());
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::metrics::render(),
    )
}
