//! Each mode's frames against the SDKs' types (`langgraph_sdk/schema.py`, the JS SDK's
//! `types.stream.d.ts`), over a run shaped like the harness's: deltas, an answer asking for a
//! tool, the tool's result, a final answer, the state after each step.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{Encoder, Frame, StreamRequest};
use crate::agent_api::{ErrorCode, RunEvent, StopReason};
use antler_store::messages::{AiMessage, Message, ToolCall, ToolMessage};
use antler_store::state::ThreadState;

fn call() -> ToolCall {
    ToolCall {
        id: "call-1".into(),
        name: "ls".into(),
        args: json!({"path": "/mnt"}),
        args_error: None,
    }
}

/// Started, reasoning and text deltas of `ai-1` (which asks for `ls`), its step's state with a
/// new title, the tool's step, then `ai-2` not streamed, its state and the end.
fn sample_run() -> Vec<RunEvent> {
    let ai = Message::Ai(AiMessage {
        id: "ai-1".into(),
        content: "Let me look.".into(),
        tool_calls: vec![call()],
        ..Default::default()
    });
    let tool = ToolMessage {
        id: "tool-1".into(),
        ..ToolMessage::success(&call(), "a b")
    };
    let answer = Message::ai("Two files.");
    let mut state = ThreadState {
        messages: vec![Message::human("what is there?"), ai.clone()].into(),
        title: Some("Files".into()),
        ..Default::default()
    };
    let first = Arc::new(state.clone());
    state.messages.push(Message::Tool(tool.clone()));
    let second = Arc::new(state.clone());
    state.messages.push(answer.clone());
    let third = Arc::new(state);
    vec![
        RunEvent::Started {
            run_id: "run-1".into(),
            thread_id: "thread-1".into(),
        },
        RunEvent::ReasoningDelta {
            message_id: "ai-1".into(),
            delta: "hmm".into(),
        },
        RunEvent::TextDelta {
            message_id: "ai-1".into(),
            delta: "Let me ".into(),
        },
        RunEvent::TextDelta {
            message_id: "ai-1".into(),
            delta: "look.".into(),
        },
        RunEvent::Message { message: ai },
        RunEvent::Values { state: first },
        RunEvent::ToolStarted { call: call() },
        RunEvent::ToolFinished {
            result: tool.clone(),
        },
        RunEvent::Message {
            message: Message::Tool(tool),
        },
        RunEvent::Values { state: second },
        RunEvent::Message { message: answer },
        RunEvent::Values { state: third },
        RunEvent::Finished {
            stop_reason: StopReason::Completed,
        },
    ]
}

fn encode(modes: Option<&[&str]>, subgraphs: bool, events: &[RunEvent]) -> Vec<(String, Value)> {
    let request = StreamRequest {
        modes: modes.map(|modes| modes.iter().map(|mode| mode.to_string()).collect()),
        subgraphs,
    };
    let mut encoder = Encoder::new(request, "run-1", "thread-1");
    let mut frames: Vec<Frame> = Vec::new();
    for event in events {
        encoder.encode(event, &mut frames);
    }
    frames
        .into_iter()
        .map(|frame| {
            let data = serde_json::from_str(&frame.data).expect("frame data is JSON");
            (frame.event.into_owned(), data)
        })
        .collect()
}

fn names(frames: &[(String, Value)]) -> Vec<&str> {
    frames.iter().map(|(name, _)| name.as_str()).collect()
}

fn of<'a>(frames: &'a [(String, Value)], name: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|(event, _)| event == name)
        .map(|(_, data)| data)
        .collect()
}

fn parse(mode: Value) -> Result<StreamRequest, crate::http::ApiError> {
    StreamRequest::parse(Some(&mode), None)
}

#[test]
fn modes_are_read_from_a_string_or_a_list_and_an_unknown_one_is_named() {
    assert_eq!(
        parse(json!("values")).unwrap().modes,
        Some(vec!["values".to_string()])
    );
    let all = json!([
        "values",
        "messages-tuple",
        "updates",
        "debug",
        "tasks",
        "checkpoints",
        "custom",
        "messages",
        "events",
        "tools",
        "lifecycle"
    ]);
    assert!(parse(all).is_ok());
    let refused = parse(json!(["values", "telepathy"])).unwrap_err();
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        refused.message.starts_with("stream_mode: `telepathy`"),
        "{}",
        refused.message
    );
    assert!(
        refused.message.contains("messages-tuple"),
        "{}",
        refused.message
    );
    assert_eq!(
        parse(json!([1])).unwrap_err().status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let request = StreamRequest::parse(None, Some(&json!(true))).unwrap();
    assert_eq!((request.modes, request.subgraphs), (None, true));
}

#[test]
fn without_stream_mode_the_frames_are_antlers_own() {
    let frames = encode(None, false, &sample_run());
    assert_eq!(
        names(&frames),
        [
            "metadata", "messages", "messages", "messages", "custom", "values", "custom", "custom",
            "custom", "values", "custom", "values", "end"
        ]
    );
    assert_eq!(
        frames[0].1,
        json!({"run_id": "run-1", "thread_id": "thread-1"})
    );
    assert_eq!(
        frames[2].1,
        json!([{"type": "AIMessageChunk", "id": "ai-1", "content": "Let me "},
            {"run_id": "run-1", "thread_id": "thread-1"}])
    );
    assert_eq!(frames[4].1["type"], "message");
    assert_eq!(
        frames.last().unwrap().1,
        json!({"stop_reason": "completed"})
    );
}

#[test]
fn only_the_requested_modes_are_sent_between_metadata_and_end() {
    let frames = encode(Some(&["values"]), false, &sample_run());
    assert_eq!(
        names(&frames),
        ["metadata", "values", "values", "values", "end"]
    );
    assert_eq!(
        frames[0].1,
        json!({"run_id": "run-1", "thread_id": "thread-1", "attempt": 1})
    );
    assert_eq!(frames[3].1["messages"].as_array().unwrap().len(), 4);
    assert_eq!(
        frames[4].1,
        json!({"run_id": "run-1", "status": "success", "stop_reason": "completed"})
    );
    assert_eq!(names(&encode(Some(&[]), false, &sample_run()))[1], "values");
}

#[test]
fn messages_tuple_sends_ai_chunks_and_whole_tool_messages_with_their_node_and_step() {
    let frames = encode(Some(&["messages-tuple"]), false, &sample_run());
    let messages = of(&frames, "messages");
    assert_eq!(messages.len(), 6, "{frames:?}");
    let (reasoning, metadata) = (&messages[0][0], &messages[0][1]);
    assert_eq!(reasoning["type"], "AIMessageChunk");
    assert_eq!(reasoning["content"], "");
    assert_eq!(reasoning["additional_kwargs"]["reasoning_content"], "hmm");
    assert_eq!(metadata["langgraph_node"], "model");
    assert_eq!(metadata["langgraph_step"], 1);
    assert_eq!(
        (&metadata["run_id"], &metadata["thread_id"]),
        (&json!("run-1"), &json!("thread-1"))
    );
    assert_eq!(metadata["tags"], json!([]));
    assert_eq!(messages[1][0]["content"], "Let me ");
    assert_eq!(messages[1][0]["tool_call_chunks"], json!([]));
    // The streamed answer's tool calls: one more chunk of the same message, no text again.
    let calls = &messages[3][0];
    assert_eq!(
        (&calls["id"], &calls["content"]),
        (&json!("ai-1"), &json!(""))
    );
    assert_eq!(
        calls["tool_call_chunks"],
        json!([{"type": "tool_call_chunk", "id": "call-1", "name": "ls",
            "args": "{\"path\":\"/mnt\"}", "index": 0}])
    );
    let (tool, metadata) = (&messages[4][0], &messages[4][1]);
    assert_eq!(
        (&tool["type"], &tool["tool_call_id"]),
        (&json!("tool"), &json!("call-1"))
    );
    assert_eq!(
        (&metadata["langgraph_node"], &metadata["langgraph_step"]),
        (&json!("tools"), &json!(2))
    );
    // An answer that was not streamed arrives whole, in the next model step.
    let (whole, metadata) = (&messages[5][0], &messages[5][1]);
    assert_eq!(
        (&whole["type"], &whole["content"]),
        (&json!("AIMessageChunk"), &json!("Two files."))
    );
    assert_eq!(
        (&metadata["langgraph_node"], &metadata["langgraph_step"]),
        (&json!("model"), &json!(3))
    );
}

#[test]
fn updates_name_the_node_and_carry_what_its_step_added_and_changed() {
    let frames = encode(Some(&["updates"]), false, &sample_run());
    let updates = of(&frames, "updates");
    assert_eq!(updates.len(), 3);
    let model = &updates[0]["model"];
    assert_eq!(model["messages"][0]["id"], "ai-1");
    assert_eq!(
        model["title"], "Files",
        "a changed state key comes with its step"
    );
    let tools = &updates[1]["tools"];
    assert_eq!(tools["messages"][0]["type"], "tool");
    assert!(
        tools.get("title").is_none(),
        "an unchanged key is left out: {tools}"
    );
    assert_eq!(updates[2]["model"]["messages"][0]["content"], "Two files.");
}

#[test]
fn messages_mode_sends_metadata_partial_and_complete() {
    let frames = encode(Some(&["messages"]), false, &sample_run());
    let metadata = of(&frames, "messages/metadata");
    assert_eq!(metadata[0]["ai-1"]["metadata"]["langgraph_node"], "model");
    let partial = of(&frames, "messages/partial");
    assert_eq!(partial.last().unwrap()[0]["content"], "Let me look.");
    let complete = of(&frames, "messages/complete");
    assert_eq!(complete.len(), 3);
    assert_eq!(complete[0][0]["tool_calls"][0]["name"], "ls");
    assert_eq!(metadata.len(), 3, "one per message: {metadata:?}");
}

#[test]
fn tasks_checkpoints_and_debug_follow_the_steps() {
    let frames = encode(
        Some(&["tasks", "checkpoints", "debug"]),
        false,
        &sample_run(),
    );
    let tasks = of(&frames, "tasks");
    assert_eq!(tasks.len(), 6);
    assert_eq!(tasks[0]["name"], "model");
    for key in ["id", "input", "triggers"] {
        assert!(tasks[0].get(key).is_some(), "{key} in {}", tasks[0]);
    }
    assert_eq!(tasks[1]["id"], tasks[0]["id"]);
    assert_eq!(tasks[1]["error"], Value::Null);
    let writes = tasks[1]["result"].as_array().unwrap();
    let channels: Vec<&str> = writes.iter().map(|w| w[0].as_str().unwrap()).collect();
    assert_eq!(
        channels,
        ["messages", "title"],
        "the first step's writes: {writes:?}"
    );
    assert_eq!(writes[0][1][0]["id"], "ai-1");
    assert_eq!(tasks[3]["name"], "tools");
    let checkpoints = of(&frames, "checkpoints");
    assert_eq!(checkpoints.len(), 3);
    for key in [
        "config",
        "parent_config",
        "metadata",
        "values",
        "next",
        "tasks",
    ] {
        assert!(
            checkpoints[0].get(key).is_some(),
            "{key} in {}",
            checkpoints[0]
        );
    }
    assert_eq!(checkpoints[0]["next"], json!(["tools"]));
    assert_eq!(checkpoints[0]["parent_config"], Value::Null);
    assert_eq!(checkpoints[1]["next"], json!(["model"]));
    assert_eq!(checkpoints[2]["next"], json!([]));
    assert_eq!(
        checkpoints[1]["parent_config"]["configurable"]["checkpoint_id"],
        checkpoints[0]["config"]["configurable"]["checkpoint_id"]
    );
    assert_eq!(checkpoints[2]["metadata"]["step"], 3);
    let debug = of(&frames, "debug");
    let kinds: Vec<&str> = debug.iter().map(|d| d["type"].as_str().unwrap()).collect();
    assert_eq!(&kinds[..3], ["task", "task_result", "checkpoint"]);
    assert!(
        debug
            .iter()
            .all(|d| d["timestamp"].is_string() && d["step"].is_u64())
    );
}

#[test]
fn custom_progress_is_flat_and_errors_and_ends_read_as_the_sdk_expects() {
    let events = [
        RunEvent::Custom {
            name: "budget_warning".into(),
            data: json!({"message": "80 %"}),
        },
        RunEvent::Error {
            code: ErrorCode::ModelError,
            message: "the model answered 500".into(),
        },
        RunEvent::Finished {
            stop_reason: StopReason::Error,
        },
    ];
    let frames = encode(Some(&["custom"]), false, &events);
    assert_eq!(
        frames[0].1,
        json!({"type": "budget_warning", "message": "80 %"})
    );
    assert_eq!(
        frames[1],
        (
            "error".into(),
            json!({"error": "model_error", "message": "the model answered 500"})
        )
    );
    assert_eq!(frames[2].1["status"], "error");
}

#[test]
fn tools_and_events_modes_report_tool_calls() {
    let frames = encode(Some(&["tools", "events"]), false, &sample_run());
    let tools = of(&frames, "tools");
    assert_eq!(tools[0]["event"], "on_tool_start");
    assert_eq!(
        tools[1],
        &json!({"event": "on_tool_end", "toolCallId": "call-1",
        "name": "ls", "output": "a b"})
    );
    let events: Vec<&str> = of(&frames, "events")
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(events[0], "on_chat_model_start");
    assert!(events.contains(&"on_chat_model_stream") && events.contains(&"on_tool_end"));
}

#[test]
fn a_subagents_messages_stream_under_its_namespace_only_with_subgraphs() {
    let events = [RunEvent::TaskRunning {
        task_id: "call-9".into(),
        message: Message::ai("3 files"),
        message_index: 1,
    }];
    let modes: &[&str] = &["messages-tuple", "updates", "lifecycle"];
    assert!(encode(Some(modes), false, &events).is_empty());
    let frames = encode(Some(modes), true, &events);
    assert_eq!(
        names(&frames),
        ["messages|tools:call-9", "updates|tools:call-9"]
    );
    assert_eq!(frames[0].1[0]["content"], "3 files");
    assert_eq!(frames[0].1[1]["langgraph_checkpoint_ns"], "tools:call-9");
    assert_eq!(frames[1].1["model"]["messages"][0]["content"], "3 files");
}

#[test]
fn json_strings_are_escaped_as_serde_json_escapes_them() {
    for text in [
        "plain",
        "quote \" back \\ slash",
        "lines\n\r\t",
        "bell \u{7} nul \u{0} bs \u{8} ff \u{c}",
        "ünï ✓",
    ] {
        let mut out = String::new();
        super::shapes::push_json_str(&mut out, text);
        assert_eq!(out, serde_json::to_string(text).unwrap());
    }
}

#[test]
fn the_input_and_hook_writes_are_checkpoints_but_not_node_tasks() {
    let input = ThreadState {
        messages: vec![Message::human("hi")].into(),
        ..Default::default()
    };
    let mut answered = input.clone();
    answered.messages.push(Message::ai("Hello"));
    let mut titled = answered.clone();
    titled.title = Some("Greeting".into());
    let events = [
        RunEvent::Values {
            state: Arc::new(input),
        },
        RunEvent::TextDelta {
            message_id: "ai-1".into(),
            delta: "Hello".into(),
        },
        RunEvent::Values {
            state: Arc::new(answered),
        },
        RunEvent::Values {
            state: Arc::new(titled),
        },
    ];
    let modes: &[&str] = &["messages-tuple", "updates", "tasks", "checkpoints"];
    let frames = encode(Some(modes), false, &events);
    assert_eq!(of(&frames, "messages")[0][1]["langgraph_step"], 1);
    assert_eq!(
        of(&frames, "tasks").len(),
        2,
        "one task, the model's: {frames:?}"
    );
    let steps: Vec<&Value> = of(&frames, "checkpoints")
        .iter()
        .map(|checkpoint| &checkpoint["metadata"]["step"])
        .collect();
    assert_eq!(steps, [&json!(0), &json!(1), &json!(2)]);
    let updates = of(&frames, "updates");
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(updates[0]["model"]["title"], "Greeting");
}

#[test]
fn antlers_delta_frames_are_byte_for_byte_what_json_builds() {
    let events = [
        RunEvent::TextDelta {
            message_id: "ai-\"1".into(),
            delta: "line\n\u{1} \"q\" ✓".into(),
        },
        RunEvent::ReasoningDelta {
            message_id: "ai-1".into(),
            delta: "think\t".into(),
        },
    ];
    let mut encoder = Encoder::new(StreamRequest::default(), "run-\"1", "thread-1");
    let mut frames = Vec::new();
    for event in &events {
        encoder.encode(event, &mut frames);
    }
    let expected = [
        json!([{"type": "AIMessageChunk", "id": "ai-\"1", "content": "line\n\u{1} \"q\" ✓"},
            {"run_id": "run-\"1", "thread_id": "thread-1"}]),
        json!([{"type": "AIMessageChunk", "id": "ai-1", "content": "",
             "additional_kwargs": {"reasoning_content": "think\t"}},
            {"run_id": "run-\"1", "thread_id": "thread-1"}]),
    ];
    for (frame, expected) in frames.iter().zip(expected) {
        assert_eq!(frame.event, "messages");
        assert_eq!(frame.data, expected.to_string());
    }
    assert_eq!(frames.len(), 2);
}
