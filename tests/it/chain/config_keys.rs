//! Config keys of the lead agent's chain, each shown to change what a run does: `loop_detection.
//! enabled`, `token_budget.enabled`, `title.model_name` / `title.max_words`, and
//! `guardrails.fail_closed` (with `guardrails.policy_url`), `summarization.enabled` / `model_name`.

use std::sync::Arc;

use serde_json::{Value, json};

use antler::agent::RunOutcome;
use antler::agent_api::{RunContext, RunOptions, StopReason};
use antler::config::{AppConfig, ModelConfig};
use antler::lead_agent::{LeadAgentDeps, make_lead_agent};
use antler::model::{ChatModel, ModelErrorKind, ModelRegistry, ScriptedModel, ScriptedTurn};
use antler_store::messages::{AiMessage, Message, ToolCall, Usage};
use antler_store::state::ThreadState;

struct App {
    _dir: tempfile::TempDir,
    config: Arc<AppConfig>,
    models: ModelRegistry,
}

/// A lead agent on `models` (the first is the default) with `edit` applied to the config.
fn app(models: &[(&str, Arc<ScriptedModel>)], edit: impl FnOnce(&mut AppConfig)) -> App {
    let dir = tempfile::tempdir().unwrap();
    let mut config = AppConfig {
        data_dir: Some(dir.path().join("data")),
        ..Default::default()
    };
    config.sandbox.skills_path = Some(dir.path().join("skills"));
    let mut registry = ModelRegistry::new();
    for (name, model) in models {
        config.models.push(ModelConfig {
            name: name.to_string(),
            ..Default::default()
        });
        let model: Arc<dyn ChatModel> = model.clone();
        registry = registry.with_model(name, model, ModelConfig::default());
    }
    edit(&mut config);
    App {
        _dir: dir,
        config: Arc::new(config),
        models: registry,
    }
}

async fn run(app: &App, text: &str) -> RunOutcome {
    let lead = make_lead_agent(
        &RunOptions::default(),
        &app.config,
        LeadAgentDeps::models_only(&app.models),
    )
    .unwrap();
    let mut ctx = RunContext::new("thread-1", "local", app.config.clone());
    ctx.options = lead.options;
    lead.agent
        .run(ThreadState::default(), vec![Message::human(text)], &ctx)
        .await
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

fn last_answer(outcome: &RunOutcome) -> String {
    outcome
        .state
        .last_ai()
        .map(|ai| ai.content.to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn loop_detection_enabled_false_turns_the_detector_off() {
    for enabled in [true, false] {
        let repeat = || call("lookup", json!({"q": "the same"}));
        let model = Arc::new(ScriptedModel::new(
            "main",
            [repeat(), repeat(), repeat(), text("done")],
        ));
        let app = app(&[("main", model)], |config| {
            config.loop_detection.enabled = enabled;
            config.loop_detection.warn_threshold = 2;
            config.loop_detection.hard_limit = 3;
        });
        let outcome = run(&app, "look it up").await;
        if enabled {
            assert_eq!(outcome.stop, StopReason::LoopCapped);
            assert!(last_answer(&outcome).contains("[FORCED STOP]"));
        } else {
            assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
            assert_eq!(last_answer(&outcome), "done");
        }
    }
}

#[tokio::test]
async fn token_budget_enabled_builds_the_budget_into_the_lead_agent() {
    for enabled in [true, false] {
        let expensive = AiMessage {
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "lookup".into(),
                args: json!({}),
                args_error: None,
            }],
            usage: Some(Usage {
                input_tokens: 1400,
                output_tokens: 100,
                total_tokens: 1500,
                ..Default::default()
            }),
            ..Default::default()
        };
        let model = Arc::new(ScriptedModel::new(
            "main",
            [ScriptedTurn::Message(expensive), text("done")],
        ));
        let app = app(&[("main", model)], |config| {
            config.token_budget.enabled = enabled;
            config.token_budget.max_tokens = 1000;
        });
        let outcome = run(&app, "spend").await;
        if enabled {
            assert_eq!(outcome.stop, StopReason::TokenCapped);
            assert!(last_answer(&outcome).contains("[TOKEN BUDGET EXCEEDED]"));
        } else {
            assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
            assert_eq!(last_answer(&outcome), "done");
        }
    }
}

#[tokio::test]
async fn title_model_name_asks_that_model_for_max_words() {
    let question = "Please help me plan a week-long trip to Rome in the spring";
    let main = || Arc::new(ScriptedModel::text("main", "Here is your plan."));

    let titler = Arc::new(
        ScriptedModel::text("titler", "Spring Trip To Rome Italy").with_background_script(),
    );
    let with_model = app(&[("main", main()), ("titler", titler.clone())], |config| {
        config.title.model_name = Some("titler".into());
        config.title.max_words = 3;
    });
    let outcome = run(&with_model, question).await;
    assert_eq!(outcome.state.title.as_deref(), Some("Spring Trip To"));
    let prompt = titler.requests()[0].messages[0].content().to_string();
    assert!(prompt.contains("(max 3 words)"), "{prompt}");
    assert!(prompt.contains("Assistant: Here is your plan."), "{prompt}");

    let fallback = "Please help me plan a week-long trip to Rome in th...";
    let failing = Arc::new(
        ScriptedModel::new("titler", [ScriptedTurn::Fail(ModelErrorKind::Status(503))])
            .with_background_script(),
    );
    let broken = app(&[("main", main()), ("titler", failing.clone())], |config| {
        config.title.model_name = Some("titler".into());
    });
    let outcome = run(&broken, question).await;
    assert_eq!(outcome.stop, StopReason::Completed);
    assert_eq!(outcome.state.title.as_deref(), Some(fallback));
    assert_eq!(failing.requests().len(), 1);

    let unused = Arc::new(ScriptedModel::new("titler", []).with_background_script());
    let without = app(&[("main", main()), ("titler", unused.clone())], |_| {});
    let outcome = run(&without, question).await;
    assert_eq!(outcome.state.title.as_deref(), Some(fallback));
    assert!(unused.requests().is_empty(), "no title.model_name, no call");
}

#[tokio::test]
async fn guardrails_fail_closed_decides_when_the_policy_service_is_down() {
    // Loopback port 1 is always refused (a freed port could be taken by another test's server).
    let policy_url = "http://127.0.0.1:1/check".to_string();
    for fail_closed in [true, false] {
        let ask = call(
            "ask_clarification",
            json!({"question": "Which city?", "clarification_type": "missing_info"}),
        );
        let model = Arc::new(ScriptedModel::new(
            "main",
            [ask, text("went on without asking")],
        ));
        let app = app(&[("main", model.clone())], |config| {
            config.guardrails.enabled = true;
            config.guardrails.fail_closed = fail_closed;
            config.guardrails.policy_url = Some(policy_url.clone());
        });
        let outcome = run(&app, "book a trip").await;
        let result = outcome
            .state
            .messages
            .iter()
            .find_map(Message::as_tool)
            .expect("the call was answered");
        if fail_closed {
            assert!(
                result
                    .content
                    .contains("the guardrail could not check this call"),
                "{}",
                result.content
            );
            assert_eq!(outcome.stop, StopReason::Completed);
            assert_eq!(last_answer(&outcome), "went on without asking");
        } else {
            assert!(
                result.content.ends_with("Which city?"),
                "{}",
                result.content
            );
            assert_eq!(outcome.stop, StopReason::Interrupted);
        }
    }
}

#[tokio::test]
async fn summarization_enabled_summarizes_with_summarization_model_name() {
    let main = Arc::new(ScriptedModel::text("main", "done"));
    let summarizer = Arc::new(ScriptedModel::text("summarizer", "the gist"));
    let app = app(
        &[("main", main.clone()), ("summarizer", summarizer.clone())],
        |config| {
            config.summarization.enabled = true;
            config.summarization.model_name = Some("summarizer".into());
            config.summarization.trigger = vec![antler::config::summarization::ContextSize {
                measure: antler::config::summarization::ContextMeasure::Tokens,
                value: 50.0,
            }];
        },
    );
    let outcome = run(&app, &"a long question ".repeat(40)).await;
    // One message only: nothing older than the kept end, so nothing to summarize.
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert!(summarizer.requests().is_empty());

    let lead = make_lead_agent(
        &RunOptions::default(),
        &app.config,
        LeadAgentDeps::models_only(&app.models),
    )
    .unwrap();
    let mut history = ThreadState::default();
    for turn in 0..30 {
        history
            .messages
            .push(Message::human(format!("question {turn}")));
        history.messages.push(Message::ai(format!("answer {turn}")));
    }
    main.push(text("after the summary"));
    let ctx = RunContext::new("thread-1", "local", app.config.clone());
    let outcome = lead
        .agent
        .run(history, vec![Message::human("next")], &ctx)
        .await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.state.summary_text.as_deref(), Some("the gist"));
    assert_eq!(summarizer.requests().len(), 1);
    // The default keep: the last 20 messages, after the summary.
    assert_eq!(outcome.state.messages.len(), 1 + 20 + 1);
}
