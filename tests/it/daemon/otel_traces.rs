//! OpenTelemetry traces through the daemon: a run with a tool call and a sub-agent reaches a
//! fake OTLP/HTTP collector as one trace of GenAI spans without any message text; with
//! `telemetry.include_content` the text is there; a collector that is down costs the run
//! nothing and is logged once.

use std::time::Duration;

use antler_test_support::{CollectedSpan, FakeCollector, FakeOpenAi, Reply, free_port};
use serde_json::json;

use super::{Daemon, Setup, TOKEN_A};

const PROMPT: &str = "Which PELICAN files exist?";
const SUB_PROMPT: &str = "Count the OSTRICH files and report.";
const SUB_ANSWER: &str = "There are 3 FLAMINGO files.";
const ANSWER: &str = "The GIRAFFE report is ready.";
const DEADLINE: Duration = Duration::from_secs(30);

fn telemetry_yaml(endpoint: &str, include_content: bool) -> String {
    format!(
        "telemetry:\n  include_content: {include_content}\n  otlp:\n    endpoint: {endpoint}\n    \
         headers:\n      Authorization: $OTEL_TEST_AUTH\n"
    )
}

/// The lead lists a folder and delegates at once, then answers.
fn script(fake: &FakeOpenAi) {
    fake.push(
        Reply::tool_calls(vec![
            ("ls".into(), json!({"path": "/mnt/user-data"})),
            (
                "task".into(),
                json!({"description": "Count", "prompt": SUB_PROMPT, "subagent_type": "general-purpose"}),
            ),
        ])
        .usage(30, 5),
    )
    .push(Reply::text(SUB_ANSWER).usage(12, 4))
    .push(Reply::text(ANSWER).usage(40, 7));
}

fn start(setup: &Setup, log: &std::path::Path) -> Daemon {
    // Exports every 100 ms instead of 5 s, so the test's wait is short.
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_TEST_AUTH", "Basic b3RlbDpzZWNyZXQ="),
    ];
    Daemon::spawn(&setup.config_path, &env, Some(log))
}

/// `/runs/wait` with sub-agents on; the answer's text, within the deadline.
async fn answered(daemon: &Daemon, thread: &str, text: &str) -> String {
    let request = daemon
        .post(&format!("/api/threads/{thread}/runs/wait"), TOKEN_A)
        .json(&json!({
            "input": {"messages": [{"role": "user", "content": text}]},
            "context": {"subagent_enabled": true},
        }))
        .send();
    let response = tokio::time::timeout(DEADLINE, request)
        .await
        .expect("the run answered within the deadline")
        .expect("wait request");
    assert_eq!(response.status(), 200);
    response.text().await.expect("answer body")
}

fn named<'a>(spans: &'a [CollectedSpan], name: &str) -> &'a CollectedSpan {
    spans
        .iter()
        .find(|span| span.name == name)
        .unwrap_or_else(|| {
            let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
            panic!("no span {name:?} in {names:?}")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reaches_the_collector_as_one_trace_of_genai_spans_without_content() {
    let collector = FakeCollector::start().await;
    let fake = FakeOpenAi::start().await;
    script(&fake);
    let setup = Setup::new(
        &fake.base_url(),
        &telemetry_yaml(&collector.endpoint(), false),
    );
    let log = setup.dir.path().join("daemon.log");
    let daemon = start(&setup, &log);
    let thread = daemon.create_thread(TOKEN_A).await;
    let body = answered(&daemon, &thread, PROMPT).await;
    assert!(body.contains(ANSWER), "{body}");

    // The API request's span ends last: the whole trace has been exported by then.
    let route = "POST /api/threads/{thread_id}/runs/wait";
    let spans = collector.wait_for_span(route, DEADLINE).await;
    let request = named(&spans, route);
    let run = named(&spans, "invoke_agent lead");
    let chats: Vec<&CollectedSpan> = spans
        .iter()
        .filter(|span| span.name == "chat fake-model")
        .collect();
    let ls = named(&spans, "execute_tool ls");
    let task = named(&spans, "execute_tool task");
    let sub = named(&spans, "invoke_agent general-purpose");
    let lead_calls = chats.iter().filter(|c| c.parent_span_id == run.span_id);
    assert_eq!(lead_calls.count(), 2, "the lead's two model calls");

    // One trace: request → run → model calls and tools → sub-agent → its model call.
    for span in [run, ls, task, sub].iter().chain(chats.iter()) {
        assert_eq!(span.trace_id, request.trace_id, "{span:?}");
        assert_eq!(span.service_name, "antler");
    }
    assert!(request.parent_span_id.is_empty());
    assert_eq!(run.parent_span_id, request.span_id);
    assert_eq!(ls.parent_span_id, run.span_id);
    assert_eq!(task.parent_span_id, run.span_id);
    assert_eq!(sub.parent_span_id, task.span_id);
    let sub_chat = chats
        .iter()
        .find(|chat| chat.parent_span_id == sub.span_id)
        .expect("the sub-agent's model call is its child");
    assert_eq!(sub_chat.attribute("gen_ai.usage.input_tokens"), Some("12"));

    assert_eq!(run.attribute("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(run.attribute("gen_ai.agent.name"), Some("lead"));
    assert_eq!(run.attribute("antler.stop_reason"), Some("completed"));
    assert_eq!(run.attribute("antler.channel"), Some("api"));
    assert_eq!(run.attribute("antler.thread_id"), Some(thread.as_str()));
    assert_eq!(sub.attribute("gen_ai.agent.name"), Some("general-purpose"));
    assert_eq!(sub.attribute("antler.stop_reason"), Some("completed"));

    let first = chats
        .iter()
        .find(|chat| chat.attribute("gen_ai.usage.input_tokens") == Some("30"))
        .expect("the lead's first model call");
    assert_eq!(first.parent_span_id, run.span_id);
    assert_eq!(first.attribute("gen_ai.operation.name"), Some("chat"));
    assert_eq!(first.attribute("gen_ai.request.model"), Some("fake-model"));
    assert_eq!(first.attribute("gen_ai.provider.name"), Some("openai"));
    assert!(
        first.attribute("gen_ai.response.model").is_some(),
        "{first:?}"
    );
    assert_eq!(first.attribute("gen_ai.usage.output_tokens"), Some("5"));
    assert_eq!(
        first.attribute("gen_ai.response.finish_reasons"),
        Some("[tool_calls]")
    );

    assert_eq!(ls.attribute("gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(ls.attribute("gen_ai.tool.name"), Some("ls"));
    assert!(
        ls.attribute("gen_ai.tool.call.id")
            .is_some_and(|id| !id.is_empty()),
        "{ls:?}"
    );

    // No text, prompt, tool argument, user id or header anywhere in what was exported.
    let exports = collector.exports();
    for export in &exports {
        let decoded = format!("{:?}", export.request);
        let raw = String::from_utf8_lossy(&export.body);
        for secret in [
            "PELICAN",
            "OSTRICH",
            "FLAMINGO",
            "GIRAFFE",
            "alice",
            "user-data",
            "b3RlbDpzZWNyZXQ",
        ] {
            assert!(!decoded.contains(secret), "{secret} exported: {decoded}");
            assert!(!raw.contains(secret), "{secret} in the raw export");
        }
        assert_eq!(
            export.headers.get("authorization").map(String::as_str),
            Some("Basic b3RlbDpzZWNyZXQ="),
            "the configured header is sent"
        );
    }
    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(!logs.contains("b3RlbDpzZWNyZXQ"), "{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn include_content_puts_the_messages_into_the_spans() {
    let collector = FakeCollector::start().await;
    let fake = FakeOpenAi::start().await;
    script(&fake);
    let setup = Setup::new(
        &fake.base_url(),
        &telemetry_yaml(&collector.endpoint(), true),
    );
    let log = setup.dir.path().join("daemon.log");
    let daemon = start(&setup, &log);
    let thread = daemon.create_thread(TOKEN_A).await;
    answered(&daemon, &thread, PROMPT).await;

    let spans = collector
        .wait_for_span("POST /api/threads/{thread_id}/runs/wait", DEADLINE)
        .await;
    let inputs: String = spans
        .iter()
        .filter_map(|span| span.attribute("gen_ai.input.messages"))
        .collect();
    let outputs: String = spans
        .iter()
        .filter_map(|span| span.attribute("gen_ai.output.messages"))
        .collect();
    assert!(inputs.contains("PELICAN"), "{inputs}");
    assert!(
        inputs.contains("OSTRICH"),
        "the sub-agent's prompt: {inputs}"
    );
    assert!(outputs.contains("GIRAFFE"), "{outputs}");
    assert!(outputs.contains("FLAMINGO"), "{outputs}");
    let ls = named(&spans, "execute_tool ls");
    assert!(
        ls.attribute("gen_ai.tool.call.arguments")
            .is_some_and(|args| args.contains("user-data")),
        "{ls:?}"
    );
    let run = named(&spans, "invoke_agent lead");
    assert_eq!(run.attribute("user.id"), Some("alice"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_costs_the_run_nothing_and_is_logged_once() {
    let closed = format!("http://127.0.0.1:{}", free_port());
    let fake = FakeOpenAi::start().await;
    script(&fake);
    fake.push(Reply::text("Second answer.").usage(5, 2));
    let setup = Setup::new(&fake.base_url(), &telemetry_yaml(&closed, false));
    let log = setup.dir.path().join("daemon.log");
    let mut daemon = start(&setup, &log);
    let thread = daemon.create_thread(TOKEN_A).await;

    let body = answered(&daemon, &thread, PROMPT).await;
    assert!(body.contains(ANSWER), "{body}");
    const WARNING: &str = "Cannot export traces to the OpenTelemetry collector";
    wait_for_log(&log, WARNING).await;
    // A second run's spans fail to export too, and the shutdown flush once more.
    let body = answered(&daemon, &thread, "again").await;
    assert!(body.contains("Second answer."), "{body}");

    daemon.signal("TERM");
    let code = daemon.wait_exit(Duration::from_secs(20));
    assert_eq!(
        code,
        Some(0),
        "the daemon exits promptly with the collector down"
    );
    let logs = std::fs::read_to_string(&log).unwrap();
    assert_eq!(logs.matches(WARNING).count(), 1, "{logs}");
    assert!(logs.contains("telemetry.otlp.endpoint"), "{logs}");
    assert!(!logs.contains("b3RlbDpzZWNyZXQ"), "{logs}");
}

/// Waits until the daemon's log shows `needle`; panics after the deadline.
async fn wait_for_log(log: &std::path::Path, needle: &str) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(needle) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{needle:?} never logged: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
