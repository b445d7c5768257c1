//! `antler bench stream`: what the SSE encoder costs per run event, in process.
//!
//! The encoder (`http::langgraph::stream::Encoder`) sits on the hot path of every streamed run:
//! each text delta of every answer passes through it. This replays a realistic run (reasoning,
//! many small text deltas, a tool call with its result, the plan, the state after each step)
//! through a fresh encoder per iteration, turns every frame into the axum SSE event the route
//! writes, and reports the median cost per event: for Antler's own set (no `stream_mode`) and
//! for the SDK's modes, so a change to either shows against the other.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use crate::agent_api::{RunEvent, StopReason};
use crate::http::langgraph::stream::{Encoder, StreamRequest};
use antler_store::messages::{AiMessage, Message, ToolCall, ToolMessage};
use antler_store::state::{ThreadState, Todo, TodoStatus};

/// One measured encoder configuration.
#[derive(Clone, Debug)]
pub struct StreamSeries {
    pub label: &'static str,
    pub events: usize,
    pub frames: usize,
    /// Median over iterations of (iteration time / events).
    pub p50_ns_per_event: f64,
    pub p90_ns_per_event: f64,
}

/// Every configuration measured by one `antler bench stream`.
#[derive(Clone, Debug)]
pub struct StreamReport(pub Vec<StreamSeries>);

impl fmt::Display for StreamReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for series in &self.0 {
            writeln!(
                f,
                "{:<44} events={:<4} frames={:<4} p50={:>8.0} ns/event  p90={:>8.0} ns/event",
                series.label,
                series.events,
                series.frames,
                series.p50_ns_per_event,
                series.p90_ns_per_event
            )?;
        }
        Ok(())
    }
}

/// The configurations measured: Antler's own set first (the one the 10 % goal is about).
const CONFIGURATIONS: [(&str, Option<&[&str]>); 4] = [
    ("antler set (no stream_mode)", None),
    (
        "sdk values+messages-tuple+updates+custom",
        Some(&["values", "messages-tuple", "updates", "custom"]),
    ),
    (
        "deerflow ui (7 modes)",
        Some(&[
            "values",
            "messages-tuple",
            "updates",
            "debug",
            "tasks",
            "checkpoints",
            "custom",
        ]),
    ),
    ("messages-tuple only", Some(&["messages-tuple"])),
];

/// Encodes the sample run `iterations` times per configuration.
pub fn stream(iterations: usize) -> StreamReport {
    let events = sample_run();
    let mut report = Vec::new();
    for (label, modes) in CONFIGURATIONS {
        let request = StreamRequest {
            modes: modes.map(|modes| modes.iter().map(|mode| mode.to_string()).collect()),
            subgraphs: false,
        };
        let mut per_event = Vec::with_capacity(iterations);
        let mut frames_per_run = 0;
        for _ in 0..iterations.max(1) {
            let started = Instant::now();
            frames_per_run = encode_run(&request, &events);
            per_event.push(started.elapsed().as_nanos() as f64 / events.len() as f64);
        }
        per_event.sort_by(f64::total_cmp);
        let pick = |q: f64| per_event[((per_event.len() as f64 - 1.0) * q).round() as usize];
        report.push(StreamSeries {
            label,
            events: events.len(),
            frames: frames_per_run,
            p50_ns_per_event: pick(0.5),
            p90_ns_per_event: pick(0.9),
        });
    }
    StreamReport(report)
}

/// One run through a fresh encoder, every frame made into the SSE event the route sends.
fn encode_run(request: &StreamRequest, events: &[RunEvent]) -> usize {
    let mut encoder = Encoder::new(request.clone(), "run-bench", "thread-bench");
    let mut frames = Vec::new();
    let mut sent = 0;
    for event in events {
        encoder.encode(event, &mut frames);
        for frame in frames.drain(..) {
            drop(std::hint::black_box(crate::http::runs::sse_of(frame)));
            sent += 1;
        }
    }
    sent
}

/// A run as the harness emits it: reasoning, an answer streamed in small deltas that calls a
/// tool, the tool's result, the plan, a final answer streamed again, the state after each step.
fn sample_run() -> Vec<RunEvent> {
    let mut state = ThreadState {
        messages: vec![Message::human(
            "What changed in the report since last week?",
        )]
        .into(),
        title: Some("Weekly report".into()),
        ..Default::default()
    };
    let mut events = vec![RunEvent::Started {
        run_id: "run-bench".into(),
        thread_id: "thread-bench".into(),
    }];
    let first = "ai-bench-1";
    for word in 0..20 {
        events.push(RunEvent::ReasoningDelta {
            message_id: first.into(),
            delta: format!("step {word} "),
        });
    }
    for word in 0..150 {
        events.push(RunEvent::TextDelta {
            message_id: first.into(),
            delta: format!("word{word} "),
        });
    }
    let call = ToolCall {
        id: "call-bench-1".into(),
        name: "read_file".into(),
        args: json!({"path": "/mnt/user-data/uploads/report.md"}),
        args_error: None,
    };
    let ai = Message::Ai(AiMessage {
        id: first.into(),
        content: "Let me read the report.".into(),
        tool_calls: vec![call.clone()],
        ..Default::default()
    });
    state.messages.push(ai.clone());
    events.push(RunEvent::Message { message: ai });
    events.push(RunEvent::Values {
        state: Arc::new(state.clone()),
    });
    events.push(RunEvent::ToolStarted { call: call.clone() });
    let result = ToolMessage::success(&call, "# Report\n".repeat(40));
    state.messages.push(Message::Tool(result.clone()));
    events.push(RunEvent::ToolFinished {
        result: result.clone(),
    });
    events.push(RunEvent::Message {
        message: Message::Tool(result),
    });
    events.push(RunEvent::TodosUpdated {
        todos: vec![Todo {
            content: "Compare sections".into(),
            status: TodoStatus::InProgress,
            active_form: Some("Comparing sections".into()),
        }],
    });
    events.push(RunEvent::Values {
        state: Arc::new(state.clone()),
    });
    let second = "ai-bench-2";
    for word in 0..150 {
        events.push(RunEvent::TextDelta {
            message_id: second.into(),
            delta: format!("word{word} "),
        });
    }
    let answer = Message::Ai(AiMessage {
        id: second.into(),
        content: "word ".repeat(150).into(),
        ..Default::default()
    });
    state.messages.push(answer.clone());
    events.push(RunEvent::Message { message: answer });
    events.push(RunEvent::Values {
        state: Arc::new(state),
    });
    events.push(RunEvent::Finished {
        stop_reason: StopReason::Completed,
    });
    events
}
