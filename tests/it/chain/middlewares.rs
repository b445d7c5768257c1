//! Acceptance cases of the built-in middlewares, with hooks called directly on hand-built states.

use std::sync::Arc;

use serde_json::{Value, json};

use antler::agent_api::ToolContext;
use antler::agent_api::{Middleware, ModelNext, ToolNext};
use antler::agent_api::{RunContext, StopReason};
use antler::config::AppConfig;
use antler::middleware::clarification::ASK_CLARIFICATION;
use antler::middleware::dangling_tool_call::INTERRUPTED_TOOL_RESULT;
use antler::middleware::loop_detection::{FORCED_STOP_SUFFIX, REPEAT_WARNING, calls_hash};
use antler::middleware::title::{DEFAULT_TITLE, fallback_title, parse_title};
use antler::middleware::{
    ClarificationMiddleware, DanglingToolCallMiddleware, LoopDetectionMiddleware, TitleMiddleware,
};
use antler::model::{ModelRequest, ScriptedModel, ScriptedTurn};
use antler_store::messages::{AiMessage, FinishReason, Message, ToolCall, ToolMessage, ToolStatus};
use antler_store::state::ThreadState;

// ---- loop detection -------------------------------------------------------------------------

fn tool_call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        args,
        args_error: None,
    }
}

fn ai_calling(calls: Vec<ToolCall>) -> Message {
    Message::Ai(AiMessage {
        id: antler_store::messages::new_id("ai").into(),
        content: "working".into(),
        tool_calls: calls,
        finish_reason: Some(FinishReason::ToolCalls),
        ..Default::default()
    })
}

fn ctx() -> RunContext {
    RunContext::new("thread-1", "user-1", Arc::new(AppConfig::default()))
}

/// Runs `after_model` on a state ending with `ai`, applies the update and returns the state.
async fn observe(mw: &LoopDetectionMiddleware, ctx: &RunContext, ai: Message) -> ThreadState {
    let mut state = ThreadState {
        messages: vec![Message::human("go"), ai].into(),
        ..Default::default()
    };
    let result = mw.after_model(&state, ctx).await.unwrap();
    state.apply(result.update).unwrap();
    state
}

/// Makes one model call through `mw` and returns the request the model received.
async fn request_through(
    mw: &dyn Middleware,
    state: &ThreadState,
    ctx: &RunContext,
) -> ModelRequest {
    let model = ScriptedModel::new("scripted", [ScriptedTurn::Text(vec!["ok".into()])]);
    let request = ModelRequest {
        messages: state.messages.clone(),
        ..Default::default()
    };
    mw.wrap_model_call(request, state, ctx, ModelNext::new(&[], &model, state, ctx))
        .await
        .unwrap();
    model.requests().pop().unwrap()
}

fn loop_warnings(request: &ModelRequest) -> Vec<&str> {
    request
        .messages
        .iter()
        .filter_map(Message::as_human)
        .filter(|h| h.name.as_deref() == Some("loop_warning"))
        .map(|h| h.content.as_str())
        .collect()
}

#[test]
fn loop_hash_is_order_independent() {
    let a = tool_call("1", "web_search", json!({"query": "rust"}));
    let b = tool_call("2", "read_file", json!({"path": "/a"}));
    assert_eq!(
        calls_hash(&[a.clone(), b.clone()]),
        calls_hash(&[b, a.clone()])
    );
    assert_ne!(
        calls_hash(&[a]),
        calls_hash(&[tool_call("1", "web_search", json!({"query": "go"}))])
    );
}

#[test]
fn reversed_read_file_range_matches_forward_range() {
    let forward = tool_call(
        "1",
        "read_file",
        json!({"path": "/f", "start_line": 10, "end_line": 450}),
    );
    let reversed = tool_call(
        "1",
        "read_file",
        json!({"path": "/f", "start_line": 450, "end_line": 10}),
    );
    assert_eq!(calls_hash(&[forward]), calls_hash(&[reversed]));
}

#[tokio::test]
async fn loop_warning_is_injected_at_the_next_model_call_once_per_hash() {
    let mw = LoopDetectionMiddleware::new(Default::default());
    let ctx = ctx();
    let repeat = || ai_calling(vec![tool_call("c", "bash", json!({"command": "ls"}))]);
    let mut state = ThreadState::default();
    for _ in 0..2 {
        state = observe(&mw, &ctx, repeat()).await;
    }
    assert!(loop_warnings(&request_through(&mw, &state, &ctx).await).is_empty());
    state = observe(&mw, &ctx, repeat()).await; // third time: warn
    assert_eq!(
        state.last_ai().unwrap().tool_calls.len(),
        1,
        "a warning does not stop the step"
    );
    let request = request_through(&mw, &state, &ctx).await;
    assert_eq!(loop_warnings(&request), [REPEAT_WARNING]);
    let note = request.messages.last().unwrap();
    assert!(note.is_hidden(), "the warning is the last, hidden message");
    assert!(
        state
            .messages
            .iter()
            .all(|m| m.as_human().and_then(|h| h.name.clone()).is_none()),
        "request-only"
    );
    // Shown once, and not queued again for the fourth repetition of the same hash.
    assert!(loop_warnings(&request_through(&mw, &state, &ctx).await).is_empty());
    state = observe(&mw, &ctx, repeat()).await;
    assert!(loop_warnings(&request_through(&mw, &state, &ctx).await).is_empty());
}

#[tokio::test]
async fn loop_hard_stop_at_the_limit() {
    let mw = LoopDetectionMiddleware::new(Default::default());
    let ctx = ctx();
    let repeat = || ai_calling(vec![tool_call("c", "bash", json!({"command": "ls"}))]);
    for _ in 0..4 {
        let state = observe(&mw, &ctx, repeat()).await;
        assert!(!state.last_ai().unwrap().tool_calls.is_empty());
    }
    let original = repeat();
    let state = observe(&mw, &ctx, original.clone()).await;
    assert_eq!(state.messages.len(), 2, "replaced in place");
    let stopped = state.last_ai().unwrap();
    assert_eq!(stopped.id, original.id());
    assert!(stopped.tool_calls.is_empty());
    assert_eq!(stopped.finish_reason, Some(FinishReason::Stop));
    assert_eq!(stopped.content, format!("working{FORCED_STOP_SUFFIX}"));
    assert!(
        stopped
            .content
            .contains("[FORCED STOP] Repeated tool calls exceeded the safety limit.")
    );
    assert_eq!(ctx.stop_reason(), Some(StopReason::LoopCapped));
}

// ---- dangling tool calls --------------------------------------------------------------------

#[tokio::test]
async fn dangling_call_gets_a_placeholder_right_after_its_ai_message_and_orphans_are_dropped() {
    let call_a = tool_call("a", "ls", json!({}));
    let call_b = tool_call("b", "cat", json!({}));
    let orphan = ToolMessage::success(&tool_call("zzz", "ls", json!({})), "orphan");
    let state = ThreadState {
        messages: vec![
            Message::human("first"),
            ai_calling(vec![call_a.clone(), call_b.clone()]),
            Message::Tool(ToolMessage::success(&call_b, "b-done")),
            Message::Tool(orphan),
            Message::human("second"),
        ]
        .into(),
        ..Default::default()
    };
    let request = request_through(&DanglingToolCallMiddleware, &state, &ctx()).await;
    let summary: Vec<String> = request
        .messages
        .iter()
        .map(|m| match m {
            Message::Tool(t) => format!("tool:{}:{}", t.tool_call_id, t.content),
            Message::Ai(_) => "ai".into(),
            other => other.content().to_string(),
        })
        .collect();
    assert_eq!(
        summary,
        [
            "first".to_string(),
            "ai".into(),
            format!("tool:a:{INTERRUPTED_TOOL_RESULT}"),
            "tool:b:b-done".into(),
            "second".into(),
        ]
    );
    assert_eq!(
        request.messages[2].as_tool().unwrap().status,
        ToolStatus::Error
    );
    assert_eq!(state.messages.len(), 5, "the stored thread is untouched");
}

// ---- clarification --------------------------------------------------------------------------

async fn clarify(ctx: &RunContext, args: Value) -> antler::agent_api::ToolResult {
    let state = ThreadState::default();
    let tool_ctx = ToolContext {
        run: ctx,
        state: &state,
        tool_call_id: "call-9",
    };
    let call = tool_call("call-9", ASK_CLARIFICATION, args);
    // No tools at all: the call must never reach a real tool.
    ClarificationMiddleware
        .wrap_tool_call(&call, &tool_ctx, ToolNext::new(&[], &[]))
        .await
        .unwrap()
}

#[tokio::test]
async fn clarification_is_intercepted_formatted_and_ends_the_run() {
    let result = clarify(
        &ctx(),
        json!({
            "question": "Which format should the report use?",
            "clarification_type": "ambiguous_requirement",
            "context": "You asked for a report.",
            "options": "[\"PDF\", \" Markdown \", \"PDF\", \"\"]",
        }),
    )
    .await;
    assert!(result.end_run);
    assert_eq!(result.message.id, "clarification:call-9");
    assert_eq!(result.message.name, ASK_CLARIFICATION);
    assert_eq!(
        result.message.content,
        "🤔 You asked for a report.\n\nWhich format should the report use?\n\n  1. PDF\n  2. Markdown"
    );
    let artifact = result.message.artifact.unwrap();
    assert_eq!(artifact["kind"], "human_input_request");
    assert_eq!(artifact["options"], json!(["PDF", "Markdown"]));
    assert_eq!(artifact["clarification_type"], "ambiguous_requirement");
}

#[tokio::test]
async fn non_interactive_runs_get_a_proceed_answer_instead() {
    let mut ctx = ctx();
    ctx.options.non_interactive = true;
    let result = clarify(
        &ctx,
        json!({"question": "?", "clarification_type": "missing_info"}),
    )
    .await;
    assert!(!result.end_run);
    assert!(result.message.content.contains("best judgement"));
}

// ---- title ----------------------------------------------------------------------------------

async fn title_after(messages: Vec<Message>) -> Option<String> {
    let mw = TitleMiddleware::new(Default::default());
    let state = ThreadState {
        messages: messages.into(),
        ..Default::default()
    };
    mw.after_model(&state, &ctx()).await.unwrap().update.title
}

#[tokio::test]
async fn title_is_set_after_the_first_exchange_only() {
    let first = title_after(vec![
        Message::human("Plan a trip to Rome"),
        Message::ai("Sure"),
    ])
    .await;
    assert_eq!(first.as_deref(), Some("Plan a trip to Rome"));
    let second_turn = title_after(vec![
        Message::human("Plan a trip to Rome"),
        Message::ai("Sure"),
        Message::human("And Paris?"),
        Message::ai("Also"),
    ])
    .await;
    assert_eq!(second_turn, None, "no title after the second user turn");
    let mid_tools = title_after(vec![
        Message::human("Plan a trip"),
        ai_calling(vec![tool_call("c", "web_search", json!({"query": "rome"}))]),
    ])
    .await;
    assert_eq!(
        mid_tools, None,
        "not while the answer is still calling tools"
    );
}

#[test]
fn title_fallback_for_long_messages_never_exceeds_max_chars() {
    let long = "word ".repeat(40);
    let title = fallback_title(&long, 60);
    assert!(title.ends_with("..."));
    assert_eq!(title, format!("{}...", long[..50].trim_end()));
    for max_chars in [10, 20, 40, 53, 60, 200] {
        let title = fallback_title(&long, max_chars);
        assert!(title.chars().count() <= max_chars, "{max_chars}: {title}");
    }
    assert_eq!(fallback_title("", 60), DEFAULT_TITLE);
}

#[test]
fn parse_title_strips_think_tags_and_quotes() {
    assert_eq!(
        parse_title(
            "<think>the user wants a trip</think>\n\"Rome Trip Plan\"",
            60
        ),
        "Rome Trip Plan"
    );
}
