//! The SDK's stream modes: what a run's events become when a request names `stream_mode`.
//!
//! Every stream starts with `metadata` (`run_id`, `thread_id`, `attempt`) and ends with `end`
//! (`run_id`, `status` as the SDK's `RunStatus`, Antler's `stop_reason`); a failed run sends
//! `error` (`{"error": code, "message": …}`) before it. Per mode:
//! - `values`: the full state after each step.
//! - `updates`: `{node: {"messages": [what the step added], key: value…}}` after each step,
//!   `node` `model` or `tools` (the nodes of LangChain's `create_agent`, DeerFlow's lead agent),
//!   other keys the state keys the step changed (`title`, `todos`, …); an approval request as
//!   `{"__interrupt__": [{"value": request, "id": …}]}`.
//! - `messages-tuple` (event `messages`): `[AIMessageChunk, metadata]` per text or reasoning
//!   delta; a streamed answer's tool calls as one more chunk with `tool_call_chunks`; every
//!   other message the run adds (tool results, an answer that was not streamed) whole, as it
//!   completes. Metadata: `langgraph_node`, `langgraph_step`, `run_id`, `thread_id`, `tags`.
//! - `messages`: `messages/metadata` when a message starts, `messages/partial` (the message so
//!   far) per delta, `messages/complete` when it is added.
//! - `custom`: the run's progress (`RunEvent::custom_wire`) as DeerFlow writes custom events:
//!   `{"type": name, …fields of its data}` (data that is not an object under `data`).
//! - `events`: `on_chat_model_start|stream|end`, `on_tool_start|end`.
//! - `tools`: `on_tool_start`, `on_tool_end` or `on_tool_error` with `toolCallId`.
//! - `tasks`: a task per step (start: `id`, `name`, `input` `{}`, `triggers`; result: its
//!   writes as `[channel, value]` pairs).
//! - `checkpoints`: a checkpoint per step (`config` with `checkpoint_id` `{run_id}:step:{n}`,
//!   `parent_config`, `metadata.step`, `values`, `next`, `tasks` `[]`).
//! - `debug`: the tasks and checkpoints above wrapped as `task`, `task_result`, `checkpoint`.
//! - `lifecycle`: a sub-agent's `started`, `completed`, `failed`, `interrupted` under
//!   `lifecycle|tools:{call id}`.
//!
//! With `stream_subgraphs`, a sub-agent's messages (the complete AI messages its run forwards to
//! the lead's stream; its deltas and tool results stay inside it) stream under its namespace:
//! `messages|tools:{call id}`, `updates|tools:{call id}`, `messages/complete|tools:{call id}`.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::Frame;
use super::modes::Modes;
use super::shapes;
use crate::agent_api::TaskStatus;
use crate::agent_api::{RunEvent, StopReason};
use antler_store::messages::{Message, ToolMessage, ToolStatus};
use antler_store::state::ThreadState;

/// A node of the agent's graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Model,
    Tools,
}

impl Node {
    fn as_str(self) -> &'static str {
        match self {
            Node::Model => "model",
            Node::Tools => "tools",
        }
    }
}

/// What ended with a `Values` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepKind {
    /// A node's step (`model` or `tools`): its task ends.
    Node,
    /// The input written before the first model call.
    Input,
    /// State hooks changed with no node running (after the final answer).
    Hooks,
}

/// The encoder of a request that named its modes; keeps what the modes need across events.
pub(super) struct SdkEncoder {
    modes: Modes,
    subgraphs: bool,
    run_id: String,
    thread_id: String,
    /// LangGraph's step: 1 for the first model call, one more per completed step.
    step: u64,
    node: Node,
    /// Whether the current step's task was announced.
    open: bool,
    /// `message_metadata` of the current node and step, written once per step.
    metadata: String,
    /// The AI message whose deltas went out (its final message then only adds tool calls).
    streamed: Option<String>,
    /// The streamed message so far (`messages` mode's `messages/partial`).
    partial: String,
    /// What the current step added (`updates`, `tasks`, `debug`).
    added: Vec<Value>,
    /// The state after the previous step, without its messages (what `updates` compares).
    previous: Option<Map<String, Value>>,
    parent_checkpoint: Option<String>,
    /// The current step's AI message asked for tools (the next node is `tools`).
    asked_tools: bool,
    /// A step ended already (the first `Values` before any node is the run's input).
    values_seen: bool,
}

impl SdkEncoder {
    pub(super) fn new(modes: Modes, subgraphs: bool, run_id: &str, thread_id: &str) -> Self {
        Self {
            modes,
            subgraphs,
            run_id: run_id.to_string(),
            thread_id: thread_id.to_string(),
            step: 1,
            node: Node::Model,
            open: false,
            metadata: shapes::message_metadata(run_id, thread_id, "model", 1, ""),
            streamed: None,
            partial: String::new(),
            added: Vec::new(),
            previous: None,
            parent_checkpoint: None,
            asked_tools: false,
            values_seen: false,
        }
    }

    pub(super) fn encode(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
        match event {
            RunEvent::Started { run_id, thread_id } => out.push(frame(
                "metadata",
                json!({"run_id": run_id, "thread_id": thread_id, "attempt": 1}).to_string(),
            )),
            RunEvent::TextDelta { message_id, delta } => {
                self.delta(message_id, delta, None, out);
            }
            RunEvent::ReasoningDelta { message_id, delta } => {
                self.delta(message_id, "", Some(delta), out);
            }
            RunEvent::Message { message } => self.message(message, out),
            RunEvent::ToolStarted { call } => {
                self.begin(Node::Tools, out);
                if self.modes.any(Modes::EVENTS) {
                    let data = json!({"input": call.args});
                    out.push(self.event("on_tool_start", &call.name, &call.id, data));
                }
                if self.modes.any(Modes::TOOLS) {
                    let data = json!({"event": "on_tool_start", "toolCallId": call.id,
                        "name": call.name, "input": call.args});
                    out.push(frame("tools", data.to_string()));
                }
            }
            RunEvent::ToolFinished { result } => self.tool_finished(result, out),
            RunEvent::Values { state } => self.step_end(state, out),
            RunEvent::Error { code, message } => out.push(frame(
                "error",
                json!({"error": code, "message": message}).to_string(),
            )),
            RunEvent::Finished { stop_reason } => out.push(frame(
                "end",
                json!({"run_id": self.run_id, "status": run_status(*stop_reason),
                    "stop_reason": stop_reason})
                .to_string(),
            )),
            RunEvent::TodosUpdated { .. }
            | RunEvent::Summarized { .. }
            | RunEvent::TaskStarted { .. }
            | RunEvent::TaskRunning { .. }
            | RunEvent::TaskEnded(_)
            | RunEvent::ApprovalRequested(_)
            | RunEvent::Custom { .. } => self.progress(event, out),
        }
    }

    /// A text or reasoning delta of the AI message `id`.
    fn delta(&mut self, id: &str, text: &str, reasoning: Option<&str>, out: &mut Vec<Frame>) {
        self.begin(Node::Model, out);
        let first = self.streamed.as_deref() != Some(id);
        if first {
            self.streamed = Some(id.to_string());
            self.partial.clear();
        }
        if self.modes.any(Modes::MESSAGES_TUPLE | Modes::EVENTS) {
            let chunk = shapes::ai_chunk(id, text, reasoning, &[]);
            if self.modes.any(Modes::EVENTS) {
                if first {
                    out.push(self.event("on_chat_model_start", "model", id, json!({})));
                }
                let data = json!({"chunk": raw(&chunk)});
                out.push(self.event("on_chat_model_stream", "model", id, data));
            }
            if self.modes.any(Modes::MESSAGES_TUPLE) {
                out.push(frame("messages", shapes::pair(&chunk, &self.metadata)));
            }
        }
        if self.modes.any(Modes::MESSAGES) {
            if first {
                out.push(self.messages_metadata(id));
            }
            self.partial.push_str(text);
            let message = json!([{"type": "ai", "id": id, "content": self.partial,
                "tool_calls": []}]);
            out.push(frame("messages/partial", message.to_string()));
        }
    }

    /// A message the run added to the thread.
    fn message(&mut self, message: &Message, out: &mut Vec<Frame>) {
        let streamed = self.streamed.as_deref() == Some(message.id());
        if let Message::Ai(ai) = message {
            self.begin(Node::Model, out);
            self.asked_tools = !ai.tool_calls.is_empty();
            if self.modes.any(Modes::MESSAGES_TUPLE) {
                let chunk = if !streamed {
                    let reasoning = ai.reasoning.as_deref().filter(|text| !text.is_empty());
                    Some(shapes::ai_chunk(
                        &ai.id,
                        &ai.content,
                        reasoning,
                        &ai.tool_calls,
                    ))
                } else if !ai.tool_calls.is_empty() {
                    Some(shapes::ai_chunk(&ai.id, "", None, &ai.tool_calls))
                } else {
                    None
                };
                if let Some(chunk) = chunk {
                    out.push(frame("messages", shapes::pair(&chunk, &self.metadata)));
                }
            }
        }
        let needs_json = self
            .modes
            .any(Modes::STEP_MESSAGES | Modes::MESSAGES | Modes::EVENTS)
            || (self.modes.any(Modes::MESSAGES_TUPLE) && !matches!(message, Message::Ai(_)));
        if needs_json {
            let json = serde_json::to_value(message).unwrap_or(Value::Null);
            if self.modes.any(Modes::MESSAGES_TUPLE) && !matches!(message, Message::Ai(_)) {
                out.push(frame(
                    "messages",
                    shapes::pair(&json.to_string(), &self.metadata),
                ));
            }
            if self.modes.any(Modes::MESSAGES) {
                if !streamed {
                    out.push(self.messages_metadata(message.id()));
                }
                out.push(frame("messages/complete", json!([json]).to_string()));
            }
            if self.modes.any(Modes::EVENTS) && matches!(message, Message::Ai(_)) {
                let data = json!({"output": json});
                out.push(self.event("on_chat_model_end", "model", message.id(), data));
            }
            if self.modes.any(Modes::STEP_MESSAGES) {
                self.added.push(json);
            }
        }
        if streamed {
            self.streamed = None;
            self.partial.clear();
        }
    }

    fn tool_finished(&mut self, result: &ToolMessage, out: &mut Vec<Frame>) {
        self.begin(Node::Tools, out);
        let failed = result.status == ToolStatus::Error;
        if self.modes.any(Modes::EVENTS) {
            let data = json!({"output": result.content});
            let name = if failed {
                "on_tool_error"
            } else {
                "on_tool_end"
            };
            out.push(self.event(name, &result.name, &result.tool_call_id, data));
        }
        if self.modes.any(Modes::TOOLS) {
            let data = if failed {
                json!({"event": "on_tool_error", "toolCallId": result.tool_call_id,
                    "name": result.name, "error": result.content})
            } else {
                json!({"event": "on_tool_end", "toolCallId": result.tool_call_id,
                    "name": result.name, "output": result.content})
            };
            out.push(frame("tools", data.to_string()));
        }
    }

    /// The typed progress: `custom` events, sub-agents' namespaced frames, interrupts.
    fn progress(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
        if self.modes.any(Modes::CUSTOM)
            && let Some((name, data)) = event.custom_wire()
        {
            out.push(frame("custom", flat_custom(name, data)));
        }
        match event {
            RunEvent::TaskStarted { task_id, .. } if self.modes.any(Modes::LIFECYCLE) => {
                out.push(lifecycle(task_id, "started", None));
            }
            RunEvent::TaskEnded(end) if self.modes.any(Modes::LIFECYCLE) => {
                let (kind, error) = match end.status {
                    TaskStatus::Completed => ("completed", None),
                    TaskStatus::Cancelled => ("interrupted", None),
                    TaskStatus::Failed | TaskStatus::TimedOut => (
                        "failed",
                        Some(json!({"error": end.status, "message": end.error})),
                    ),
                };
                out.push(lifecycle(&end.task_id, kind, error));
            }
            RunEvent::TaskRunning {
                task_id, message, ..
            } if self.subgraphs => self.subagent_message(task_id, message, out),
            RunEvent::ApprovalRequested(request) if self.modes.any(Modes::UPDATES) => {
                let value = serde_json::to_value(request.as_ref()).unwrap_or(Value::Null);
                let data = json!({"__interrupt__": [{"value": value, "id": request.id}]});
                out.push(frame("updates", data.to_string()));
            }
            _ => {}
        }
    }

    /// A sub-agent's AI message under its namespace, `tools:{call id}`.
    fn subagent_message(&mut self, task_id: &str, message: &Message, out: &mut Vec<Frame>) {
        let namespace = format!("tools:{task_id}");
        let json = serde_json::to_value(message).unwrap_or(Value::Null);
        if self.modes.any(Modes::MESSAGES_TUPLE)
            && let Message::Ai(ai) = message
        {
            let chunk = shapes::ai_chunk(&ai.id, &ai.content, None, &ai.tool_calls);
            let metadata =
                shapes::message_metadata(&self.run_id, &self.thread_id, "model", 1, &namespace);
            out.push(frame_in(
                "messages",
                &namespace,
                shapes::pair(&chunk, &metadata),
            ));
        }
        if self.modes.any(Modes::MESSAGES) {
            let data = json!([json]).to_string();
            out.push(frame_in("messages/complete", &namespace, data));
        }
        if self.modes.any(Modes::UPDATES) {
            let data = json!({"model": {"messages": [json]}}).to_string();
            out.push(frame_in("updates", &namespace, data));
        }
    }

    /// Enters `node`: a new node starts a new task (announced to `tasks` and `debug`).
    fn begin(&mut self, node: Node, out: &mut Vec<Frame>) {
        if self.open && self.node == node {
            return;
        }
        if self.node != node {
            self.node = node;
            self.metadata = shapes::message_metadata(
                &self.run_id,
                &self.thread_id,
                node.as_str(),
                self.step,
                "",
            );
        }
        self.open = true;
        if self.modes.any(Modes::TASKS | Modes::DEBUG) {
            let task = shapes::task_start(&shapes::task_id(&self.run_id, self.step), node.as_str());
            if self.modes.any(Modes::DEBUG) {
                let debug = shapes::debug(self.step, "task", task.clone());
                out.push(frame("debug", debug.to_string()));
            }
            if self.modes.any(Modes::TASKS) {
                out.push(frame("tasks", task.to_string()));
            }
        }
    }

    /// A step ended with `state` checkpointed: its task's result, the update, the values, the
    /// checkpoint; then the next step begins.
    fn step_end(&mut self, state: &ThreadState, out: &mut Vec<Frame>) {
        // No node ran since the last step: the input written before the first model call
        // (LangGraph's `input` checkpoint), or what hooks changed after the last one.
        let kind = match (self.open, self.values_seen) {
            (true, _) => StepKind::Node,
            (false, false) => StepKind::Input,
            (false, true) => StepKind::Hooks,
        };
        self.values_seen = true;
        if !self.modes.any(Modes::STEP_STATE) {
            if kind != StepKind::Input {
                self.next_step();
            }
            return;
        }
        let node = self.node.as_str();
        let values = serde_json::to_value(state).unwrap_or(Value::Null);
        let mut writes = Map::new();
        if self.modes.any(Modes::STEP_MESSAGES) {
            if !self.added.is_empty() {
                let added = Value::Array(std::mem::take(&mut self.added));
                writes.insert("messages".to_string(), added);
            }
            self.changed_keys(&values, &mut writes);
        }
        if kind == StepKind::Node && self.modes.any(Modes::TASKS | Modes::DEBUG) {
            let id = shapes::task_id(&self.run_id, self.step);
            let result = shapes::task_result(&id, node, &writes);
            if self.modes.any(Modes::DEBUG) {
                let debug = shapes::debug(self.step, "task_result", result.clone());
                out.push(frame("debug", debug.to_string()));
            }
            if self.modes.any(Modes::TASKS) {
                out.push(frame("tasks", result.to_string()));
            }
        }
        if kind != StepKind::Input && self.modes.any(Modes::UPDATES) && !writes.is_empty() {
            out.push(frame("updates", json!({ node: writes }).to_string()));
        }
        if self.modes.any(Modes::VALUES) {
            out.push(frame("values", values.to_string()));
        }
        if self.modes.any(Modes::CHECKPOINTS | Modes::DEBUG) {
            let (step, next) = match kind {
                StepKind::Input => (0, vec!["model"]),
                _ => (self.step, self.next_nodes()),
            };
            let id = shapes::checkpoint_id(&self.run_id, step);
            let config = shapes::checkpoint_config(&self.thread_id, &id);
            let parent = self
                .parent_checkpoint
                .as_deref()
                .map(|parent| shapes::checkpoint_config(&self.thread_id, parent));
            let checkpoint = shapes::checkpoint(config, parent, step, &self.run_id, values, &next);
            if self.modes.any(Modes::DEBUG) {
                let debug = shapes::debug(self.step, "checkpoint", checkpoint.clone());
                out.push(frame("debug", debug.to_string()));
            }
            if self.modes.any(Modes::CHECKPOINTS) {
                out.push(frame("checkpoints", checkpoint.to_string()));
            }
            self.parent_checkpoint = Some(id);
        }
        if kind == StepKind::Input {
            // The input is not a step of the loop: the first model call stays step 1.
            self.added.clear();
            return;
        }
        self.next_step();
    }

    fn next_step(&mut self) {
        self.added.clear();
        self.asked_tools = false;
        self.open = false;
        self.step += 1;
        self.metadata = shapes::message_metadata(
            &self.run_id,
            &self.thread_id,
            self.node.as_str(),
            self.step,
            "",
        );
    }

    /// The state keys other than `messages` whose value this step changed; remembers the state.
    fn changed_keys(&mut self, values: &Value, writes: &mut Map<String, Value>) {
        let Some(current) = values.as_object() else {
            return;
        };
        let mut previous = Map::new();
        for (key, value) in current {
            if key == "messages" {
                continue;
            }
            let changed = match self.previous.as_ref() {
                Some(previous) => previous.get(key) != Some(value),
                // The first step: what it set, not the empty defaults every state has.
                None => !is_empty(value),
            };
            if changed {
                writes.insert(key.clone(), value.clone());
            }
            previous.insert(key.clone(), value.clone());
        }
        self.previous = Some(previous);
    }

    /// The nodes that run after this step: the tools after a model call that asked for them,
    /// the model after the tools; none after a final answer.
    fn next_nodes(&self) -> Vec<&'static str> {
        match self.node {
            Node::Tools => vec!["model"],
            Node::Model if self.asked_tools => vec!["tools"],
            Node::Model => vec![],
        }
    }

    fn messages_metadata(&self, id: &str) -> Frame {
        let mut data = String::with_capacity(self.metadata.len() + id.len() + 20);
        data.push('{');
        shapes::push_json_str(&mut data, id);
        data.push_str(r#":{"metadata":"#);
        data.push_str(&self.metadata);
        data.push_str("}}");
        frame("messages/metadata", data)
    }

    /// An `events` frame as LangChain's `astream_events` v2 writes one.
    fn event(&self, event: &str, name: &str, run_id: &str, data: Value) -> Frame {
        let metadata = raw(&self.metadata);
        frame(
            "events",
            json!({"event": event, "name": name, "run_id": run_id, "tags": [],
                "metadata": metadata, "parent_ids": [self.run_id], "data": data})
            .to_string(),
        )
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.is_empty(),
        _ => false,
    }
}

/// The SDK's `RunStatus` of a run that stopped this way.
fn run_status(stop_reason: StopReason) -> &'static str {
    match stop_reason {
        StopReason::Interrupted | StopReason::AwaitingApproval | StopReason::Cancelled => {
            "interrupted"
        }
        StopReason::Error | StopReason::RecursionLimit => "error",
        _ => "success",
    }
}

/// A custom event as DeerFlow's runtime writes one: `{"type": name, …data's fields}`.
fn flat_custom(name: &str, data: Value) -> String {
    let mut event = Map::new();
    event.insert("type".to_string(), Value::String(name.to_string()));
    match data {
        Value::Object(fields) => {
            for (key, value) in fields {
                if key != "type" {
                    event.insert(key, value);
                }
            }
        }
        other => {
            event.insert("data".to_string(), other);
        }
    }
    Value::Object(event).to_string()
}

fn lifecycle(task_id: &str, kind: &str, error: Option<Value>) -> Frame {
    let namespace = format!("tools:{task_id}");
    let mut data = json!({"event": kind, "namespace": [namespace], "tool_call_id": task_id});
    if let Some(error) = error {
        data["error"] = error;
    }
    frame_in("lifecycle", &namespace, data.to_string())
}

/// JSON text already written, as a `Value` to nest (parsed back: only the rarer modes do it).
fn raw(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

fn frame(event: &'static str, data: String) -> Frame {
    Frame {
        event: Cow::Borrowed(event),
        data,
    }
}

/// A frame under a sub-agent's namespace: `event|namespace`.
fn frame_in(event: &str, namespace: &str, data: String) -> Frame {
    Frame {
        event: Cow::Owned(format!("{event}|{namespace}")),
        data,
    }
}
