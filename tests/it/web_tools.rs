//! `view_image` through the loop, the guardrail middleware, and the web tools against fake
//! search engines and pages served on 127.0.0.1.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use base64::Engine;
use serde_json::{Value, json};

use antler::agent::{AgentOptions, Feature, RuntimeFeatures, create_agent};
use antler::agent_api::{RunContext, StopReason};
use antler::agent_api::{ToolContext, ToolOutput, ToolRef};
use antler::config::{AppConfig, GuardrailsConfig, ToolConfig};
use antler::middleware::guardrail::GuardrailError;
use antler::middleware::{Decision, GuardrailMiddleware, GuardrailProvider};
use antler::model::{ScriptedModel, ScriptedTurn};
use antler::paths::ThreadPaths;
use antler::sandbox::{ExecMode, HostSandboxProvider, ProviderSettings, SandboxProvider};
use antler::tools::FnTool;
use antler::tools::registry::ToolRegistry;
use antler_convert::{Converter, Program};
use antler_store::messages::{Message, ToolCall, ToolStatus};
use antler_store::state::ThreadState;

const USER: &str = "alice";
const THREAD: &str = "thread-1";
/// The smallest valid PNG header plus a few bytes; `view_image` only sniffs the magic number.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

fn call(calls: &[(&str, Value)]) -> ScriptedTurn {
    ScriptedTurn::ToolCalls {
        text: String::new(),
        calls: calls
            .iter()
            .map(|(name, args)| (name.to_string(), args.clone()))
            .collect(),
    }
}

fn text(answer: &str) -> ScriptedTurn {
    ScriptedTurn::Text(vec![answer.to_string()])
}

fn tool_entry(name: &str, kind: &str, params: Value) -> ToolConfig {
    ToolConfig {
        name: name.into(),
        group: Some("web".into()),
        use_kind: kind.into(),
        params: serde_json::from_value(params).unwrap(),
    }
}

/// Builds the configured tools of `entries` and returns the one named `name`.
fn configured(entries: Vec<ToolConfig>, name: &str) -> ToolRef {
    let config = AppConfig {
        tools: entries,
        ..Default::default()
    };
    let provider: Arc<dyn SandboxProvider> = Arc::new(HostSandboxProvider::new(
        ProviderSettings::from_config(&config, None),
        ExecMode::Local { allow_bash: false },
    ));
    // web_fetch converts pages in a child: the antler binary, as in the daemon.
    let converter = Converter::new(Program::antler(env!("CARGO_BIN_EXE_antler")), 2);
    let registry = ToolRegistry::with_converter(&config, provider, &converter).unwrap();
    registry
        .all()
        .iter()
        .find(|t| t.name() == name)
        .cloned()
        .unwrap()
}

async fn invoke(tool: &ToolRef, args: Value) -> String {
    let run = RunContext::new(THREAD, USER, Arc::new(AppConfig::default()));
    let state = ThreadState::default();
    let ctx = ToolContext {
        run: &run,
        state: &state,
        tool_call_id: "c1",
    };
    tool.call(args, &ctx).await.unwrap().content
}

fn tool_messages(state: &ThreadState) -> Vec<(String, String, ToolStatus)> {
    state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .map(|t| (t.name.clone(), t.content.to_string(), t.status))
        .collect()
}

#[tokio::test]
async fn view_image_shows_the_image_to_the_next_model_call_only() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    let paths = ThreadPaths::new(&data_dir, USER, THREAD).unwrap();
    paths.ensure_dirs().unwrap();
    std::fs::write(paths.uploads().join("cat.png"), PNG).unwrap();
    std::fs::write(paths.uploads().join("notes.txt"), "not an image").unwrap();
    let config = Arc::new(AppConfig {
        data_dir: Some(data_dir),
        ..Default::default()
    });
    let provider: Arc<dyn SandboxProvider> = Arc::new(HostSandboxProvider::new(
        ProviderSettings::from_config(&config, None),
        ExecMode::Local { allow_bash: false },
    ));
    let registry = ToolRegistry::from_config(&config, provider.clone()).unwrap();
    let model = Arc::new(ScriptedModel::new(
        "vision",
        [
            call(&[(
                "view_image",
                json!({"path": "/mnt/user-data/uploads/cat.png"}),
            )]),
            call(&[
                (
                    "view_image",
                    json!({"path": "/mnt/user-data/uploads/notes.txt"}),
                ),
                ("view_image", json!({"path": "/etc/passwd"})),
            ]),
            text("A cat."),
        ],
    ));
    let agent = create_agent(
        model.clone(),
        registry.tools_for_model(None, true),
        AgentOptions {
            features: Some(RuntimeFeatures {
                vision: Feature::BuiltIn,
                ..RuntimeFeatures::default()
            }),
            config: Some(config.clone()),
            sandbox_provider: Some(provider),
            ..Default::default()
        },
    )
    .unwrap();
    let run = RunContext::new(THREAD, USER, config);
    let outcome = agent
        .run(
            ThreadState::default(),
            vec![Message::human("what is this?")],
            &run,
        )
        .await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);

    let images_in = |request: &antler::model::ModelRequest| -> Vec<String> {
        request
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Human(h) => Some(h.images.iter().map(|i| i.base64.clone())),
                _ => None,
            })
            .flatten()
            .collect()
    };
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert!(images_in(&requests[0]).is_empty());
    assert_eq!(
        images_in(&requests[1]),
        [base64::engine::general_purpose::STANDARD.encode(PNG)]
    );
    assert!(
        images_in(&requests[2]).is_empty(),
        "the image was shown again"
    );

    let tools = tool_messages(&outcome.state);
    assert!(
        tools[0]
            .1
            .starts_with("Successfully read image /mnt/user-data/uploads/cat.png (image/png"),
        "{}",
        tools[0].1
    );
    assert!(
        tools[1].1.contains("is not a PNG, JPEG, GIF or WebP image"),
        "{}",
        tools[1].1
    );
    assert!(tools[2].1.contains("outside the sandbox"), "{}", tools[2].1);
    assert!(outcome.state.viewed_images.is_empty());
    assert!(
        outcome
            .state
            .messages
            .iter()
            .all(|m| !matches!(m, Message::Human(h) if !h.images.is_empty())),
        "image bytes were persisted in the thread"
    );
    assert!(
        !registry
            .tools_for_model(None, false)
            .iter()
            .any(|t| t.name() == "view_image")
    );
}

struct Unreachable;

#[async_trait]
impl GuardrailProvider for Unreachable {
    fn name(&self) -> &str {
        "policy-service"
    }
    async fn check(
        &self,
        _call: &ToolCall,
        _ctx: &ToolContext<'_>,
    ) -> Result<Decision, GuardrailError> {
        Err(GuardrailError::Failed {
            provider: "policy-service".into(),
            detail: "connection refused".into(),
        })
    }
}

async fn run_with_guardrail(guardrail: Feature, config: AppConfig) -> antler::agent::RunOutcome {
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [call(&[("echo", json!({}))]), text("Answered without echo.")],
    ));
    let config = Arc::new(config);
    let agent = create_agent(
        model,
        vec![
            Arc::new(FnTool::new("echo", "echoes", |_args: Value| async {
                Ok(ToolOutput::text("echoed"))
            })) as ToolRef,
        ],
        AgentOptions {
            features: Some(RuntimeFeatures {
                guardrail,
                ..RuntimeFeatures::none()
            }),
            config: Some(config.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let run = RunContext::new(THREAD, USER, config);
    agent
        .run(
            ThreadState::default(),
            vec![Message::human("echo it")],
            &run,
        )
        .await
}

#[tokio::test]
async fn built_in_guardrail_denies_a_configured_tool_and_the_run_goes_on() {
    let config = AppConfig {
        guardrails: GuardrailsConfig {
            enabled: true,
            denied_tools: vec!["echo".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    let outcome = run_with_guardrail(Feature::BuiltIn, config).await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert_eq!(
        tool_messages(&outcome.state),
        [(
            "echo".to_string(),
            "Error: tool 'echo' is not allowed here: it is on the guardrails denylist. Choose another tool or answer without it.".to_string(),
            ToolStatus::Error
        )]
    );
    assert_eq!(
        outcome.state.messages.last().unwrap().content(),
        "Answered without echo."
    );

    let allowed = run_with_guardrail(Feature::BuiltIn, AppConfig::default()).await;
    assert_eq!(tool_messages(&allowed.state)[0].1, "echoed");
}

#[tokio::test]
async fn a_failing_guardrail_provider_denies_when_fail_closed() {
    let closed = Feature::Custom(Arc::new(GuardrailMiddleware::new(
        Arc::new(Unreachable),
        true,
    )));
    let outcome = run_with_guardrail(closed, AppConfig::default()).await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let tools = tool_messages(&outcome.state);
    assert_eq!(tools[0].2, ToolStatus::Error);
    assert!(
        tools[0]
            .1
            .contains("the guardrail could not check this call"),
        "{}",
        tools[0].1
    );

    let open = Feature::Custom(Arc::new(GuardrailMiddleware::new(
        Arc::new(Unreachable),
        false,
    )));
    let outcome = run_with_guardrail(open, AppConfig::default()).await;
    assert_eq!(tool_messages(&outcome.state)[0].1, "echoed");
}

const DDG_PAGE: &str = r#"<!DOCTYPE html><html><body><div id="links">
  <div class="result results_links results_links_deep web-result">
    <h2 class="result__title"><a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Ftokio.rs%2F&amp;rut=1">Tokio - An asynchronous Rust runtime</a></h2>
    <a class="result__snippet" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Ftokio.rs%2F">Tokio is an <b>asynchronous</b> runtime.</a>
  </div>
  <div class="result results_links"><h2><a class="result__a" href="https://docs.rs/tokio">tokio - Rust</a></h2>
    <a class="result__snippet">API documentation.</a></div>
  <div class="result results_links"><h2><a class="result__a" href="https://crates.io/crates/tokio">tokio on crates.io</a></h2></div>
</div></body></html>"#;

#[tokio::test]
async fn web_search_reads_a_duckduckgo_result_page() {
    let queries = Arc::new(Mutex::new(Vec::new()));
    let router = Router::new()
        .route(
            "/html/",
            get(
                |State(queries): State<Arc<Mutex<Vec<String>>>>,
                 Query(params): Query<Vec<(String, String)>>| async move {
                    queries
                        .lock()
                        .unwrap()
                        .extend(params.into_iter().filter(|(k, _)| k == "q").map(|(_, v)| v));
                    Html(DDG_PAGE)
                },
            ),
        )
        .with_state(queries.clone());
    let addr = antler_test_support::serve(router).await;
    let tool = configured(
        vec![tool_entry(
            "web_search",
            "web_search",
            json!({"provider": "ddg", "max_results": 2, "base_url": format!("http://{addr}/html/")}),
        )],
        "web_search",
    );
    let text = invoke(&tool, json!({"query": "rust async runtime"})).await;
    assert_eq!(*queries.lock().unwrap(), ["rust async runtime"]);
    assert_eq!(
        text,
        "Search results for \"rust async runtime\" (DuckDuckGo):\n\
         \n1. Tokio - An asynchronous Rust runtime\n   https://tokio.rs/\n   Tokio is an asynchronous runtime.\n\
         \n2. tokio - Rust\n   https://docs.rs/tokio\n   API documentation.\n"
    );
    let three = invoke(&tool, json!({"query": "tokio", "max_results": 3})).await;
    assert!(three.contains("3. tokio on crates.io"), "{three}");
}

/// Authorization header and JSON body of each request the fake Tavily saw.
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

#[tokio::test]
async fn web_search_calls_tavily_with_the_key_and_reports_errors() {
    let seen: Seen = Arc::default();
    let router = Router::new()
        .route(
            "/search",
            post(
                |State(seen): State<Seen>,
                 headers: HeaderMap,
                 axum::Json(body): axum::Json<Value>| async move {
                    let auth = headers
                        .get(header::AUTHORIZATION)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    seen.lock().unwrap().push((auth, body.clone()));
                    if body["api_key"] != "tvly-test" {
                        return (StatusCode::UNAUTHORIZED, "bad key").into_response();
                    }
                    axum::Json(json!({"query": body["query"], "results": [
                        {"title": "Antler docs", "url": "https://antler.example/docs", "content": "How to   configure antler.", "score": 0.9}
                    ]}))
                    .into_response()
                },
            ),
        )
        .with_state(seen.clone());
    let addr = antler_test_support::serve(router).await;
    let search = |key: &str| {
        configured(
            vec![tool_entry(
                "web_search",
                "web_search",
                json!({"provider": "tavily", "api_key": key, "base_url": format!("http://{addr}/search")}),
            )],
            "web_search",
        )
    };
    let text = invoke(&search("tvly-test"), json!({"query": "antler config"})).await;
    assert_eq!(
        text,
        "Search results for \"antler config\" (Tavily):\n\n1. Antler docs\n   https://antler.example/docs\n   How to configure antler.\n"
    );
    let (auth, body) = seen.lock().unwrap()[0].clone();
    assert_eq!(auth.as_deref(), Some("Bearer tvly-test"));
    assert_eq!(
        body,
        json!({"query": "antler config", "max_results": 5, "api_key": "tvly-test"})
    );

    let failed = invoke(&search("wrong"), json!({"query": "x"})).await;
    assert!(
        failed.starts_with("Error: web search (Tavily) failed:") && failed.contains("HTTP 401"),
        "{failed}"
    );
}

const ARTICLE: &str = r#"<!DOCTYPE html><html><head><title>Brewing Tea</title>
<script>track()</script></head><body><nav><a href="/">Home</a></nav>
<article><h1>Brewing tea</h1><p>Use <strong>fresh</strong> water at <a href="/temps">the right temperature</a>.</p>
<h2>Steps</h2><ol><li>Boil</li><li>Steep</li></ol><p>LONGTAIL</p></article></body></html>"#;

fn page_server(hits: Arc<AtomicUsize>) -> Router {
    Router::new()
        .route(
            "/article",
            get(|State(hits): State<Arc<AtomicUsize>>| async move {
                hits.fetch_add(1, Ordering::SeqCst);
                Html(ARTICLE)
            }),
        )
        .route(
            "/old",
            get(|| async {
                (
                    StatusCode::MOVED_PERMANENTLY,
                    [(header::LOCATION, "/article")],
                )
            }),
        )
        .route(
            "/image",
            get(|| async { ([(header::CONTENT_TYPE, "image/png")], PNG.to_vec()) }),
        )
        .with_state(hits)
}

#[tokio::test]
async fn web_fetch_turns_a_page_into_capped_markdown() {
    let hits = Arc::new(AtomicUsize::new(0));
    let addr = antler_test_support::serve(page_server(hits.clone())).await;
    let fetch = |max_chars: usize| {
        configured(
            vec![tool_entry(
                "web_fetch",
                "web_fetch",
                json!({"allow_private_networks": true, "max_chars": max_chars}),
            )],
            "web_fetch",
        )
    };
    let page = invoke(&fetch(10_000), json!({"url": format!("http://{addr}/old")})).await;
    assert_eq!(
        page,
        format!(
            "# Brewing Tea\n\nSource: http://{addr}/article\n\n# Brewing tea\n\n\
             Use **fresh** water at [the right temperature](/temps).\n\n## Steps\n\n\
             1.  Boil\n2.  Steep\n\nLONGTAIL"
        )
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    let capped = invoke(
        &fetch(160),
        json!({"url": format!("http://{addr}/article")}),
    )
    .await;
    assert!(capped.chars().count() <= 160, "{capped}");
    assert!(capped.starts_with("# Brewing Tea"), "{capped}");
    assert!(!capped.contains("LONGTAIL"), "{capped}");
    assert!(capped.contains("[truncated: showing first"), "{capped}");

    let binary = invoke(&fetch(1000), json!({"url": format!("http://{addr}/image")})).await;
    assert!(
        binary.contains("not a text page (content type image/png)"),
        "{binary}"
    );
}

#[tokio::test]
async fn web_fetch_refuses_private_addresses_unless_allowed() {
    let hits = Arc::new(AtomicUsize::new(0));
    let addr = antler_test_support::serve(page_server(hits.clone())).await;
    let tool = configured(
        vec![tool_entry("web_fetch", "web_fetch", json!({}))],
        "web_fetch",
    );
    for url in [
        format!("http://{addr}/article"),
        format!("http://localhost:{}/article", addr.port()),
        "http://10.1.2.3/".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[::1]/".to_string(),
    ] {
        let text = invoke(&tool, json!({"url": url})).await;
        assert!(
            text.starts_with("Error: ") && text.contains("private, loopback or link-local address"),
            "{url}: {text}"
        );
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0, "a refused URL was fetched");
    let bad = invoke(&tool, json!({"url": "file:///etc/passwd"})).await;
    assert!(bad.contains("not a valid http(s) URL"), "{bad}");
}
