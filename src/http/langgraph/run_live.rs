//! The runs of the LangGraph-compatible API while they are in flight and a short while after:
//! their frame buffers, their records' current form, what undoing them needs, and how a client
//! reads their frames as SSE (the request that started a run and any joiner alike).
//!
//! Starting runs, the busy-thread strategies and the task that follows a run to its end are
//! `run_start`. Ended runs stay here [`RETAIN_ENDED`] (at most [`MAX_RETAINED`] of them) so a
//! late `join_stream` still gets their frames; they are dropped lazily, when the map is next
//! written, so no timer task outlives the runs.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::run_buffer::{FrameBuffer, Read};
use super::stream::Frame;
use crate::agent::RunOutcome;
use crate::api_runs::{ApiRun, RunRecords};
use crate::harness::Harness;
use antler_store::log::Head;

/// How long an ended run's frames stay for a late joiner.
pub(crate) const RETAIN_ENDED: Duration = Duration::from_secs(120);
/// Ended runs kept at most (the oldest go first past it): with the per-run bound of
/// `run_buffer`, what ended runs can hold is bounded (most runs' frames weigh kilobytes; a
/// long thread's `values` frames make the large ones).
pub(crate) const MAX_RETAINED: usize = 64;

/// The API's runs: the records in the store and the live ones in memory.
pub struct ApiRuns {
    pub(super) harness: Arc<Harness>,
    pub(crate) records: RunRecords,
    live: Mutex<HashMap<String, Arc<LiveRun>>>,
    /// One FIFO per thread for enqueued runs (tokio's mutex queues its waiters in order).
    pub(super) queues: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// One run of the API, from its acknowledgement to a while after its end.
pub(crate) struct LiveRun {
    pub(crate) run_id: String,
    pub(crate) thread_id: String,
    /// The caller (the thread's owner).
    pub(crate) user_id: String,
    pub(crate) frames: FrameBuffer,
    /// The record as last written.
    pub(super) record: Mutex<ApiRun>,
    /// The thread's head before the run started (`Some(None)`: the thread had no checkpoint);
    /// `None` until it starts.
    pub(super) head_before: Mutex<Option<Option<Head>>>,
    /// Undo the run when it ends (its changes and its record).
    pub(super) rollback: AtomicBool,
    /// Ends a run still waiting for its thread.
    pub(super) waiting: CancellationToken,
    /// Remove its thread when it ends (a stateless run).
    pub(super) temporary: bool,
    pub(super) ended_at: Mutex<Option<Instant>>,
    /// Where the outcome goes, for the request waiting for it (`/runs/wait`).
    pub(super) outcome: Mutex<Option<oneshot::Sender<RunOutcome>>>,
}

impl LiveRun {
    pub(super) fn new(record: ApiRun, user_id: &str, temporary: bool) -> Self {
        Self {
            run_id: record.run_id.clone(),
            thread_id: record.thread_id.clone(),
            user_id: user_id.to_string(),
            frames: FrameBuffer::default(),
            record: Mutex::new(record),
            head_before: Mutex::new(None),
            rollback: AtomicBool::new(false),
            waiting: CancellationToken::new(),
            temporary,
            ended_at: Mutex::new(None),
            outcome: Mutex::new(None),
        }
    }

    /// The record as last written.
    pub(crate) fn record(&self) -> ApiRun {
        lock(&self.record).clone()
    }

    /// Whether the run has started and not ended.
    pub(super) fn is_running(&self) -> bool {
        lock(&self.head_before).is_some() && !self.frames.is_done()
    }

    pub(crate) fn request_rollback(&self) {
        self.rollback.store(true, Ordering::SeqCst);
    }
}

impl ApiRuns {
    /// The API's runs over the harness's store. Runs a stop left `pending` or `running` (their
    /// thread has no run in flight) are marked `interrupted` first.
    pub fn open(harness: Arc<Harness>) -> Self {
        let records = RunRecords::new(harness.threads().store().clone());
        match records.sweep(|thread_id| harness.active_run(thread_id).is_some()) {
            Ok(swept) if !swept.is_empty() => {
                let runs: Vec<&str> = swept.iter().map(|run| run.run_id.as_str()).collect();
                tracing::warn!(?runs, "Runs a stop left unfinished were marked interrupted");
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "Could not look for runs a stop left unfinished");
            }
        }
        Self {
            harness,
            records,
            live: Mutex::new(HashMap::new()),
            queues: Mutex::new(HashMap::new()),
        }
    }

    /// The live run `run_id` of `thread_id`, if it is in flight or ended a short while ago.
    pub(crate) fn live(&self, thread_id: &str, run_id: &str) -> Option<Arc<LiveRun>> {
        lock(&self.live)
            .get(run_id)
            .filter(|live| live.thread_id == thread_id)
            .cloned()
    }

    /// The run of the API in flight on `thread_id` (started, not ended), if any.
    pub(super) fn running_on(&self, thread_id: &str) -> Option<Arc<LiveRun>> {
        lock(&self.live)
            .values()
            .find(|live| live.thread_id == thread_id && live.is_running())
            .cloned()
    }

    pub(super) fn insert(&self, run: Arc<LiveRun>) {
        let mut live = lock(&self.live);
        let now = Instant::now();
        let mut ended: Vec<(Instant, String)> = live
            .values()
            .filter_map(|run| lock(&run.ended_at).map(|at| (at, run.run_id.clone())))
            .collect();
        ended.sort();
        let excess = ended.len().saturating_sub(MAX_RETAINED);
        for (index, (at, run_id)) in ended.iter().enumerate() {
            if index < excess || now.duration_since(*at) > RETAIN_ENDED {
                live.remove(run_id);
            }
        }
        live.insert(run.run_id.clone(), run);
    }

    /// Cancels `run` when dropped before the run ends: held by a request whose client going
    /// away should stop the run.
    pub(crate) fn cancel_on_drop(&self, run: Arc<LiveRun>) -> CancelOnDrop {
        CancelOnDrop {
            harness: self.harness.clone(),
            run,
        }
    }

    /// The FIFO of `thread_id`'s enqueued runs.
    pub(super) fn queue_of(&self, thread_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut queues = lock(&self.queues);
        queues.retain(|_, queue| Arc::strong_count(queue) > 1);
        queues.entry(thread_id.to_string()).or_default().clone()
    }

    /// The run's frames as an SSE answer, after the frame `after` (0: from the start); `modes`
    /// keeps only those stream modes' frames (the lifecycle ones always pass). With
    /// `cancel_on_disconnect`, a client that goes away before the run ends cancels it.
    pub(crate) fn sse(
        &self,
        run: Arc<LiveRun>,
        after: u64,
        modes: Option<Vec<String>>,
        cancel_on_disconnect: bool,
    ) -> Response {
        let headers = run_headers(&run);
        let guard = cancel_on_disconnect.then(|| self.cancel_on_drop(run.clone()));
        let reader = Reader {
            run,
            after,
            queue: VecDeque::new(),
            modes,
            guard,
        };
        let stream = futures::stream::unfold(reader, Reader::next);
        let sse: Sse<_> = Sse::new(stream).keep_alive(KeepAlive::default());
        (headers, sse).into_response()
    }
}

/// `Content-Location` (the run, read by the SDKs' `on_run_created`) and `Location` (where a
/// dropped stream reconnects), relative to the API base the client uses.
pub(crate) fn run_headers(run: &LiveRun) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let path = format!("/threads/{}/runs/{}", run.thread_id, run.run_id);
    if let Ok(value) = HeaderValue::from_str(&path) {
        headers.insert(header::CONTENT_LOCATION, value);
    }
    if let Ok(value) = HeaderValue::from_str(&format!("{path}/stream")) {
        headers.insert(header::LOCATION, value);
    }
    headers
}

/// One client's read of a run's frames.
struct Reader {
    run: Arc<LiveRun>,
    after: u64,
    queue: VecDeque<Event>,
    modes: Option<Vec<String>>,
    guard: Option<CancelOnDrop>,
}

impl Reader {
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some((Ok(event), self));
            }
            let mut changes = self.run.frames.subscribe();
            let Self {
                run,
                queue,
                modes,
                after,
                ..
            } = &mut self;
            let read = run.frames.read_after(*after, |id, frame| {
                if wanted(modes.as_deref(), frame) {
                    queue.push_back(sse_event(id, frame));
                }
            });
            match read {
                Read::Frames { last_id } => self.after = last_id,
                Read::Done => {
                    // The run has ended: nothing to cancel when the client goes.
                    self.guard = None;
                    return None;
                }
                Read::Empty => {
                    let _ = changes.changed().await;
                }
            }
        }
    }
}

/// The SSE event of a buffered frame, its id the client resumes after.
fn sse_event(id: u64, frame: &Frame) -> Event {
    Event::default()
        .id(id.to_string())
        .event(frame.event.as_ref())
        .data(&frame.data)
}

/// Whether a joiner that asked for `modes` gets `frame` (lifecycle frames always).
fn wanted(modes: Option<&[String]>, frame: &Frame) -> bool {
    let Some(modes) = modes else { return true };
    let base = frame.event.split('|').next().unwrap_or_default();
    if matches!(base, "metadata" | "end" | "error") {
        return true;
    }
    modes.iter().any(|mode| {
        let mode = if mode == "messages-tuple" {
            "messages"
        } else {
            mode
        };
        mode == base || (mode == "messages" && base.starts_with("messages/"))
    })
}

/// Cancels a run when the client streaming it goes away before its end
/// (`on_disconnect: cancel`, `cancel_on_disconnect`).
pub(crate) struct CancelOnDrop {
    harness: Arc<Harness>,
    run: Arc<LiveRun>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.run.frames.is_done() {
            return;
        }
        tracing::info!(run_id = %self.run.run_id, thread_id = %self.run.thread_id, "The client streaming a run went away; cancelling the run");
        self.run.waiting.cancel();
        self.harness
            .cancel_run(&self.run.thread_id, &self.run.run_id);
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn frame(event: &'static str) -> Frame {
        Frame {
            event: Cow::Borrowed(event),
            data: "{}".into(),
        }
    }

    #[test]
    fn a_joiner_gets_the_modes_it_asked_for_and_the_lifecycle() {
        let modes = vec!["messages-tuple".to_string(), "updates".to_string()];
        let modes = Some(modes.as_slice());
        assert!(wanted(modes, &frame("messages")));
        assert!(wanted(modes, &frame("updates|tools:1")));
        assert!(wanted(modes, &frame("metadata")));
        assert!(wanted(modes, &frame("end")));
        assert!(!wanted(modes, &frame("values")));
        assert!(wanted(None, &frame("values")));
    }
}
