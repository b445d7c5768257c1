//! The JSON shapes of the SDK's stream parts: message chunks, the metadata beside them, tasks
//! and checkpoints. Text deltas are the bulk of a stream, so their chunk is written straight
//! into a string (no `Value` tree per delta); the rarer shapes go through `json!`.

use serde_json::{Value, json};

use antler_store::messages::ToolCall;

/// Appends `text` as a JSON string literal (quotes and escapes included).
pub(super) fn push_json_str(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    let mut start = 0;
    for (index, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[start..index]);
        if escape.is_empty() {
            out.push_str(&format!("\\u{byte:04x}"));
        } else {
            out.push_str(escape);
        }
        start = index + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// An `AIMessageChunk` as LangChain serializes one: the SDKs concatenate a message's chunks by
/// `id` (content appended, `tool_call_chunks` merged by `index`, `additional_kwargs` strings
/// appended, so reasoning arrives as `additional_kwargs.reasoning_content` deltas).
pub(super) fn ai_chunk(
    id: &str,
    content: &str,
    reasoning: Option<&str>,
    tool_calls: &[ToolCall],
) -> String {
    let mut out = String::with_capacity(128 + id.len() + content.len());
    out.push_str(r#"{"type":"AIMessageChunk","id":"#);
    push_json_str(&mut out, id);
    out.push_str(r#","content":"#);
    push_json_str(&mut out, content);
    out.push_str(r#","additional_kwargs":{"#);
    if let Some(reasoning) = reasoning {
        out.push_str(r#""reasoning_content":"#);
        push_json_str(&mut out, reasoning);
    }
    out.push_str(r#"},"response_metadata":{},"tool_call_chunks":"#);
    if tool_calls.is_empty() {
        out.push_str("[]");
    } else {
        out.push_str(&tool_call_chunks(tool_calls).to_string());
    }
    out.push('}');
    out
}

/// A finished message's tool calls as chunks: all of each call in one chunk, its `args` the
/// JSON text LangChain parses back (`index` keeps parallel calls apart when merged).
fn tool_call_chunks(tool_calls: &[ToolCall]) -> Value {
    Value::Array(
        tool_calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                json!({
                    "type": "tool_call_chunk",
                    "id": call.id,
                    "name": call.name,
                    "args": call.args.to_string(),
                    "index": index,
                })
            })
            .collect(),
    )
}

/// `[message, metadata]`, both already JSON.
pub(super) fn pair(message: &str, metadata: &str) -> String {
    let mut out = String::with_capacity(message.len() + metadata.len() + 3);
    out.push('[');
    out.push_str(message);
    out.push(',');
    out.push_str(metadata);
    out.push(']');
    out
}

/// The metadata LangGraph puts beside a streamed message: which node of which step, the run
/// and thread (`checkpoint_ns` is `tools:{call id}` for a sub-agent's, how the JS SDK tells a
/// sub-agent's messages from the lead's).
pub(super) fn message_metadata(
    run_id: &str,
    thread_id: &str,
    node: &str,
    step: u64,
    checkpoint_ns: &str,
) -> String {
    json!({
        "tags": [],
        "run_id": run_id,
        "thread_id": thread_id,
        "langgraph_step": step,
        "langgraph_node": node,
        "langgraph_triggers": [format!("branch:to:{node}")],
        "langgraph_path": ["__pregel_pull", node],
        "langgraph_checkpoint_ns": checkpoint_ns,
        "checkpoint_ns": checkpoint_ns,
    })
    .to_string()
}

/// The id of a step's task (one task per step: the node that ran). Stable for a run, so a
/// replayed stream names the same tasks.
pub(super) fn task_id(run_id: &str, step: u64) -> String {
    format!("{run_id}:task:{step}")
}

/// The id of the checkpoint a step ends with, as the stream names it.
pub(super) fn checkpoint_id(run_id: &str, step: u64) -> String {
    format!("{run_id}:step:{step}")
}

/// A checkpoint's `config` (`configurable.thread_id`, `checkpoint_ns`, `checkpoint_id`).
pub(super) fn checkpoint_config(thread_id: &str, checkpoint_id: &str) -> Value {
    json!({"configurable": {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
    }})
}

/// The SDK's `TaskPayload`: a node starting.
pub(super) fn task_start(id: &str, node: &str) -> Value {
    json!({
        "id": id,
        "name": node,
        "input": {},
        "triggers": [format!("branch:to:{node}")],
        "interrupts": [],
    })
}

/// The SDK's `TaskResultPayload`: what the node wrote, as `[channel, value]` pairs (LangGraph's
/// writes; the JS SDK's `result: [string, UpdateType][]`).
pub(super) fn task_result(id: &str, node: &str, writes: &serde_json::Map<String, Value>) -> Value {
    let result: Vec<Value> = writes
        .iter()
        .map(|(channel, value)| json!([channel, value]))
        .collect();
    json!({
        "id": id,
        "name": node,
        "error": null,
        "interrupts": [],
        "result": result,
    })
}

/// The SDK's `CheckpointPayload` of a step's end.
pub(super) fn checkpoint(
    config: Value,
    parent_config: Option<Value>,
    step: u64,
    run_id: &str,
    values: Value,
    next: &[&str],
) -> Value {
    json!({
        "config": config,
        "parent_config": parent_config,
        "metadata": {"source": "loop", "step": step, "run_id": run_id, "parents": {}},
        "values": values,
        "next": next,
        "tasks": [],
    })
}

/// A `debug` event's wrapper (`step`, `timestamp`, `type`, `payload`).
pub(super) fn debug(step: u64, kind: &str, payload: Value) -> Value {
    json!({
        "step": step,
        "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "type": kind,
        "payload": payload,
    })
}
