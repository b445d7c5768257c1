//! Loop semantics: hook order, concurrency, jumps, limits, cancellation and failure handling.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::agent::Agent;
use crate::agent_api::ToolResult;
use crate::agent_api::{ErrorCode, EventSink, RunContext, RunEvent, StopReason};
use crate::agent_api::{
    HookResult, Middleware, MiddlewareError, MiddlewareRef, ModelNext, ToolNext,
};
use crate::agent_api::{ToolContext, ToolError, ToolOutput, ToolRef};
use crate::config::AppConfig;
use crate::model::{
    ChatModel, ModelError, ModelErrorKind, ModelRequest, ScriptedModel, ScriptedTurn,
};
use crate::tools::FnTool;
use antler_store::messages::{AiMessage, Message, ToolCall, ToolStatus};
use antler_store::state::{StateUpdate, ThreadState};
use antler_store::{Checkpoint, Checkpointer, StepCheckpoint, StoreError};

type Log = Arc<Mutex<Vec<String>>>;

fn push(log: &Log, entry: impl Into<String>) {
    log.lock().unwrap().push(entry.into());
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

/// Sleeps `delay_ms` from its arguments, logging start and end.
fn sleep_tool(log: &Log) -> ToolRef {
    let log = log.clone();
    Arc::new(FnTool::new("sleep", "sleeps", move |args: Value| {
        let log = log.clone();
        async move {
            let label = args["label"].as_str().unwrap_or("?").to_string();
            push(&log, format!("start:{label}"));
            tokio::time::sleep(Duration::from_millis(
                args["delay_ms"].as_u64().unwrap_or(0),
            ))
            .await;
            push(&log, format!("end:{label}"));
            Ok(ToolOutput::text(format!("slept {label}")))
        }
    }))
}

fn panic_tool() -> ToolRef {
    Arc::new(FnTool::new("boom", "panics", |_args: Value| async {
        if true {
            panic!("tool exploded");
        }
        Ok(ToolOutput::default())
    }))
}

/// Logs every hook as `hook:name`.
struct Recorder {
    name: &'static str,
    log: Log,
}

#[async_trait]
impl Middleware for Recorder {
    fn name(&self) -> &str {
        self.name
    }
    async fn before_agent(
        &self,
        _: &ThreadState,
        _: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        push(&self.log, format!("before_agent:{}", self.name));
        Ok(HookResult::proceed())
    }
    async fn before_model(
        &self,
        _: &ThreadState,
        _: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        push(&self.log, format!("before_model:{}", self.name));
        Ok(HookResult::proceed())
    }
    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        _: &ThreadState,
        _: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        push(&self.log, format!("wrap_model_in:{}", self.name));
        let answer = next.call(request).await;
        push(&self.log, format!("wrap_model_out:{}", self.name));
        answer
    }
    async fn after_model(
        &self,
        _: &ThreadState,
        _: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        push(&self.log, format!("after_model:{}", self.name));
        Ok(HookResult::proceed())
    }
    async fn wrap_tool_call(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
        next: ToolNext<'_>,
    ) -> Result<ToolResult, ToolError> {
        push(&self.log, format!("wrap_tool_in:{}", self.name));
        let result = next.call(call, ctx).await;
        push(&self.log, format!("wrap_tool_out:{}", self.name));
        result
    }
    async fn after_agent(
        &self,
        _: &ThreadState,
        _: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        push(&self.log, format!("after_agent:{}", self.name));
        Ok(HookResult::proceed())
    }
}

/// `after_model` returns a fixed flow the first `times` times.
struct Jump {
    flow: crate::agent_api::Flow,
    times: Mutex<u32>,
}

#[async_trait]
impl Middleware for Jump {
    fn name(&self) -> &str {
        "Jump"
    }
    async fn after_model(
        &self,
        _: &ThreadState,
        _: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let mut times = self.times.lock().unwrap();
        if *times == 0 {
            return Ok(HookResult::proceed());
        }
        *times -= 1;
        Ok(HookResult {
            update: StateUpdate::message(Message::human("try again")),
            flow: self.flow,
        })
    }
}

/// Keeps every saved (step, state); `latest` is never asked by the loop.
#[derive(Default)]
struct MemoryCheckpointer {
    saved: Mutex<Vec<(u64, antler_store::state::ThreadState)>>,
}

#[async_trait]
impl Checkpointer for MemoryCheckpointer {
    async fn save(&self, step: StepCheckpoint<'_>) -> Result<u64, StoreError> {
        let saved = (step.step, step.state.clone());
        let mut all = self.saved.lock().unwrap();
        all.push(saved);
        Ok(all.len() as u64)
    }
    async fn latest(&self, _thread_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        Ok(None)
    }
}

fn agent(
    model: Arc<dyn ChatModel>,
    tools: Vec<ToolRef>,
    middleware: Vec<MiddlewareRef>,
) -> (Agent, Arc<MemoryCheckpointer>) {
    let checkpointer = Arc::new(MemoryCheckpointer::default());
    let agent = Agent {
        name: "test".into(),
        model,
        tools,
        middleware,
        system_prompt: Some("be brief".into()),
        recursion_limit: 25,
        checkpointer: Some(checkpointer.clone()),
    };
    (agent, checkpointer)
}

fn context() -> RunContext {
    RunContext::new("t1", "u1", Arc::new(AppConfig::default()))
}

fn sleep_calls(spec: &[(&str, u64)]) -> ScriptedTurn {
    ScriptedTurn::ToolCalls {
        text: String::new(),
        calls: spec
            .iter()
            .map(|(label, delay)| {
                (
                    "sleep".to_string(),
                    json!({"label": label, "delay_ms": delay}),
                )
            })
            .collect(),
    }
}

fn text(answer: &str) -> ScriptedTurn {
    ScriptedTurn::Text(vec![answer.to_string()])
}

fn kinds(state: &ThreadState) -> Vec<String> {
    state
        .messages
        .iter()
        .map(|m| match m {
            Message::Tool(t) => format!("tool:{}", t.content),
            other => format!(
                "{}:{}",
                serde_json::to_value(other).unwrap()["type"]
                    .as_str()
                    .unwrap(),
                other.content()
            ),
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn tools_run_concurrently_and_results_keep_call_order() {
    let log: Log = Arc::default();
    let model = Arc::new(ScriptedModel::new(
        "m",
        [sleep_calls(&[("slow", 50), ("fast", 1)]), text("done")],
    ));
    let (agent, checkpoints) = agent(model.clone(), vec![sleep_tool(&log)], vec![]);
    let outcome = agent
        .run(
            ThreadState::default(),
            vec![Message::human("go")],
            &context(),
        )
        .await;
    assert_eq!(outcome.stop, StopReason::Completed);
    assert_eq!(
        entries(&log),
        ["start:slow", "start:fast", "end:fast", "end:slow"]
    );
    assert_eq!(
        kinds(&outcome.state),
        [
            "human:go",
            "ai:",
            "tool:slept slow",
            "tool:slept fast",
            "ai:done"
        ]
    );
    assert_eq!(outcome.steps, 3);
    let saved = checkpoints.saved.lock().unwrap();
    assert_eq!(saved.iter().map(|c| c.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(
        saved[0].1.messages.len(),
        1,
        "the question is saved before the model runs"
    );
    assert_eq!(saved[3].1, outcome.state);
    let request = &model.requests()[0];
    assert_eq!(request.system.as_deref(), Some("be brief"));
    assert_eq!(request.tools[0].name, "sleep");
}

#[tokio::test]
async fn hooks_run_before_in_order_after_in_reverse_and_wrap_first_outermost() {
    let log: Log = Arc::default();
    let model = Arc::new(ScriptedModel::new(
        "m",
        [sleep_calls(&[("x", 0)]), text("ok")],
    ));
    let middleware: Vec<MiddlewareRef> = vec![
        Arc::new(Recorder {
            name: "A",
            log: log.clone(),
        }),
        Arc::new(Recorder {
            name: "B",
            log: log.clone(),
        }),
    ];
    let (agent, _) = agent(model, vec![sleep_tool(&log)], middleware);
    let outcome = agent
        .run(
            ThreadState::default(),
            vec![Message::human("go")],
            &context(),
        )
        .await;
    assert_eq!(outcome.stop, StopReason::Completed);
    let model_round = [
        "before_model:A",
        "before_model:B",
        "wrap_model_in:A",
        "wrap_model_in:B",
        "wrap_model_out:B",
        "wrap_model_out:A",
        "after_model:B",
        "after_model:A",
    ];
    let mut expected = vec!["before_agent:A", "before_agent:B"];
    expected.extend(model_round);
    expected.extend([
        "wrap_tool_in:A",
        "wrap_tool_in:B",
        "start:x",
        "end:x",
        "wrap_tool_out:B",
        "wrap_tool_out:A",
    ]);
    expected.extend(model_round);
    expected.extend(["after_agent:B", "after_agent:A"]);
    assert_eq!(entries(&log), expected);
}

#[tokio::test]
async fn retry_model_calls_the_model_again_with_the_hook_update() {
    let model = Arc::new(ScriptedModel::new("m", [text(""), text("real answer")]));
    let jump = Arc::new(Jump {
        flow: crate::agent_api::Flow::RetryModel,
        times: Mutex::new(1),
    });
    let (agent, _) = agent(model.clone(), vec![], vec![jump]);
    let outcome = agent
        .run(
            ThreadState::default(),
            vec![Message::human("q")],
            &context(),
        )
        .await;
    assert_eq!(outcome.stop, StopReason::Completed);
    assert_eq!(outcome.steps, 2);
    assert_eq!(model.requests().len(), 2);
    assert_eq!(
        model.requests()[1].messages.last().unwrap().content(),
        "try again"
    );
    assert_eq!(
        outcome.state.messages.last().unwrap().content(),
        "real answer"
    );
}

#[tokio::test]
async fn end_from_after_model_interrupts_and_checkpoints() {
    let model = Arc::new(ScriptedModel::new("m", [sleep_calls(&[("never", 0)])]));
    let jump = Arc::new(Jump {
        flow: crate::agent_api::Flow::End,
        times: Mutex::new(1),
    });
    let log: Log = Arc::default();
    let (agent, checkpoints) = agent(model, vec![sleep_tool(&log)], vec![jump]);
    let outcome = agent
        .run(
            ThreadState::default(),
            vec![Message::human("q")],
            &context(),
        )
        .await;
    assert_eq!(outcome.stop, StopReason::Interrupted);
    assert!(entries(&log).is_empty(), "tools must not run after End");
    assert_eq!(
        checkpoints.saved.lock().unwrap().last().unwrap().1,
        outcome.state
    );
}

#[tokio::test]
async fn recursion_limit_stops_with_a_clear_error() {
    let model = Arc::new(ScriptedModel::cycling(
        "m",
        vec![sleep_calls(&[("again", 0)])],
    ));
    let (mut agent, _) = agent(model, vec![sleep_tool(&Arc::default())], vec![]);
    agent.recursion_limit = 3;
    let (events, mut rx) = EventSink::channel(false);
    let mut ctx = context();
    ctx.events = events;
    let outcome = agent
        .run(ThreadState::default(), vec![Message::human("loop")], &ctx)
        .await;
    assert_eq!(outcome.stop, StopReason::RecursionLimit);
    assert_eq!(outcome.steps, 3);
    assert!(outcome.error.unwrap().message.contains("recursion_limit"));
    let mut last = None;
    let mut saw_error = false;
    while let Some(event) = rx.try_recv() {
        saw_error |=
            matches!(&event, RunEvent::Error { code, .. } if *code == ErrorCode::RecursionLimit);
        last = Some(event);
    }
    assert!(saw_error);
    assert!(
        matches!(last, Some(RunEvent::Finished { stop_reason }) if stop_reason == StopReason::RecursionLimit)
    );
}

#[tokio::test(start_paused = true)]
async fn cancellation_mid_stream_keeps_the_last_completed_step() {
    let slow = ScriptedTurn::Slow {
        chunks: vec!["a".into(), "b".into(), "c".into()],
        delay: Duration::from_secs(5),
    };
    let model = Arc::new(ScriptedModel::new("m", [sleep_calls(&[("x", 0)]), slow]));
    let log: Log = Arc::default();
    let recorder = Arc::new(Recorder {
        name: "R",
        log: log.clone(),
    });
    let (agent, checkpoints) = agent(model, vec![sleep_tool(&Arc::default())], vec![recorder]);
    let (events, mut rx) = EventSink::channel(true);
    let mut ctx = context();
    ctx.events = events;
    let cancel = ctx.cancel.clone();
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(event) = rx.recv().await {
            if matches!(event, RunEvent::TextDelta { .. }) {
                cancel.cancel();
            }
            seen.push(event);
        }
        seen
    });
    let outcome = agent
        .run(ThreadState::default(), vec![Message::human("q")], &ctx)
        .await;
    drop(ctx);
    assert_eq!(outcome.stop, StopReason::Cancelled);
    assert_eq!(outcome.steps, 2);
    assert!(
        !entries(&log).iter().any(|e| e.starts_with("after_agent")),
        "after_agent does not run after cancellation"
    );
    let last_saved = checkpoints.saved.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last_saved, (2, outcome.state.clone()));
    let seen = watcher.await.unwrap();
    assert!(matches!(seen.first(), Some(RunEvent::Started { .. })));
    assert!(
        matches!(seen.last(), Some(RunEvent::Finished { stop_reason }) if *stop_reason == StopReason::Cancelled)
    );
    assert_eq!(
        seen.iter()
            .filter(|e| matches!(e, RunEvent::Values { .. }))
            .count(),
        3,
        "the input checkpoint plus two completed steps"
    );
}

#[tokio::test]
async fn model_error_ends_the_run_and_keeps_earlier_steps() {
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            sleep_calls(&[("x", 0)]),
            ScriptedTurn::Fail(ModelErrorKind::Status(400)),
        ],
    ));
    let (agent, _) = agent(model, vec![sleep_tool(&Arc::default())], vec![]);
    let (events, mut rx) = EventSink::channel(false);
    let mut ctx = context();
    ctx.events = events;
    let outcome = agent
        .run(ThreadState::default(), vec![Message::human("q")], &ctx)
        .await;
    assert_eq!(outcome.stop, StopReason::Error);
    assert!(outcome.error.unwrap().message.contains("HTTP 400"));
    let kinds = kinds(&outcome.state);
    assert_eq!(kinds[..3], ["human:q", "ai:", "tool:slept x"]);
    assert!(kinds[3].starts_with("ai:[This turn failed before an answer was given (model_error)"));
    let record = outcome.state.last_ai().unwrap();
    assert!(record.meta.hide_from_ui && record.meta.extra["turn_failed"]["code"] == "model_error");
    let mut codes = Vec::new();
    while let Some(event) = rx.try_recv() {
        if let RunEvent::Error { code, .. } = event {
            codes.push(code);
        }
    }
    assert_eq!(codes, [ErrorCode::ModelError]);
}

#[tokio::test]
async fn broken_tool_arguments_become_an_error_message_and_the_run_continues() {
    let broken = AiMessage {
        tool_calls: vec![ToolCall {
            id: "c1".into(),
            name: "sleep".into(),
            args: Value::String("{not json".into()),
            args_error: Some("expected value at line 1".into()),
        }],
        ..Default::default()
    };
    let model = Arc::new(ScriptedModel::new(
        "m",
        [ScriptedTurn::Message(broken), text("recovered")],
    ));
    let log: Log = Arc::default();
    let (agent, _) = agent(model, vec![sleep_tool(&log)], vec![]);
    let outcome = agent
        .run(
            ThreadState::default(),
            vec![Message::human("q")],
            &context(),
        )
        .await;
    assert_eq!(outcome.stop, StopReason::Completed);
    assert!(entries(&log).is_empty());
    let tool = outcome.state.messages[2].as_tool().unwrap();
    assert_eq!(tool.status, ToolStatus::Error);
    assert_eq!(tool.tool_call_id, "c1");
    assert!(
        tool.content
            .starts_with("Error: Tool 'sleep' failed with InvalidArguments")
    );
    assert_eq!(
        outcome.state.messages.last().unwrap().content(),
        "recovered"
    );
}

#[tokio::test]
async fn a_panicking_tool_ends_the_run_with_an_error_not_a_crash() {
    let model = Arc::new(ScriptedModel::new(
        "m",
        [ScriptedTurn::ToolCalls {
            text: String::new(),
            calls: vec![("boom".into(), json!({}))],
        }],
    ));
    let (agent, checkpoints) = agent(model, vec![panic_tool()], vec![]);
    let outcome = agent
        .run(
            ThreadState::default(),
            vec![Message::human("q")],
            &context(),
        )
        .await;
    assert_eq!(outcome.stop, StopReason::Error);
    assert!(outcome.error.unwrap().message.contains("tool exploded"));
    assert_eq!(
        checkpoints.saved.lock().unwrap().len(),
        3,
        "the input and the model step stay checkpointed, then the failure is recorded"
    );
}

struct FailingHook;

#[async_trait]
impl Middleware for FailingHook {
    fn name(&self) -> &str {
        "FailingHook"
    }
    async fn before_model(
        &self,
        _: &ThreadState,
        _: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        Err(MiddlewareError::Failed {
            middleware: "FailingHook".into(),
            detail: "hook broke".into(),
        })
    }
}

#[tokio::test]
async fn a_hook_error_ends_the_run_with_an_error() {
    let model = Arc::new(ScriptedModel::new("m", [text("unused")]));
    let (agent, _) = agent(model.clone(), vec![], vec![Arc::new(FailingHook)]);
    let outcome = agent
        .run(
            ThreadState::default(),
            vec![Message::human("q")],
            &context(),
        )
        .await;
    assert_eq!(outcome.stop, StopReason::Error);
    assert!(outcome.error.unwrap().message.contains("hook broke"));
    assert!(model.requests().is_empty());
    let failed = &outcome.state.last_ai().unwrap().meta.extra["turn_failed"];
    assert_eq!(failed["code"], "middleware_error");
}
