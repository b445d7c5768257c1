//! Integration tests: providers against the wire-level fakes, through the real reqwest client.

use std::sync::Arc;
use std::time::Duration;

use antler::config::{AppConfig, LlmCallConfig, ModelConfig, Provider, Secret};
use antler::model::{
    AnthropicModel, ChatModel, ModelError, ModelEvent, ModelRegistry, ModelRequest, OpenAiModel,
    ToolChoice, ToolSpec,
};
use antler_store::messages::{AiMessage, FinishReason, Message, ToolCall, ToolMessage};
use antler_test_support::{FAKE_SIGNATURE, FakeAnthropic, FakeOpenAi, Reply};
use futures::StreamExt;
use serde_json::json;

const KEY: &str = "sk-test-secret-4242";

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn openai_config(name: &str, base_url: &str) -> ModelConfig {
    ModelConfig {
        name: name.into(),
        provider: Provider::Openai,
        model: "fake-gpt".into(),
        base_url: base_url.into(),
        api_key: Some(Secret::new(KEY)),
        timeout: 5.0,
        ..Default::default()
    }
}

fn anthropic_config(name: &str, base_url: &str) -> ModelConfig {
    ModelConfig {
        provider: Provider::Anthropic,
        model: "fake-claude".into(),
        supports_thinking: true,
        ..openai_config(name, base_url)
    }
}

fn app(models: Vec<ModelConfig>, base_delay_ms: u64) -> AppConfig {
    AppConfig {
        models,
        llm_call: LlmCallConfig {
            retry_max_attempts: 3,
            retry_base_delay_ms: base_delay_ms,
            retry_cap_delay_ms: base_delay_ms * 2,
        },
        ..Default::default()
    }
}

fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        system: Some("you are a test".into()),
        messages: vec![Message::human(text)].into(),
        ..Default::default()
    }
}

async fn run(model: &dyn ChatModel, request: ModelRequest) -> Vec<Result<ModelEvent, ModelError>> {
    match model.stream(&request).await {
        Ok(stream) => stream.collect().await,
        Err(error) => vec![Err(error)],
    }
}

fn completed(events: &[Result<ModelEvent, ModelError>]) -> AiMessage {
    match events.last() {
        Some(Ok(ModelEvent::Completed(message))) => message.clone(),
        other => panic!("expected a completed message, got {other:?} in {events:?}"),
    }
}

fn last_error(events: &[Result<ModelEvent, ModelError>]) -> &ModelError {
    match events.last() {
        Some(Err(error)) => error,
        other => panic!("expected an error, got {other:?} in {events:?}"),
    }
}

fn texts(events: &[Result<ModelEvent, ModelError>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Ok(ModelEvent::TextDelta(t)) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

fn args() -> serde_json::Value {
    json!({"path": "notes/a rather long file name — ünïcode.txt", "limit": 42, "flags": [true, null]})
}

#[tokio::test]
async fn openai_tool_call_split_over_many_chunks_is_reassembled() {
    let fake = FakeOpenAi::start().await;
    fake.push(
        Reply::tool_calls(vec![("read_file".into(), args()), ("ls".into(), json!({}))])
            .split_args(15)
            .usage(21, 7),
    );
    let model = OpenAiModel::new(&openai_config("gpt", &fake.base_url()), client());
    let message = completed(&run(&model, ask("read it")).await);
    assert_eq!(message.tool_calls.len(), 2);
    assert_eq!(message.tool_calls[0].name, "read_file");
    assert_eq!(message.tool_calls[0].args, args());
    assert_eq!(message.tool_calls[0].id, "call_fake_0");
    assert_eq!(message.tool_calls[1].args, json!({}));
    assert_eq!(message.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(message.usage.unwrap().total_tokens, 28);
    assert_eq!(fake.unscripted_calls(), 0);
}

#[tokio::test]
async fn anthropic_tool_call_split_over_many_chunks_is_reassembled() {
    let fake = FakeAnthropic::start().await;
    fake.push(
        Reply::tool_call("read_file", args())
            .with_text("let me look")
            .split_args(15),
    );
    let model = AnthropicModel::new(&anthropic_config("claude", &fake.base_url()), client());
    let events = run(&model, ask("read it")).await;
    assert_eq!(texts(&events), ["let me look"]);
    let message = completed(&events);
    assert_eq!(message.content, "let me look");
    assert_eq!(message.tool_calls[0].args, args());
    assert_eq!(message.tool_calls[0].id, "toolu_fake_0");
    assert_eq!(message.finish_reason, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn usage_and_finish_reason_are_reported_by_both_providers() {
    let openai = FakeOpenAi::start().await;
    openai.push(Reply::chunks(["he", "llo"]).usage(11, 4).finish("length"));
    let model = OpenAiModel::new(&openai_config("gpt", &openai.base_url()), client());
    let events = run(&model, ask("hi")).await;
    assert_eq!(texts(&events), ["he", "llo"]);
    let message = completed(&events);
    assert_eq!(message.content, "hello");
    assert_eq!(message.finish_reason, Some(FinishReason::Length));
    let usage = message.usage.unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.total_tokens),
        (11, 4, 15)
    );
    assert_eq!(message.model.as_deref(), Some("gpt"));

    let anthropic = FakeAnthropic::start().await;
    anthropic.push(Reply::chunks(["bon", "jour"]).usage(30, 9));
    let model = AnthropicModel::new(&anthropic_config("claude", &anthropic.base_url()), client());
    let message = completed(&run(&model, ask("hi")).await);
    assert_eq!(message.content, "bonjour");
    assert_eq!(message.finish_reason, Some(FinishReason::Stop));
    let usage = message.usage.unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.total_tokens),
        (30, 9, 39)
    );
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried_then_succeeds() {
    // The backoff would wait ten minutes; answering within a minute however loaded the
    // machine proves the server's hint (20 ms, 0 s) was used instead.
    let openai = FakeOpenAi::start().await;
    openai
        .push(Reply::status(429).retry_after_ms(20))
        .push(Reply::text("ok"));
    let anthropic = FakeAnthropic::start().await;
    anthropic
        .push(Reply::status(529).retry_after(0))
        .push(Reply::text("ok too"));
    let config = app(
        vec![
            openai_config("gpt", &openai.base_url()),
            anthropic_config("claude", &anthropic.base_url()),
        ],
        600_000,
    );
    let registry = ModelRegistry::from_config_with_client(&config, client()).unwrap();
    let (gpt, claude) = tokio::time::timeout(Duration::from_secs(60), async {
        let gpt = run(registry.get("gpt").unwrap().as_ref(), ask("hi")).await;
        let claude = run(registry.get("claude").unwrap().as_ref(), ask("hi")).await;
        (gpt, claude)
    })
    .await
    .expect("the retries waited the backoff, not the server's hint");
    assert_eq!(completed(&gpt).content, "ok");
    assert_eq!(completed(&claude).content, "ok too");
    assert_eq!(openai.requests().len(), 2);
    assert_eq!(anthropic.requests().len(), 2);
    assert_eq!(openai.unscripted_calls() + anthropic.unscripted_calls(), 0);
}

#[tokio::test]
async fn malformed_chunks_and_broken_streams_are_errors_not_panics() {
    let openai = FakeOpenAi::start().await;
    openai
        .push(Reply::malformed_chunk())
        .push(Reply::mid_stream_error())
        .push(Reply::truncated(["cut"]));
    let model = OpenAiModel::new(&openai_config("gpt", &openai.base_url()), client());
    let events = run(&model, ask("hi")).await;
    assert_eq!(texts(&events), ["partial"]);
    assert!(matches!(last_error(&events), ModelError::Malformed { .. }));
    let events = run(&model, ask("hi")).await;
    assert!(
        matches!(last_error(&events), ModelError::Provider { detail, .. } if detail.contains("crashed"))
    );
    let events = run(&model, ask("hi")).await;
    assert!(matches!(last_error(&events), ModelError::Stream { .. }));

    let anthropic = FakeAnthropic::start().await;
    anthropic
        .push(Reply::malformed_chunk())
        .push(Reply::mid_stream_error())
        .push(Reply::truncated(["cut"]));
    let model = AnthropicModel::new(&anthropic_config("claude", &anthropic.base_url()), client());
    assert!(matches!(
        last_error(&run(&model, ask("hi")).await),
        ModelError::Malformed { .. }
    ));
    let events = run(&model, ask("hi")).await;
    assert!(
        matches!(last_error(&events), ModelError::Provider { detail, .. } if detail.contains("overloaded_error"))
    );
    assert!(matches!(
        last_error(&run(&model, ask("hi")).await),
        ModelError::Stream { .. }
    ));
}

#[tokio::test]
async fn mid_stream_errors_are_not_retried() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::mid_stream_error());
    let registry = ModelRegistry::from_config_with_client(
        &app(vec![openai_config("gpt", &fake.base_url())], 1),
        client(),
    )
    .unwrap();
    let events = run(registry.get("gpt").unwrap().as_ref(), ask("hi")).await;
    assert!(matches!(last_error(&events), ModelError::Provider { .. }));
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn fallback_model_answers_after_the_primary_keeps_failing() {
    let primary = FakeOpenAi::start().await;
    for _ in 0..3 {
        primary.push(Reply::status(503));
    }
    let backup = FakeAnthropic::start().await;
    backup.push(Reply::text("from the backup"));
    let mut primary_config = openai_config("primary", &primary.base_url());
    primary_config.fallback = Some("backup".into());
    let config = app(
        vec![
            primary_config,
            anthropic_config("backup", &backup.base_url()),
        ],
        1,
    );
    let registry = ModelRegistry::from_config_with_client(&config, client()).unwrap();
    let (name, model) = registry.resolve(None).unwrap();
    assert_eq!(name, "primary");
    let message = completed(&run(model.as_ref(), ask("hi")).await);
    assert_eq!(message.content, "from the backup");
    assert_eq!(message.model.as_deref(), Some("backup"));
    assert_eq!(
        primary.requests().len(),
        config.llm_call.retry_max_attempts as usize
    );
    assert_eq!(primary.unscripted_calls(), 0);
    assert_eq!(backup.requests().len(), 1);
}

/// The error says what to set: the variable the config read the address from (the shipped
/// config's `ANTLER_MODEL_URL`), else the key.
#[tokio::test]
async fn connect_error_names_the_base_url_and_what_to_set() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let mut config = openai_config("local", &base_url);
    let model = OpenAiModel::new(&config, client());
    let error = model.stream(&ask("hi")).await.err().unwrap();
    assert!(matches!(error, ModelError::Connect { .. }), "{error:?}");
    assert!(error.is_retryable());
    let text = error.to_string();
    for needle in [
        base_url.as_str(),
        "'local'",
        "set models[].base_url of 'local' to the address of one that runs",
    ] {
        assert!(text.contains(needle), "{needle} missing from: {text}");
    }
    assert!(!text.contains(KEY));

    config.sources = antler::config::ModelSources {
        index: Some(0),
        base_url: Some("ANTLER_MODEL_URL".into()),
        ..Default::default()
    };
    let model = OpenAiModel::new(&config, client());
    let text = model.stream(&ask("hi")).await.err().unwrap().to_string();
    assert!(
        text.contains("set ANTLER_MODEL_URL to the address"),
        "{text}"
    );
}

#[tokio::test]
async fn slow_streams_hit_the_model_timeout() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::slow(["a", "b"], Duration::from_millis(400)));
    let mut config = openai_config("gpt", &fake.base_url());
    config.timeout = 0.1;
    let events = run(&OpenAiModel::new(&config, client()), ask("hi")).await;
    assert!(
        matches!(last_error(&events), ModelError::Timeout { .. }),
        "{events:?}"
    );
}

#[tokio::test]
async fn requests_carry_the_converted_history_and_tools() {
    let call = ToolCall {
        id: "call_7".into(),
        name: "read_file".into(),
        args: json!({"path": "a.txt"}),
        args_error: None,
    };
    let request = ModelRequest {
        system: Some("system prompt".into()),
        messages: vec![
            Message::human("read a.txt"),
            Message::Ai(AiMessage {
                tool_calls: vec![call.clone()],
                ..Default::default()
            }),
            Message::Tool(ToolMessage::error(&call, "no such file")),
        ]
        .into(),
        tools: vec![std::sync::Arc::new(ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}})
                .into(),
        })]
        .into(),
        tool_choice: Some(ToolChoice::Auto),
        temperature: Some(0.5),
        max_tokens: Some(300),
        ..Default::default()
    };

    let openai = FakeOpenAi::start().await;
    openai.push(Reply::text("ok"));
    let model = OpenAiModel::new(&openai_config("gpt", &openai.base_url()), client());
    completed(&run(&model, request.clone()).await);
    let body = &openai.requests()[0];
    assert_eq!(body["model"], "fake-gpt");
    assert_eq!(body["stream"], true);
    assert_eq!(
        (body["max_tokens"].clone(), body["temperature"].clone()),
        (json!(300), json!(0.5))
    );
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "system prompt"})
    );
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"a.txt"}"#
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "tool_call_id": "call_7", "content": "no such file"})
    );
    assert_eq!(body["tools"][0]["function"]["name"], "read_file");
    assert_eq!(body["tool_choice"], "auto");

    let anthropic = FakeAnthropic::start().await;
    anthropic.push(Reply::text("ok"));
    let model = AnthropicModel::new(&anthropic_config("claude", &anthropic.base_url()), client());
    completed(&run(&model, request).await);
    let body = &anthropic.requests()[0];
    assert_eq!(body["system"], "system prompt");
    assert_eq!(body["max_tokens"], 300);
    assert_eq!(
        body["messages"][1]["content"][0],
        json!({"type": "tool_use", "id": "call_7", "name": "read_file", "input": {"path": "a.txt"}})
    );
    assert_eq!(
        body["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "call_7", "content": "no such file", "is_error": true})
    );
    assert_eq!(
        body["tools"][0]["input_schema"]["properties"]["path"]["type"],
        "string"
    );
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
}

#[tokio::test]
async fn anthropic_thinking_is_streamed_echoed_and_refusals_are_reported() {
    let fake = FakeAnthropic::start().await;
    fake.push(Reply::text("42").thinking("let me think"))
        .push(Reply::refusal());
    let model = AnthropicModel::new(&anthropic_config("claude", &fake.base_url()), client());
    let mut request = ModelRequest {
        thinking_enabled: true,
        ..ask("meaning of life?")
    };
    let events = run(&model, request.clone()).await;
    assert!(matches!(&events[0], Ok(ModelEvent::ReasoningDelta(r)) if r == "let me think"));
    let answer = completed(&events);
    assert_eq!(answer.content, "42");
    assert_eq!(answer.reasoning.as_deref(), Some("let me think"));
    assert_eq!(answer.reasoning_signature.as_deref(), Some(FAKE_SIGNATURE));
    assert_eq!(fake.requests()[0]["thinking"]["type"], "enabled");

    request.messages.push(Message::Ai(answer));
    request.messages.push(Message::human("something forbidden"));
    let refusal = completed(&run(&model, request).await);
    assert_eq!(refusal.finish_reason, Some(FinishReason::Refusal));
    assert!(refusal.finish_reason.unwrap().is_safety());
    let echoed = &fake.requests()[1]["messages"][1]["content"][0];
    assert_eq!(
        echoed,
        &json!({"type": "thinking", "thinking": "let me think", "signature": FAKE_SIGNATURE})
    );
}

#[tokio::test]
async fn the_api_key_is_sent_as_a_header_but_never_appears_in_errors() {
    let openai = FakeOpenAi::start().await;
    openai
        .push(Reply::status(401).body(format!("Incorrect API key provided: {KEY}")))
        .push(Reply::status(400).body(format!(r#"{{"error": "bad key {KEY}"}}"#)));
    let model = OpenAiModel::new(&openai_config("gpt", &openai.base_url()), client());
    let unauthorized = model.stream(&ask("hi")).await.err().unwrap();
    assert!(matches!(
        unauthorized,
        ModelError::Unauthorized { status: 401, .. }
    ));
    let bad_request = model.stream(&ask("hi")).await.err().unwrap();
    assert!(matches!(
        bad_request,
        ModelError::Status { status: 400, .. }
    ));
    for error in [&unauthorized, &bad_request] {
        assert!(!error.to_string().contains(KEY), "{error}");
        assert!(!format!("{error:?}").contains(KEY), "{error:?}");
    }
    let recorded = openai.recorded();
    assert_eq!(
        recorded[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );

    let anthropic = FakeAnthropic::start().await;
    anthropic.push(Reply::status(403));
    let model = AnthropicModel::new(&anthropic_config("claude", &anthropic.base_url()), client());
    let error = model.stream(&ask("hi")).await.err().unwrap();
    assert!(matches!(
        error,
        ModelError::Unauthorized { status: 403, .. }
    ));
    assert!(!error.to_string().contains(KEY));
    let recorded = anthropic.recorded();
    assert_eq!(recorded[0].header("x-api-key"), Some(KEY));
    assert_eq!(recorded[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(recorded[0].header("authorization"), None);

    // A local server needs no key: then no authorization header is sent at all.
    let local = FakeOpenAi::start().await;
    local.push(Reply::text("hi"));
    let mut config = openai_config("local", &local.base_url());
    config.api_key = Some(Secret::new(""));
    completed(&run(&OpenAiModel::new(&config, client()), ask("hi")).await);
    assert_eq!(local.recorded()[0].header("authorization"), None);
}

#[tokio::test]
async fn registry_models_are_shared_and_resolve_unknown_names_to_the_default() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("one"));
    let registry = ModelRegistry::from_config_with_client(
        &app(vec![openai_config("gpt", &fake.base_url())], 1),
        client(),
    )
    .unwrap();
    let (name, model) = registry.resolve(Some("no-such-model")).unwrap();
    assert_eq!(name, "gpt");
    let model: Arc<dyn ChatModel> = model;
    assert_eq!(
        completed(&run(model.as_ref(), ask("hi")).await).content,
        "one"
    );
    assert_eq!(registry.config("gpt").unwrap().model, "fake-gpt");
}

#[tokio::test]
async fn an_unscripted_call_fails_the_test_unless_allowed() {
    for allowed in [false, true] {
        let fake = FakeOpenAi::start().await;
        if allowed {
            fake.allow_unscripted();
        }
        let model = OpenAiModel::new(&openai_config("gpt", &fake.base_url()), client());
        let events = run(&model, ask("nobody scripted this")).await;
        assert!(
            matches!(last_error(&events), ModelError::Status { status: 500, .. }),
            "{events:?}"
        );
        assert_eq!(fake.unscripted_calls(), 1);
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(fake)));
        match dropped {
            Ok(()) => assert!(allowed, "dropping the fake must fail the test"),
            Err(panic) => {
                let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
                assert!(!allowed, "allowed, yet: {message}");
                assert!(message.contains("1 unscripted request(s)"), "{message}");
                assert!(message.contains("nobody scripted this"), "{message}");
            }
        }
    }
}

/// The request body is not kept to resend (it would stay in memory for as long as the model
/// thinks), so a redirect is not followed: the error names the address to configure instead.
/// The body still goes out with its length, not chunked.
#[tokio::test]
async fn a_redirecting_endpoint_is_named_in_the_error_and_bodies_carry_their_length() {
    let openai = FakeOpenAi::start().await;
    openai.push(Reply::text("hi")).push(
        Reply::status(308).location("https://api.example.test/v1/chat/completions?key=s3cret"),
    );
    let model = OpenAiModel::new(&openai_config("gpt", &openai.base_url()), client());
    let answer = completed(&run(&model, ask("hi")).await);
    assert_eq!(answer.content, "hi");
    let recorded = openai.recorded();
    assert_eq!(recorded[0].header("transfer-encoding"), None);
    let length: usize = recorded[0]
        .header("content-length")
        .expect("a content-length header")
        .parse()
        .unwrap();
    assert!(length > 100, "the whole JSON body: {length}");
    assert_eq!(recorded[0].body["messages"][1]["content"], "hi");

    let message = redirect_error(&model).await;
    assert!(
        message.contains("redirects to https://api.example.test/v1/chat/completions"),
        "{message}"
    );
    assert!(message.contains("base_url"), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
    assert_eq!(openai.recorded().len(), 2, "the redirect was not followed");

    // The production client follows no redirect at all: a 302 would turn the POST into a
    // bodiless GET of the new address.
    openai.push(Reply::status(302).location(format!("{}/moved", openai.base_url())));
    let model = OpenAiModel::new(
        &openai_config("gpt", &openai.base_url()),
        ModelRegistry::http_client().unwrap(),
    );
    let message = redirect_error(&model).await;
    assert!(
        message.contains("/moved; set the model's base_url"),
        "{message}"
    );
    assert_eq!(openai.recorded().len(), 3, "the redirect was not followed");
}

/// The message of the config error a redirect answer turns into.
async fn redirect_error(model: &OpenAiModel) -> String {
    match model.stream(&ask("hi")).await.err().unwrap() {
        ModelError::Config(message) => message,
        error => panic!("a redirect is a config error, got {error:?}"),
    }
}
