//! One run's events as the SSE frames a request asks for (`stream_mode`, `stream_subgraphs`).
//!
//! The encoder is the one mapping from `RunEvent` to frames: `http::runs` (a run streamed by
//! the request that started it) and `langgraph::runs` (a run joined later, replayed from its
//! frame buffer) both write what it produces.
//!
//! A request without `stream_mode` gets Antler's own set (what the web chat and the console
//! read), unchanged: `metadata`, `messages` (`[chunk, metadata]` AI text deltas), `values`,
//! `custom` (`{"type", "data"}`), `error` (`{code, message}`), `end` (`{stop_reason}`).
//!
//! With `stream_mode`, exactly the requested modes, in the shapes the SDKs parse (`sdk`), framed
//! by `metadata` first and `end` last (`error` before it when the run fails). Antler's agent is
//! LangChain's `create_agent` graph as DeerFlow's lead agent runs it: a `model` node and a
//! `tools` node, one LangGraph step per completed model call or tool batch (each step ends with
//! the state the harness checkpointed, `RunEvent::Values`). See `sdk` for what each mode emits.
//! Any other mode is a 422 naming `stream_mode` with the accepted list ([`modes::ACCEPTED`]).

mod modes;
mod sdk;
mod shapes;
#[cfg(test)]
mod tests;

use std::borrow::Cow;

use serde_json::{Value, json};

use crate::agent_api::RunEvent;
use crate::http::ApiError;

/// One SSE frame: its event name (`values`, `messages`, `updates|tools:…` with subgraphs…) and
/// its JSON data, already serialized so a replay buffer keeps it as it was sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    pub event: Cow<'static, str>,
    pub data: String,
}

/// What a run request asked to be streamed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StreamRequest {
    /// `None`: the request named no `stream_mode` (Antler's own set).
    pub modes: Option<Vec<String>>,
    /// `stream_subgraphs`: sub-agents' events too, their namespace in the event name.
    pub subgraphs: bool,
}

impl StreamRequest {
    /// Reads `stream_mode` (a string or a list of strings) and `stream_subgraphs` from a run
    /// body; an unknown or refused mode is a 422 naming `stream_mode`.
    pub(crate) fn parse(
        stream_mode: Option<&Value>,
        stream_subgraphs: Option<&Value>,
    ) -> Result<Self, ApiError> {
        let modes = match stream_mode {
            None | Some(Value::Null) => None,
            Some(Value::String(mode)) => Some(vec![mode.clone()]),
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|item| {
                        item.as_str().map(str::to_string).ok_or_else(|| {
                            super::errors::unsupported("stream_mode", "must be strings")
                        })
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Some(_) => {
                return Err(super::errors::unsupported(
                    "stream_mode",
                    "must be a string or a list of strings",
                ));
            }
        };
        if let Some(modes) = &modes {
            modes::Modes::parse(modes)?;
        }
        let subgraphs = stream_subgraphs.and_then(Value::as_bool).unwrap_or(false);
        Ok(Self { modes, subgraphs })
    }
}

/// Turns one run's events into frames, in order. Stateful: some modes need what came before
/// (a message's chunks, the previous values).
pub(crate) struct Encoder {
    run_id: String,
    thread_id: String,
    /// `None`: Antler's own set, one frame per event, no state kept.
    sdk: Option<Box<sdk::SdkEncoder>>,
    /// Antler's set: the `{"run_id", "thread_id"}` beside every delta, written once.
    delta_metadata: String,
}

impl Encoder {
    /// An encoder for one run. A mode `StreamRequest::parse` would refuse is skipped here (the
    /// request was parsed before the run started).
    pub(crate) fn new(request: StreamRequest, run_id: &str, thread_id: &str) -> Self {
        let sdk = request.modes.as_deref().map(|names| {
            Box::new(sdk::SdkEncoder::new(
                modes::Modes::lenient(names),
                request.subgraphs,
                run_id,
                thread_id,
            ))
        });
        let delta_metadata = json!({"run_id": run_id, "thread_id": thread_id}).to_string();
        Self {
            run_id: run_id.to_string(),
            thread_id: thread_id.to_string(),
            sdk,
            delta_metadata,
        }
    }

    /// Appends the frames `event` makes (none, one or several) to `out`.
    pub(crate) fn encode(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
        match &mut self.sdk {
            None => {
                let frame = match event {
                    RunEvent::TextDelta { message_id, delta } => {
                        Some(legacy_delta(message_id, delta, None, &self.delta_metadata))
                    }
                    RunEvent::ReasoningDelta { message_id, delta } => Some(legacy_delta(
                        message_id,
                        "",
                        Some(delta),
                        &self.delta_metadata,
                    )),
                    _ => legacy_frame(event, &self.run_id, &self.thread_id),
                };
                out.extend(frame);
            }
            Some(sdk) => sdk.encode(event, out),
        }
    }
}

/// Antler's `messages` frame of a delta, written straight into its string (deltas are most of
/// a stream's frames): byte for byte what `legacy_frame` would build through `json!`.
fn legacy_delta(id: &str, text: &str, reasoning: Option<&str>, metadata: &str) -> Frame {
    let mut data = String::with_capacity(80 + id.len() + text.len() + metadata.len());
    data.push_str(r#"[{"type":"AIMessageChunk","id":"#);
    shapes::push_json_str(&mut data, id);
    data.push_str(r#","content":"#);
    shapes::push_json_str(&mut data, text);
    if let Some(reasoning) = reasoning {
        data.push_str(r#","additional_kwargs":{"reasoning_content":"#);
        shapes::push_json_str(&mut data, reasoning);
        data.push('}');
    }
    data.push_str("},");
    data.push_str(metadata);
    data.push(']');
    Frame {
        event: Cow::Borrowed("messages"),
        data,
    }
}

/// Antler's own set, one frame per event (`None`: progress with no wire name).
fn legacy_frame(event: &RunEvent, run_id: &str, thread_id: &str) -> Option<Frame> {
    let (name, data) = match event {
        RunEvent::Started { run_id, thread_id } => (
            "metadata",
            json!({"run_id": run_id, "thread_id": thread_id}),
        ),
        RunEvent::TextDelta { message_id, delta } => (
            "messages",
            json!([
                {"type": "AIMessageChunk", "id": message_id, "content": delta},
                {"run_id": run_id, "thread_id": thread_id}
            ]),
        ),
        RunEvent::ReasoningDelta { message_id, delta } => (
            "messages",
            json!([
                {"type": "AIMessageChunk", "id": message_id, "content": "",
                 "additional_kwargs": {"reasoning_content": delta}},
                {"run_id": run_id, "thread_id": thread_id}
            ]),
        ),
        RunEvent::Values { state } => ("values", json!(state)),
        RunEvent::Message { message } => ("custom", json!({"type": "message", "message": message})),
        RunEvent::ToolStarted { call } => ("custom", json!({"type": "tool_started", "call": call})),
        RunEvent::ToolFinished { result } => {
            ("custom", json!({"type": "tool_finished", "result": result}))
        }
        RunEvent::TodosUpdated { .. }
        | RunEvent::Summarized { .. }
        | RunEvent::TaskStarted { .. }
        | RunEvent::TaskRunning { .. }
        | RunEvent::TaskEnded(_)
        | RunEvent::ApprovalRequested(_)
        | RunEvent::Custom { .. } => {
            let (name, data) = event.custom_wire()?;
            ("custom", json!({"type": name, "data": data}))
        }
        RunEvent::Error { code, message } => ("error", json!({"code": code, "message": message})),
        RunEvent::Finished { stop_reason } => ("end", json!({"stop_reason": stop_reason})),
    };
    Some(Frame {
        event: Cow::Borrowed(name),
        data: data.to_string(),
    })
}
