//! Run registry, ownership and shutdown behaviour of the harness.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::agent_api::{RunEvent, RunOptions, StopReason};
use crate::config::ModelConfig;
use crate::model::{ScriptedModel, ScriptedTurn};
use antler_store::MemoryStore;
use antler_store::messages::Message;

struct Fixture {
    harness: Harness,
    _dir: tempfile::TempDir,
}

fn fixture(turns: Vec<ScriptedTurn>) -> Fixture {
    fixture_on(Arc::new(MemoryStore::new()), turns)
}

fn fixture_on(store: StoreRef, turns: Vec<ScriptedTurn>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let config = AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    };
    let models = ModelRegistry::new().with_model(
        "scripted",
        Arc::new(ScriptedModel::new("scripted", turns)),
        ModelConfig::default(),
    );
    let harness = Harness::with_parts(ConfigHandle::fixed(config), store, Some(models)).unwrap();
    Fixture { harness, _dir: dir }
}

fn request(user: &str, thread: &str, text: &str) -> RunRequest {
    RunRequest {
        user_id: user.into(),
        speaker: Speaker::Owner,
        thread_id: thread.into(),
        input: vec![Message::human(text)],
        options: RunOptions::default(),
        want_values: false,
    }
}

fn slow(answer: &str) -> ScriptedTurn {
    ScriptedTurn::Slow {
        chunks: vec![answer.to_string()],
        delay: Duration::from_secs(30),
    }
}

fn answer(text: &str) -> ScriptedTurn {
    ScriptedTurn::Text(vec![text.to_string()])
}

#[tokio::test]
async fn a_run_creates_the_thread_persists_and_frees_it() {
    let f = fixture(vec![answer("hello"), answer("again")]);
    let handle = f
        .harness
        .start_run(request("alice", "t1", "hi"))
        .await
        .unwrap();
    let outcome = handle.outcome.await.unwrap();
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let record = f.harness.get_thread("alice", "t1").unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Idle);
    assert_eq!(
        record.title.as_deref(),
        Some("hi"),
        "auto title reaches the record"
    );
    assert_eq!(f.harness.active_run("t1"), None);
    assert_eq!(f.harness.run_activity(), (0, 1));
    let second = f
        .harness
        .start_run(request("alice", "t1", "more"))
        .await
        .unwrap();
    let outcome = second.outcome.await.unwrap();
    let contents: Vec<&str> = outcome
        .state
        .messages
        .iter()
        .filter(|m| !m.is_hidden())
        .map(|m| m.content())
        .collect();
    assert_eq!(contents, ["hi", "hello", "more", "again"]);
    let stored = f.harness.thread_state("t1").await.unwrap().unwrap();
    assert_eq!(stored, outcome.state);
}

#[tokio::test]
async fn a_second_concurrent_run_on_a_thread_is_busy() {
    let f = fixture(vec![slow("slow"), answer("other thread")]);
    let first = f
        .harness
        .start_run(request("alice", "t1", "one"))
        .await
        .unwrap();
    let err = f
        .harness
        .start_run(request("alice", "t1", "two"))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&err, RunError::Busy { thread_id } if thread_id == "t1"),
        "{err}"
    );
    let other = f
        .harness
        .start_run(request("alice", "t2", "three"))
        .await
        .unwrap();
    assert_eq!(other.outcome.await.unwrap().stop, StopReason::Completed);
    assert!(f.harness.cancel_run("t1", &first.run_id));
    assert_eq!(first.outcome.await.unwrap().stop, StopReason::Cancelled);
    let record = f.harness.get_thread("alice", "t1").unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Interrupted);
    assert!(
        !f.harness.cancel_run("t1", &first.run_id),
        "the run is gone"
    );
}

#[tokio::test]
async fn another_users_thread_is_not_found() {
    let f = fixture(vec![answer("mine")]);
    f.harness
        .start_run(request("alice", "t1", "hi"))
        .await
        .unwrap()
        .outcome
        .await
        .unwrap();
    let err = f
        .harness
        .start_run(request("bob", "t1", "let me in"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, RunError::NotFound { .. }), "{err}");
    assert_eq!(f.harness.get_thread("bob", "t1").unwrap(), None);
    assert!(f.harness.list_threads("bob").unwrap().is_empty());
    assert!(matches!(
        f.harness.delete_thread("bob", "t1"),
        Err(RunError::NotFound { .. })
    ));
    f.harness.delete_thread("alice", "t1").unwrap();
    assert_eq!(f.harness.thread_state("t1").await.unwrap(), None);
}

#[tokio::test]
async fn shutdown_cancels_runs_past_the_grace_period_and_refuses_new_ones() {
    let f = fixture(vec![slow("never")]);
    let handle = f
        .harness
        .start_run(request("alice", "t1", "hi"))
        .await
        .unwrap();
    f.harness.shutdown(Duration::from_millis(20)).await.unwrap();
    assert_eq!(handle.outcome.await.unwrap().stop, StopReason::Cancelled);
    let record = f.harness.get_thread("alice", "t1").unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Interrupted);
    let err = f
        .harness
        .start_run(request("alice", "t1", "again"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, RunError::ShuttingDown));
}

#[tokio::test]
async fn threads_left_busy_are_interrupted_at_open() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let threads = ThreadStore::new(store.clone()).unwrap();
    threads
        .create("alice", Some("t1".into()), Map::new())
        .unwrap();
    threads.set_status("t1", ThreadStatus::Busy).unwrap();
    drop(threads);
    let f = fixture_on(store, vec![]);
    let record = f.harness.get_thread("alice", "t1").unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Interrupted);
}

#[tokio::test]
async fn the_model_registry_is_rebuilt_when_the_config_changes() {
    let dir = tempfile::tempdir().unwrap();
    let with_model = |name: &str| AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        models: vec![ModelConfig {
            name: name.into(),
            model: "m".into(),
            base_url: "http://127.0.0.1:9/v1".into(),
            ..ModelConfig::default()
        }],
        ..AppConfig::default()
    };
    let handle = ConfigHandle::fixed(with_model("first"));
    let harness = Harness::with_parts(handle.clone(), Arc::new(MemoryStore::new()), None).unwrap();
    let registry = harness.models(&handle.current()).unwrap();
    assert_eq!(registry.names(), ["first"]);
    assert!(
        Arc::ptr_eq(&registry, &harness.models(&handle.current()).unwrap()),
        "cached"
    );
    handle.replace(with_model("second"));
    assert_eq!(
        harness.models(&handle.current()).unwrap().names(),
        ["second"]
    );
}

#[tokio::test]
async fn an_injected_config_applies_to_that_run_only() {
    let tool_call = ScriptedTurn::ToolCalls {
        text: String::new(),
        calls: vec![("missing_tool".into(), serde_json::json!({}))],
    };
    let fx = fixture(vec![tool_call.clone(), tool_call, answer("done")]);
    let live = fx.harness.config().current();
    let strict = Arc::new(AppConfig {
        recursion_limit: 1,
        ..(*live).clone()
    });
    let handle = fx
        .harness
        .start_run_with_config(request("alice", "t-override", "go"), strict)
        .await
        .unwrap();
    let outcome = handle.outcome.await.unwrap();
    assert_eq!(
        outcome.stop,
        StopReason::RecursionLimit,
        "the override's limit applied"
    );

    let handle = fx
        .harness
        .start_run(request("alice", "t-live", "go"))
        .await
        .unwrap();
    let outcome = handle.outcome.await.unwrap();
    assert_eq!(
        outcome.stop,
        StopReason::Completed,
        "the live config is untouched"
    );
}

#[tokio::test]
async fn cancelling_a_run_cancels_its_sub_agents_before_it_reports_its_end() {
    let delegate = ScriptedTurn::ToolCalls {
        text: String::new(),
        calls: vec![(
            "task".into(),
            serde_json::json!({"description": "Slow work", "prompt": "work slowly", "subagent_type": "general-purpose"}),
        )],
    };
    // The lead delegates; the sub-agent's answer would take 30 s.
    let f = fixture(vec![delegate, slow("late")]);
    let mut run = request("alice", "t1", "go");
    run.options.subagent_enabled = true;
    let mut handle = f.harness.start_run(run).await.unwrap();
    let mut names = Vec::new();
    while let Some(event) = handle.events.recv().await {
        if let Some((name, _)) = event.custom_wire() {
            names.push(name.to_string());
            if name == "task_started" {
                break;
            }
        }
    }
    assert!(f.harness.cancel_run("t1", &handle.run_id));
    let outcome = tokio::time::timeout(Duration::from_secs(10), &mut handle.outcome)
        .await
        .expect("the run and its sub-agent ended soon after the cancel")
        .unwrap();
    assert_eq!(outcome.stop, StopReason::Cancelled);
    while let Some(event) = handle.events.recv().await {
        match (&event, event.custom_wire()) {
            (_, Some((name, _))) => names.push(name.to_string()),
            (RunEvent::Finished { .. }, None) => names.push("finished".into()),
            _ => {}
        }
    }
    let cancelled = names.iter().position(|n| n == "task_cancelled");
    let finished = names.iter().position(|n| n == "finished");
    assert!(
        cancelled.is_some() && cancelled < finished,
        "task_cancelled reaches the caller before the end: {names:?}"
    );
}

/// A title model that answers only once the test opens its gate, and shows whether a call is
/// still alive (its future not yet dropped).
struct GatedTitler {
    entered: tokio::sync::Notify,
    gate: tokio::sync::Notify,
    alive: Arc<()>,
}

#[async_trait::async_trait]
impl crate::model::ChatModel for GatedTitler {
    fn name(&self) -> &str {
        "titler"
    }

    async fn stream(
        &self,
        _request: &crate::model::ModelRequest,
    ) -> Result<crate::model::ModelStream, crate::model::ModelError> {
        let _alive = self.alive.clone();
        self.entered.notify_one();
        self.gate.notified().await;
        let antler_store::messages::Message::Ai(title) = Message::ai("Late title") else {
            unreachable!("Message::ai builds an AI message")
        };
        let done = crate::model::ModelEvent::Completed(title);
        Ok(Box::pin(futures::stream::iter([Ok(done)])))
    }
}

#[tokio::test]
async fn a_title_still_being_written_at_shutdown_is_dropped_not_written_after_the_drain() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    };
    config.title.model_name = Some("titler".into());
    let titler = Arc::new(GatedTitler {
        entered: tokio::sync::Notify::new(),
        gate: tokio::sync::Notify::new(),
        alive: Arc::new(()),
    });
    let models = ModelRegistry::new()
        .with_model(
            "scripted",
            Arc::new(ScriptedModel::new("scripted", [answer("hello")])),
            ModelConfig::default(),
        )
        .with_model("titler", titler.clone(), ModelConfig::default());
    let store: StoreRef = Arc::new(MemoryStore::new());
    let harness = Harness::with_parts(ConfigHandle::fixed(config), store, Some(models)).unwrap();
    let handle = harness
        .start_run(request("alice", "t1", "hi"))
        .await
        .unwrap();
    assert_eq!(handle.outcome.await.unwrap().stop, StopReason::Completed);
    tokio::time::timeout(Duration::from_secs(60), titler.entered.notified())
        .await
        .expect("the title model is asked once the answer is complete");

    harness.shutdown(Duration::from_secs(5)).await.unwrap();
    // The title call was dropped by the drain: no future is left that could rename the thread.
    assert_eq!(
        Arc::strong_count(&titler.alive),
        1,
        "the title task outlived the drain"
    );
    titler.gate.notify_waiters();
    let record = harness.get_thread("alice", "t1").unwrap().unwrap();
    assert_eq!(
        record.title.as_deref(),
        Some("hi"),
        "the first-message title stands"
    );
}
