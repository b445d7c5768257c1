//! Runs that other routes start and answer themselves (an approval's decision resuming a run,
//! a command): their events as SSE, or their end as `/runs/wait` answers. The run routes
//! themselves are `langgraph::thread_runs` (a thread's `/runs/stream` and `/runs/wait`) and
//! `langgraph::runs` (records, background runs, joins, cancel, stateless runs).

use std::convert::Infallible;

use axum::response::Response;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde_json::{Map, Value};
use tokio_util::task::AbortOnDropHandle;

use crate::agent_api::RunEvent;
use crate::harness::RunHandle;
use crate::http::ApiError;
use crate::http::langgraph::stream::{Encoder, Frame, StreamRequest};

pub(crate) use crate::http::langgraph::thread_runs::run_error;
use crate::http::langgraph::thread_runs::{WaitShape, wait_answer};

/// The SSE form of a frame.
pub(crate) fn sse_of(frame: Frame) -> Event {
    Event::default().event(frame.event).data(frame.data)
}

/// A started run's events as the `/runs/stream` answer, after `lead` (a frame of the caller's
/// own, such as the decision that resumed the run).
pub(crate) fn stream_run(
    handle: RunHandle,
    thread_id: String,
    stream_request: StreamRequest,
    lead: Option<Event>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut encoder = Encoder::new(stream_request, &handle.run_id, &thread_id);
    let mut events = handle.events;
    let stream = async_stream_of(move |tx| async move {
        if let Some(lead) = lead
            && tx.send(lead).await.is_err()
        {
            return;
        }
        let mut frames = Vec::new();
        while let Some(event) = events.recv().await {
            let last = matches!(event, RunEvent::Finished { .. });
            encoder.encode(&event, &mut frames);
            for frame in frames.drain(..) {
                if tx.send(sse_of(frame)).await.is_err() {
                    return;
                }
            }
            if last {
                break;
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Adapts a producer task writing into a bounded channel into a `Stream` of SSE events.
fn async_stream_of<F, Fut>(produce: F) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Event>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    // The stream owns its producer: a client that goes away drops the stream, which aborts it.
    #[allow(clippy::disallowed_methods)]
    let producer = AbortOnDropHandle::new(tokio::spawn(produce(tx)));
    futures::stream::unfold((rx, producer), |(mut rx, producer)| async move {
        rx.recv().await.map(|event| (Ok(event), (rx, producer)))
    })
}

/// Waits for a started run and answers as `/runs/wait` does, with `lead`'s fields first (the
/// decision that resumed the run, the command that did).
pub(crate) async fn wait_run(
    handle: RunHandle,
    thread_id: String,
    lead: Map<String, Value>,
) -> Result<Response, ApiError> {
    // Nobody reads the events of a run waited for: dropping them at once keeps the run's
    // streamed text from queueing up until it ends.
    let RunHandle {
        run_id, outcome, ..
    } = handle;
    let outcome = outcome.await.map_err(ApiError::internal)?;
    wait_answer(outcome, run_id, thread_id, lead, WaitShape::Antler)
}
