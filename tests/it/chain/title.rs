//! Title generation on a persisted thread: the answer never waits for the title model, whose
//! title renames the thread's record once per thread; a failing or slow one leaves the
//! first-message title.
//!
//! On paused time: the clock moves only when nothing else can run, so moving it past
//! [`TITLE_TIMEOUT`] means every title call a turn started has ended, and a turn's duration is
//! its own waiting, not a loaded machine's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Map;

use antler::agent_api::{RunContext, RunOptions, StopReason};
use antler::config::{AppConfig, ModelConfig};
use antler::lead_agent::{LeadAgentDeps, make_lead_agent};
use antler::middleware::title::TITLE_TIMEOUT;
use antler::model::{ChatModel, ModelErrorKind, ModelRegistry, ScriptedModel, ScriptedTurn};
use antler_store::messages::Message;
use antler_store::{Checkpointer, MemoryStore, ThreadStore};

const QUESTION: &str = "Please help me plan a week-long trip to Rome in the spring";
const FALLBACK: &str = "Please help me plan a week-long trip to Rome in th...";

struct App {
    _dir: tempfile::TempDir,
    config: Arc<AppConfig>,
    models: ModelRegistry,
    threads: ThreadStore,
}

fn app(main: Arc<ScriptedModel>, titler: Arc<ScriptedModel>) -> App {
    let dir = tempfile::tempdir().unwrap();
    let mut config = AppConfig {
        data_dir: Some(dir.path().join("data")),
        ..Default::default()
    };
    config.sandbox.skills_path = Some(dir.path().join("skills"));
    config.title.model_name = Some("titler".into());
    let mut models = ModelRegistry::new();
    for (name, model) in [("main", main), ("titler", titler)] {
        config.models.push(ModelConfig {
            name: name.into(),
            ..Default::default()
        });
        let model: Arc<dyn ChatModel> = model;
        models = models.with_model(name, model, ModelConfig::default());
    }
    let threads = ThreadStore::new(Arc::new(MemoryStore::new())).unwrap();
    threads.create("u", Some("t1".into()), Map::new()).unwrap();
    App {
        _dir: dir,
        config: Arc::new(config),
        models,
        threads,
    }
}

/// One turn on thread `t1`, from its persisted state; returns how long the run took.
async fn turn(app: &App, text: &str) -> Duration {
    let checkpointer: Arc<dyn Checkpointer> = Arc::new(app.threads.clone());
    let deps = LeadAgentDeps {
        checkpointer: Some(checkpointer.clone()),
        ..LeadAgentDeps::models_only(&app.models)
    };
    let lead = make_lead_agent(&RunOptions::default(), &app.config, deps).unwrap();
    let state = checkpointer
        .latest("t1")
        .await
        .unwrap()
        .map(|c| c.state)
        .unwrap_or_default();
    let mut ctx = RunContext::new("t1", "u", app.config.clone());
    ctx.options = lead.options;
    let started = tokio::time::Instant::now();
    let outcome = lead
        .agent
        .run(state, vec![Message::human(text)], &ctx)
        .await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    started.elapsed()
}

fn record_title(app: &App) -> Option<String> {
    app.threads.get("t1").unwrap().and_then(|r| r.title)
}

async fn wait_for_title(app: &App, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while record_title(app).as_deref() != Some(want) {
        assert!(
            Instant::now() < deadline,
            "title is {:?}, not {want:?}",
            record_title(app)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Moves the paused clock past [`TITLE_TIMEOUT`]: a title call bounded by it has ended, and
/// with it anything it would have written.
async fn past_every_title_call() {
    tokio::time::sleep(TITLE_TIMEOUT + Duration::from_secs(1)).await;
}

fn answers(texts: &[&str]) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(
        "main",
        texts
            .iter()
            .map(|t| ScriptedTurn::Text(vec![t.to_string()])),
    ))
}

#[tokio::test(start_paused = true)]
async fn the_title_model_names_the_thread_once_with_the_first_exchange() {
    let titler =
        Arc::new(ScriptedModel::text("titler", "Spring Trip To Rome").with_background_script());
    let app = app(answers(&["Here is your plan.", "Sure."]), titler.clone());
    turn(&app, QUESTION).await;
    wait_for_title(&app, "Spring Trip To Rome").await;
    let requests = titler.requests();
    assert_eq!(requests.len(), 1);
    let prompt = requests[0].messages[0].content().to_string();
    assert!(prompt.contains(&format!("User: {QUESTION}")), "{prompt}");
    assert!(prompt.contains("Assistant: Here is your plan."), "{prompt}");

    // The second turn neither asks again nor overwrites the generated title.
    turn(&app, "And in the summer?").await;
    past_every_title_call().await;
    assert_eq!(titler.requests().len(), 1, "one title call per thread");
    assert_eq!(record_title(&app).as_deref(), Some("Spring Trip To Rome"));
}

#[tokio::test(start_paused = true)]
async fn a_failing_title_model_leaves_the_first_message_title() {
    let titler = Arc::new(
        ScriptedModel::new("titler", [ScriptedTurn::Fail(ModelErrorKind::Status(503))])
            .with_background_script(),
    );
    let app = app(answers(&["Here is your plan."]), titler.clone());
    turn(&app, QUESTION).await;
    past_every_title_call().await;
    assert_eq!(titler.requests().len(), 1, "the title model was asked");
    assert_eq!(record_title(&app).as_deref(), Some(FALLBACK));
}

#[tokio::test(start_paused = true)]
async fn a_slow_title_model_does_not_delay_the_answer() {
    let titler = Arc::new(
        ScriptedModel::new(
            "titler",
            [ScriptedTurn::Slow {
                chunks: vec!["Too".into(), " late".into()],
                delay: Duration::from_secs(60),
            }],
        )
        .with_background_script(),
    );
    let app = app(answers(&["Here is your plan."]), titler);
    let took = turn(&app, QUESTION).await;
    assert!(took < TITLE_TIMEOUT, "the run waited {took:?}");
    assert_eq!(record_title(&app).as_deref(), Some(FALLBACK));
}
