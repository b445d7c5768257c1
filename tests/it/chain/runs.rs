//! The assembled default chain driven through the agent loop with a scripted model.

use std::sync::Arc;

use serde_json::{Value, json};

use antler::agent::{AgentOptions, create_agent};
use antler::agent_api::{RunContext, StopReason};
use antler::agent_api::{ToolOutput, ToolRef};
use antler::config::AppConfig;
use antler::middleware::loop_detection::REPEAT_WARNING;
use antler::middleware::terminal_response::NO_FINAL_RESPONSE;
use antler::model::{ScriptedModel, ScriptedTurn};
use antler::tools::FnTool;
use antler_store::messages::Message;
use antler_store::state::ThreadState;

/// Answers with its arguments.
fn echo() -> ToolRef {
    Arc::new(FnTool::new("echo", "echoes", |args: Value| async move {
        Ok(ToolOutput::text(args.to_string()))
    }))
}

fn ctx() -> RunContext {
    RunContext::new("thread-1", "user-1", Arc::new(AppConfig::default()))
}

fn call(name: &str, args: Value) -> ScriptedTurn {
    ScriptedTurn::ToolCalls {
        text: String::new(),
        calls: vec![(name.to_string(), args)],
    }
}

fn text(answer: &str) -> ScriptedTurn {
    ScriptedTurn::Text(vec![answer.to_string()])
}

#[tokio::test]
async fn clarification_ends_the_run_and_the_next_message_resumes_the_thread() {
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            call(
                "ask_clarification",
                json!({"question": "PDF or Markdown?", "clarification_type": "approach_choice", "options": ["PDF", "Markdown"]}),
            ),
            text("Here is the PDF report."),
        ],
    ));
    let agent = create_agent(model.clone(), Vec::new(), AgentOptions::default()).unwrap();
    let first = agent
        .run(
            ThreadState::default(),
            vec![Message::human("write a report")],
            &ctx(),
        )
        .await;
    assert_eq!(first.stop, StopReason::Interrupted, "{:?}", first.error);
    let question = first.state.messages.last().unwrap().as_tool().unwrap();
    assert!(question.id.starts_with("clarification:"));
    assert_eq!(
        question.content,
        "🔀 PDF or Markdown?\n\n  1. PDF\n  2. Markdown"
    );

    let second = agent
        .run(first.state, vec![Message::human("PDF")], &ctx())
        .await;
    assert_eq!(second.stop, StopReason::Completed, "{:?}", second.error);
    assert_eq!(
        second.state.last_ai().unwrap().content,
        "Here is the PDF report."
    );
    let resumed = &model.requests()[1];
    assert!(
        resumed
            .messages
            .iter()
            .any(|m| m.content().contains("PDF or Markdown?")),
        "the question is in the history the model sees"
    );
}

#[tokio::test]
async fn repeated_tool_calls_are_warned_then_stopped() {
    let repeat = || call("echo", json!({"command": "ls"}));
    let model = Arc::new(ScriptedModel::new("scripted", (0..5).map(|_| repeat())));
    let tools: Vec<ToolRef> = vec![echo()];
    let agent = create_agent(model.clone(), tools, AgentOptions::default()).unwrap();
    let ctx = ctx();
    let outcome = agent
        .run(ThreadState::default(), vec![Message::human("go")], &ctx)
        .await;
    assert_eq!(
        outcome.stop,
        StopReason::LoopCapped,
        "a forced answer says so: {:?}",
        outcome.error
    );
    let last = outcome.state.last_ai().unwrap();
    assert!(last.tool_calls.is_empty());
    assert!(last.content.contains("[FORCED STOP]"));
    assert_eq!(ctx.stop_reason(), Some(StopReason::LoopCapped));
    let requests = model.requests();
    assert_eq!(requests.len(), 5);
    let warned: Vec<bool> = requests
        .iter()
        .map(|r| r.messages.iter().any(|m| m.content() == REPEAT_WARNING))
        .collect();
    assert_eq!(warned, [false, false, false, true, false]);
    assert!(
        outcome
            .state
            .messages
            .iter()
            .all(|m| m.content() != REPEAT_WARNING),
        "warnings are never persisted"
    );
}

#[tokio::test]
async fn empty_final_answer_after_tools_is_retried_once_then_explained() {
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [call("echo", json!({"x": 1})), text(""), text("")],
    ));
    let tools: Vec<ToolRef> = vec![echo()];
    let agent = create_agent(model.clone(), tools, AgentOptions::default()).unwrap();
    let outcome = agent
        .run(ThreadState::default(), vec![Message::human("go")], &ctx())
        .await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert_eq!(model.requests().len(), 3);
    assert_eq!(outcome.state.last_ai().unwrap().content, NO_FINAL_RESPONSE);
}
