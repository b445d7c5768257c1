//! What the console shows of a run, from the in-process run events or from the daemon's
//! `/runs/stream` frames (the same events, as the HTTP API sends them: see `http::runs`).

use serde_json::Value;

use crate::agent_api::RunEvent;
use crate::agent_api::approval::{APPROVAL_REQUESTED, ApprovalRequest};
use crate::cli::daemon_client::SseFrame;
use crate::commands::approve::approval_prompt;
use antler_store::messages::Message;

/// What the console shows of a run, whichever backend produced it.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatEvent {
    Text(String),
    ToolStarted(String),
    /// A tool's result came back (by tool name): `present_files` means files to point at.
    ToolFinished(String),
    /// A clarification question: the run ends waiting for the person's answer.
    Question(String),
    /// A tool call waits for approval (the run ends `awaiting_approval`): what, why, and how
    /// to answer (`/approve ID`, `/deny ID`).
    Approval(String),
    Error(String),
    Finished,
}

/// The console's view of an in-process run event.
pub(crate) fn from_run_event(event: RunEvent) -> Option<ChatEvent> {
    match event {
        RunEvent::TextDelta { delta, .. } => Some(ChatEvent::Text(delta)),
        RunEvent::ToolStarted { call } => Some(ChatEvent::ToolStarted(call.name)),
        RunEvent::ToolFinished { result } => Some(ChatEvent::ToolFinished(result.name)),
        RunEvent::Message { message } => clarification(&message),
        RunEvent::ApprovalRequested(request) => {
            Some(ChatEvent::Approval(approval_prompt(&request)))
        }
        RunEvent::Error { message, .. } => Some(ChatEvent::Error(message)),
        RunEvent::Finished { .. } => Some(ChatEvent::Finished),
        _ => None,
    }
}

/// The console's view of one `/runs/stream` frame.
pub(crate) fn from_sse(frame: &SseFrame) -> Option<ChatEvent> {
    let data = &frame.data;
    let name = |value: &Value| value.as_str().map(str::to_string);
    match frame.event.as_str() {
        // `[chunk, metadata]`; reasoning deltas have empty content and are not shown.
        "messages" => data[0]["content"]
            .as_str()
            .filter(|delta| !delta.is_empty())
            .map(|delta| ChatEvent::Text(delta.to_string())),
        "custom" => match data["type"].as_str() {
            Some("tool_started") => name(&data["call"]["name"]).map(ChatEvent::ToolStarted),
            Some("tool_finished") => name(&data["result"]["name"]).map(ChatEvent::ToolFinished),
            Some("message") => serde_json::from_value::<Message>(data["message"].clone())
                .ok()
                .and_then(|message| clarification(&message)),
            Some(APPROVAL_REQUESTED) => {
                serde_json::from_value::<ApprovalRequest>(data["data"].clone())
                    .ok()
                    .map(|request| ChatEvent::Approval(approval_prompt(&request)))
            }
            _ => None,
        },
        "error" => Some(ChatEvent::Error(
            data["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| data.to_string()),
        )),
        "end" => Some(ChatEvent::Finished),
        _ => None,
    }
}

/// A clarification question ends the run with a tool message, not a text delta.
fn clarification(message: &Message) -> Option<ChatEvent> {
    message
        .as_tool()
        .filter(|tool| tool.name == "ask_clarification")
        .map(|tool| ChatEvent::Question(tool.content.to_string()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn frame(event: &str, data: Value) -> SseFrame {
        SseFrame {
            event: event.into(),
            data,
        }
    }

    #[test]
    fn sse_frames_become_what_the_console_shows() {
        let question = json!({"type": "tool", "id": "t1", "tool_call_id": "c1",
            "name": "ask_clarification", "content": "Which city?"});
        let approval = json!({"id": "ap_1", "thread_id": "t", "run_id": "r",
            "tool_call_id": "c1", "tool": "bash", "args": {"command": "ls /"}, "summary": "ls /",
            "reason": {"kind": "always"}, "owner": "local", "requester": "local",
            "approvers": {"kind": "requester"}, "options": {},
            "created_at": "2026-12-05T18:30:00Z", "expires_at": "2026-12-05T19:30:00Z",
            "status": "pending"});
        let cases = [
            (
                frame("messages", json!([{"content": "Hi"}, {}])),
                Some(ChatEvent::Text("Hi".into())),
            ),
            (
                frame(
                    "messages",
                    json!([{"content": "", "additional_kwargs": {"reasoning_content": "hm"}}, {}]),
                ),
                None,
            ),
            (
                frame(
                    "custom",
                    json!({"type": "tool_started", "call": {"name": "bash"}}),
                ),
                Some(ChatEvent::ToolStarted("bash".into())),
            ),
            (
                frame(
                    "custom",
                    json!({"type": "tool_finished", "result": {"name": "present_files"}}),
                ),
                Some(ChatEvent::ToolFinished("present_files".into())),
            ),
            (
                frame("custom", json!({"type": "message", "message": question})),
                Some(ChatEvent::Question("Which city?".into())),
            ),
            (
                frame("error", json!({"code": "model", "message": "down"})),
                Some(ChatEvent::Error("down".into())),
            ),
            (
                frame("end", json!({"stop_reason": "completed"})),
                Some(ChatEvent::Finished),
            ),
            (
                frame(
                    "custom",
                    json!({"type": "approval_requested", "data": approval}),
                ),
                Some(ChatEvent::Approval(
                    "Approval needed (ap_1): bash `ls /`\nWhy: this tool always needs approval\n\
                     Answer /approve ap_1, or /deny ap_1 [reason]."
                        .into(),
                )),
            ),
            (
                frame(
                    "custom",
                    json!({"type": "approval_requested", "data": {"id": "incomplete"}}),
                ),
                None,
            ),
            (frame("metadata", json!({"run_id": "r"})), None),
            (frame("values", json!({})), None),
        ];
        for (input, expected) in cases {
            assert_eq!(from_sse(&input), expected, "{input:?}");
        }
    }
}
