//! The history a provider receives over several turns, through the real providers and the wire
//! fakes: tool-call ids the server reuses, failed and cancelled turns (checked against the rules
//! of strict chat templates), and answers cut at the output limit.

use std::sync::Arc;

use serde_json::{Value, json};

use antler::agent::{Agent, AgentOptions, RunOutcome, RuntimeFeatures, create_agent};
use antler::agent_api::{EventSink, RunContext, RunEvent, StopReason, ToolOutput, ToolRef};
use antler::config::{AppConfig, ModelConfig, Provider};
use antler::middleware::dangling_tool_call::INTERRUPTED_TOOL_RESULT;
use antler::middleware::length_finish_reason::LENGTH_NOTE;
use antler::model::{AnthropicModel, ChatModel, OpenAiModel};
use antler::tools::FnTool;
use antler_store::messages::Message;
use antler_store::state::ThreadState;
use antler_test_support::{FakeAnthropic, FakeOpenAi, Reply, assert_strict_alternation};

/// Answers with its `text` argument.
fn echo() -> ToolRef {
    Arc::new(FnTool::new("echo", "echoes", |args: Value| async move {
        Ok(ToolOutput::text(args["text"].as_str().unwrap_or_default()))
    }))
}

fn model_config(provider: Provider, base_url: &str) -> ModelConfig {
    ModelConfig {
        name: "fake".into(),
        provider,
        model: "fake-model".into(),
        base_url: base_url.into(),
        timeout: 10.0,
        ..Default::default()
    }
}

fn agent(model: Arc<dyn ChatModel>) -> Agent {
    create_agent(
        model,
        vec![echo()],
        AgentOptions {
            features: Some(RuntimeFeatures::none()),
            ..Default::default()
        },
    )
    .unwrap()
}

fn openai_agent(fake: &FakeOpenAi) -> Agent {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let config = model_config(Provider::Openai, &fake.base_url());
    agent(Arc::new(OpenAiModel::new(&config, client)))
}

fn ctx() -> RunContext {
    RunContext::new("thread-1", "user-1", Arc::new(AppConfig::default()))
}

async fn turn(agent: &Agent, state: ThreadState, text: &str) -> RunOutcome {
    agent.run(state, vec![Message::human(text)], &ctx()).await
}

fn messages(request: &Value) -> &Vec<Value> {
    request["messages"].as_array().expect("messages")
}

fn with_role<'a>(request: &'a Value, role: &str) -> Vec<&'a Value> {
    messages(request)
        .iter()
        .filter(|m| m["role"] == role)
        .collect()
}

#[tokio::test]
async fn a_tool_call_id_reused_in_later_turns_keeps_every_result() {
    let fake = FakeOpenAi::start().await;
    // The fake numbers calls per response: every tool call below comes back as `call_fake_0`.
    fake.push(Reply::tool_call("echo", json!({"text": "first result"})))
        .push(Reply::tool_call("echo", json!({"text": "second result"})))
        .push(Reply::text("one"))
        .push(Reply::tool_call("echo", json!({"text": "third result"})))
        .push(Reply::text("two"));
    let agent = openai_agent(&fake);
    let first = turn(&agent, ThreadState::default(), "first").await;
    assert_eq!(first.stop, StopReason::Completed, "{:?}", first.error);
    let second = turn(&agent, first.state, "second").await;
    assert_eq!(second.stop, StopReason::Completed, "{:?}", second.error);

    let requests = fake.requests();
    assert_eq!(requests.len(), 5);
    let last = &requests[4];
    assert_strict_alternation(last);
    let results: Vec<&str> = with_role(last, "tool")
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["first result", "second result", "third result"]);
    assert!(
        !last.to_string().contains(INTERRUPTED_TOOL_RESULT),
        "{last}"
    );
    let call_ids: Vec<&str> = with_role(last, "assistant")
        .iter()
        .filter_map(|m| m["tool_calls"][0]["id"].as_str())
        .collect();
    assert_eq!(call_ids[0], "call_fake_0", "a first use keeps its id");
    assert!(
        call_ids[1..]
            .iter()
            .all(|id| id.starts_with("call_fake_0_"))
    );
    let unique: std::collections::HashSet<&&str> = call_ids.iter().collect();
    assert_eq!(unique.len(), 3, "{call_ids:?}");
    // What the model was sent is what the thread holds.
    let stored: Vec<String> = second
        .state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .map(|t| t.tool_call_id.clone())
        .collect();
    assert_eq!(stored, call_ids);
}

#[tokio::test]
async fn anthropic_tool_use_ids_stay_unique_and_matched_across_turns() {
    let fake = FakeAnthropic::start().await;
    fake.push(Reply::tool_call("echo", json!({"text": "first result"})))
        .push(Reply::text("one"))
        .push(Reply::tool_call("echo", json!({"text": "second result"})))
        .push(Reply::text("two"));
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let config = model_config(Provider::Anthropic, &fake.base_url());
    let agent = agent(Arc::new(AnthropicModel::new(&config, client)));
    let first = turn(&agent, ThreadState::default(), "first").await;
    let second = turn(&agent, first.state, "second").await;
    assert_eq!(second.stop, StopReason::Completed, "{:?}", second.error);

    let requests = fake.requests();
    let last = messages(&requests[3]);
    let mut uses = Vec::new();
    let mut results = Vec::new();
    for (index, message) in last.iter().enumerate() {
        for block in message["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("tool_use") => uses.push((index, block["id"].as_str().unwrap())),
                Some("tool_result") => results.push((
                    index,
                    block["tool_use_id"].as_str().unwrap(),
                    block["content"].as_str().unwrap(),
                )),
                _ => {}
            }
        }
    }
    assert_eq!(uses.len(), 2);
    assert_ne!(
        uses[0].1, uses[1].1,
        "tool_use ids must be unique: {uses:?}"
    );
    assert_eq!(results.len(), 2);
    for ((use_at, id), (result_at, result_id, _)) in uses.iter().zip(&results) {
        assert_eq!((result_at, result_id), (&(use_at + 1), id));
    }
    let contents: Vec<&str> = results.iter().map(|r| r.2).collect();
    assert_eq!(contents, ["first result", "second result"]);
}

#[tokio::test]
async fn failed_and_cancelled_turns_leave_a_history_strict_templates_accept() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::status(400))
        .push(Reply::tool_call("echo", json!({"text": "looked it up"})))
        .push(Reply::status(400))
        .push(Reply::text("finally an answer"));
    let agent = openai_agent(&fake);
    // The model fails at once.
    let first = turn(&agent, ThreadState::default(), "first").await;
    assert_eq!(first.stop, StopReason::Error);
    // A tool step completes, then the model fails.
    let second = turn(&agent, first.state, "second").await;
    assert_eq!(second.stop, StopReason::Error);
    // Cancelled before the model was called: the question stays unanswered.
    let cancelled = ctx();
    cancelled.cancel.cancel();
    let third = agent
        .run(second.state, vec![Message::human("third")], &cancelled)
        .await;
    assert_eq!(third.stop, StopReason::Cancelled);
    let fourth = turn(&agent, third.state, "fourth").await;
    assert_eq!(fourth.stop, StopReason::Completed, "{:?}", fourth.error);

    let requests = fake.requests();
    assert_eq!(requests.len(), 4);
    for request in &requests {
        assert_strict_alternation(request);
    }
    let last = &requests[3];
    let asked: Vec<&str> = with_role(last, "user")
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(asked, ["first", "second", "third\n\nfourth"]);
    let failures = with_role(last, "assistant")
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("[This turn failed"))
        })
        .count();
    assert_eq!(failures, 2, "{last}");
    // Surfaces do not show the records: the run's error event already did.
    let hidden = fourth
        .state
        .messages
        .iter()
        .filter(|m| m.as_ai().is_some() && m.is_hidden())
        .count();
    assert_eq!(hidden, 2);
}

#[tokio::test]
async fn an_answer_cut_at_max_tokens_says_so_with_both_providers() {
    let openai = FakeOpenAi::start().await;
    openai.push(Reply::chunks(["Once upon", " a time"]).finish("length"));
    let anthropic = FakeAnthropic::start().await;
    anthropic.push(Reply::chunks(["Once upon", " a time"]).finish("length"));
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let models: [Arc<dyn ChatModel>; 2] = [
        Arc::new(OpenAiModel::new(
            &model_config(Provider::Openai, &openai.base_url()),
            client.clone(),
        )),
        Arc::new(AnthropicModel::new(
            &model_config(Provider::Anthropic, &anthropic.base_url()),
            client,
        )),
    ];
    for model in models {
        let agent = agent(model);
        let (events, mut rx) = EventSink::channel(false);
        let mut ctx = ctx();
        ctx.events = events;
        let outcome = agent
            .run(
                ThreadState::default(),
                vec![Message::human("a story")],
                &ctx,
            )
            .await;
        assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
        let expected = format!("Once upon a time\n\n{LENGTH_NOTE}");
        assert_eq!(outcome.state.last_ai().unwrap().content, expected);
        let mut streamed = String::new();
        while let Some(event) = rx.try_recv() {
            if let RunEvent::TextDelta { delta, .. } = event {
                streamed.push_str(&delta);
            }
        }
        assert_eq!(streamed, expected, "live surfaces show the note too");
    }
}
