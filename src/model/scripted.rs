//! An in-process scripted model: replays queued turns (text chunks, tool calls, errors).
//!
//! Used by `antler bench` (harness cost without network) and by unit tests. It is a real
//! [`ChatModel`]: the loop cannot tell it from a provider.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;

use crate::messages::{AiMessage, FinishReason, ToolCall, Usage};
use crate::model::{ChatModel, ModelError, ModelEvent, ModelRequest, ModelStream};

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
}

impl ScriptedModel {
    pub fn new(name: impl Into<String>, turns: impl IntoIterator<Item = ScriptedTurn>) -> Self {
        Self {
            name: name.into(),
            turns: Mutex::new(turns.into_iter().collect()),
            repeat: None,
            cursor: Mutex::new(0),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// A model that cycles through `turns` forever and keeps no request log.
    pub fn cycling(name: impl Into<String>, turns: Vec<ScriptedTurn>) -> Self {
        Self {
            repeat: Some(turns),
            ..Self::new(name, [])
        }
    }

    pub fn text(name: impl Into<String>, answer: &str) -> Self {
        Self::new(name, [ScriptedTurn::Text(vec![answer.to_string()])])
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
            },
            ModelErrorKind::MidStream => ModelError::Stream {
                model,
                detail: "scripted mid-stream failure".into(),
            },
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
        content,
        tool_calls,
        finish_reason: Some(finish_reason),
        usage: Some(Usage {
            input_tokens: 10,
            output_tokens: 5,
            total_tokens: 15,
        }),
        ..Default::default()
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        if self.repeat.is_none()
            && let Ok(mut log) = self.requests.lock()
        {
            log.push(request);
        }
        let Some(turn) = self.next_turn() else {
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
                    events.push(Ok(ModelEvent::TextDelta(message.content.clone())));
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
