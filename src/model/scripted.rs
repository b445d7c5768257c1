//! An in-process scripted model: replays queued turns (text chunks, tool calls, errors).
//!
//! Used by `antler bench` (harness cost without network) and by unit tests. It is a real
//! [`ChatModel`]: the loop cannot tell it from a provider.
//!
//! A call beyond the script is a bug in the test: it is answered with an error *and* counted,
//! and dropping a model that saw such a call panics (fails the test), unless the test opted in
//! with [`ScriptedModel::allow_unscripted`]. A cycling model never runs out.
//!
//! Title and memory-update calls ([`background_call`]) get a neutral answer and are logged
//! apart ([`ScriptedModel::background_requests`]), so the run's model does not lose scripted
//! turns to them; a test about them opts in with [`ScriptedModel::with_background_script`].

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;

use crate::model::background::background_call;
use crate::model::{ChatModel, ModelError, ModelEvent, ModelRequest, ModelStream};
use antler_store::messages::{AiMessage, FinishReason, ToolCall, Usage};

/// One scripted model answer.
#[derive(Clone, Debug)]
pub enum ScriptedTurn {
    /// Streamed as the given chunks, then completed with `finish_reason: stop`.
    Text(Vec<String>),
    /// Optional text, then tool calls, completed with `finish_reason: tool_calls`.
    ToolCalls {
        text: String,
        calls: Vec<(String, Value)>,
    },
    /// A full message as-is (for finish reasons, usage, reasoning…).
    Message(AiMessage),
    /// `stream()` fails with this error.
    Fail(ModelErrorKind),
    /// Stream the chunks slowly (per-chunk delay), for cancellation and shutdown tests.
    Slow {
        chunks: Vec<String>,
        delay: Duration,
    },
}

/// Cloneable description of an error to inject.
#[derive(Clone, Debug)]
pub enum ModelErrorKind {
    Connect,
    RateLimited,
    Status(u16),
    MidStream,
}

/// A model that answers from a script and records every request it receives.
pub struct ScriptedModel {
    name: String,
    turns: Mutex<VecDeque<ScriptedTurn>>,
    /// When the script runs out: repeat this turn forever (benchmarks) or fail (tests).
    repeat: Option<Vec<ScriptedTurn>>,
    cursor: Mutex<usize>,
    requests: Mutex<Vec<ModelRequest>>,
    unscripted: AtomicUsize,
    allow_unscripted: AtomicBool,
    /// Title and memory-update calls come from the script too (a dedicated title model).
    script_background: bool,
    background_requests: Mutex<Vec<ModelRequest>>,
}

impl ScriptedModel {
    pub fn new(name: impl Into<String>, turns: impl IntoIterator<Item = ScriptedTurn>) -> Self {
        Self {
            name: name.into(),
            turns: Mutex::new(turns.into_iter().collect()),
            repeat: None,
            cursor: Mutex::new(0),
            requests: Mutex::new(Vec::new()),
            unscripted: AtomicUsize::new(0),
            allow_unscripted: AtomicBool::new(false),
            script_background: false,
            background_requests: Mutex::new(Vec::new()),
        }
    }

    /// A model that cycles through `turns` forever and keeps no request log.
    pub fn cycling(name: impl Into<String>, turns: Vec<ScriptedTurn>) -> Self {
        let mut model = Self::new(name, []);
        model.repeat = Some(turns);
        model
    }

    pub fn text(name: impl Into<String>, answer: &str) -> Self {
        Self::new(name, [ScriptedTurn::Text(vec![answer.to_string()])])
    }

    /// Answers title and memory-update calls from the script too, logged with the others: for a
    /// model that only does those (`title.model_name`, `memory.model_name`) or a test about them.
    pub fn with_background_script(mut self) -> Self {
        self.script_background = true;
        self
    }

    /// Title and memory-update calls answered neutrally (not from the script).
    pub fn background_requests(&self) -> Vec<ModelRequest> {
        self.background_requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    pub fn push(&self, turn: ScriptedTurn) {
        if let Ok(mut turns) = self.turns.lock() {
            turns.push_back(turn);
        }
    }

    /// Every request received so far (empty for cycling models).
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    pub fn remaining(&self) -> usize {
        self.turns.lock().map(|t| t.len()).unwrap_or(0)
    }

    /// Calls that found the script empty (each was answered with an error).
    pub fn unscripted_calls(&self) -> usize {
        self.unscripted.load(Ordering::SeqCst)
    }

    /// Lets calls beyond the script happen without failing the test (they still get an error):
    /// for tests about what the caller does with that error.
    pub fn allow_unscripted(&self) -> &Self {
        self.allow_unscripted.store(true, Ordering::SeqCst);
        self
    }

    fn next_turn(&self) -> Option<ScriptedTurn> {
        if let Some(cycle) = &self.repeat {
            let mut cursor = self.cursor.lock().ok()?;
            let turn = cycle.get(*cursor % cycle.len().max(1)).cloned();
            *cursor += 1;
            return turn;
        }
        self.turns.lock().ok()?.pop_front()
    }

    fn error(&self, kind: &ModelErrorKind) -> ModelError {
        let model = self.name.clone();
        match kind {
            ModelErrorKind::Connect => ModelError::Connect {
                model,
                base_url: "scripted://".into(),
                detail: "connection refused".into(),
                fix: "models[].base_url".into(),
            },
            ModelErrorKind::RateLimited => ModelError::RateLimited {
                model,
                retry_after: Some(Duration::from_millis(1)),
            },
            ModelErrorKind::Status(status) => ModelError::Status {
                model,
                status: *status,
                body: "scripted failure".into(),
                retry_after: None,
                hint: String::new(),
            },
            ModelErrorKind::MidStream => ModelError::Stream {
                model,
                detail: "scripted mid-stream failure".into(),
            },
        }
    }
}

impl Drop for ScriptedModel {
    /// Fails the test that called the model beyond its script (documented invariant of this test
    /// double; a benchmark's cycling model never runs out). Skipped while already panicking, so
    /// the original failure is the one reported.
    fn drop(&mut self) {
        let unscripted = *self.unscripted.get_mut();
        if unscripted > 0 && !*self.allow_unscripted.get_mut() && !std::thread::panicking() {
            panic!(
                "scripted model '{}' was called {unscripted} time(s) more than scripted; push \
                 more turns, or call allow_unscripted() if the test is about that error",
                self.name
            );
        }
    }
}

fn completed(content: String, tool_calls: Vec<ToolCall>) -> AiMessage {
    let finish_reason = if tool_calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    };
    AiMessage {
        content: content.into(),
        tool_calls,
        finish_reason: Some(finish_reason),
        usage: Some(Usage {
            input_tokens: 10,
            output_tokens: 5,
            total_tokens: 15,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        if !self.script_background
            && let Some(call) = background_call(request)
        {
            if let Ok(mut log) = self.background_requests.lock() {
                log.push(request.clone());
            }
            let answer = completed(call.neutral_answer().to_string(), vec![]);
            return Ok(futures::stream::iter([Ok(ModelEvent::Completed(answer))]).boxed());
        }
        if self.repeat.is_none()
            && let Ok(mut log) = self.requests.lock()
        {
            log.push(request.clone());
        }
        let Some(turn) = self.next_turn() else {
            let count = self.unscripted.fetch_add(1, Ordering::SeqCst) + 1;
            tracing::error!(model = %self.name, count, "The scripted model was called more often than scripted");
            return Err(ModelError::Provider {
                model: self.name.clone(),
                detail: "the scripted model was called more often than scripted".into(),
            });
        };
        let events: Vec<Result<ModelEvent, ModelError>> = match turn {
            ScriptedTurn::Text(chunks) => {
                let content = chunks.concat();
                chunks
                    .into_iter()
                    .map(|c| Ok(ModelEvent::TextDelta(c)))
                    .chain([Ok(ModelEvent::Completed(completed(content, vec![])))])
                    .collect()
            }
            ScriptedTurn::ToolCalls { text, calls } => {
                let calls = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, args))| ToolCall {
                        id: format!("call_{}_{i}", uuid::Uuid::new_v4().simple()),
                        name,
                        args,
                        args_error: None,
                    })
                    .collect();
                let mut events = Vec::new();
                if !text.is_empty() {
                    events.push(Ok(ModelEvent::TextDelta(text.clone())));
                }
                events.push(Ok(ModelEvent::Completed(completed(text, calls))));
                events
            }
            ScriptedTurn::Message(message) => {
                let mut events = Vec::new();
                if !message.content.is_empty() {
                    events.push(Ok(ModelEvent::TextDelta(message.content.to_string())));
                }
                events.push(Ok(ModelEvent::Completed(message)));
                events
            }
            ScriptedTurn::Fail(ModelErrorKind::MidStream) => {
                vec![
                    Ok(ModelEvent::TextDelta("partial".into())),
                    Err(self.error(&ModelErrorKind::MidStream)),
                ]
            }
            ScriptedTurn::Fail(kind) => return Err(self.error(&kind)),
            ScriptedTurn::Slow { chunks, delay } => {
                let content = chunks.concat();
                let stream = futures::stream::iter(chunks)
                    .then(move |c| async move {
                        tokio::time::sleep(delay).await;
                        Ok(ModelEvent::TextDelta(c))
                    })
                    .chain(futures::stream::once(async move {
                        Ok(ModelEvent::Completed(completed(content, vec![])))
                    }));
                return Ok(stream.boxed());
            }
        };
        Ok(futures::stream::iter(events).boxed())
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use super::*;
    use antler_store::messages::Message;

    #[tokio::test]
    async fn an_unscripted_call_is_an_error_and_fails_the_test_on_drop() {
        let model = ScriptedModel::text("m", "only answer");
        assert!(model.stream(&ModelRequest::default()).await.is_ok());
        let error = model.stream(&ModelRequest::default()).await.err().unwrap();
        assert!(matches!(error, ModelError::Provider { .. }), "{error}");
        assert_eq!(model.unscripted_calls(), 1);
        let panic = catch_unwind(AssertUnwindSafe(move || drop(model))).unwrap_err();
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            message.contains("1 time(s) more than scripted"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn title_and_memory_calls_get_neutral_answers_unless_scripted() {
        let title = ModelRequest {
            messages: vec![Message::human(format!(
                "{} (max 6 words) for this conversation.",
                crate::model::background::TITLE_PROMPT_START
            ))]
            .into(),
            ..Default::default()
        };
        let model = ScriptedModel::text("m", "the run's answer");
        let mut stream = model.stream(&title).await.unwrap();
        let Some(Ok(ModelEvent::Completed(answer))) = stream.next().await else {
            panic!("a neutral answer");
        };
        assert_eq!(answer.content, "");
        assert_eq!(
            (model.remaining(), model.background_requests().len()),
            (1, 1)
        );
        assert!(model.requests().is_empty());
        let titler = ScriptedModel::text("t", "A Title").with_background_script();
        assert!(titler.stream(&title).await.is_ok());
        assert_eq!((titler.remaining(), titler.requests().len()), (0, 1));
    }

    #[tokio::test]
    async fn a_test_may_opt_in_to_unscripted_calls() {
        let model = ScriptedModel::new("m", []);
        model.allow_unscripted();
        assert!(model.stream(&ModelRequest::default()).await.is_err());
        assert_eq!(model.unscripted_calls(), 1);
        assert!(catch_unwind(AssertUnwindSafe(move || drop(model))).is_ok());
    }
}
