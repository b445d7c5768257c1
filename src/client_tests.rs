//! The embedded client over a harness with a scripted model.

use std::sync::Arc;

use futures::StreamExt;

use super::*;
use crate::agent_api::{RunEvent, RunOptions, StopReason};
use crate::config::{ConfigHandle, ModelConfig};
use crate::model::{ModelRegistry, ScriptedModel, ScriptedTurn};
use antler_store::MemoryStore;

struct Fixture {
    harness: Harness,
    _dir: tempfile::TempDir,
}

fn fixture(turns: Vec<ScriptedTurn>) -> Fixture {
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
    let store = Arc::new(MemoryStore::new());
    let harness = Harness::with_parts(ConfigHandle::fixed(config), store, Some(models)).unwrap();
    Fixture { harness, _dir: dir }
}

#[tokio::test]
async fn the_client_streams_events_and_reads_state() {
    let f = fixture(vec![ScriptedTurn::Text(vec!["Hel".into(), "lo".into()])]);
    let client = Client::from_harness(f.harness.clone());
    let thread_id = client.new_thread().unwrap();
    let events: Vec<RunEvent> = client
        .stream(&thread_id, "hi", RunOptions::default())
        .await
        .unwrap()
        .collect()
        .await;
    assert!(matches!(events.first(), Some(RunEvent::Started { .. })));
    assert!(
        matches!(events.last(), Some(RunEvent::Finished { stop_reason }) if *stop_reason == StopReason::Completed)
    );
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello");
    let state = client.state(&thread_id).await.unwrap().unwrap();
    assert_eq!(state.messages.last().unwrap().content(), "Hello");
    assert_eq!(client.threads().unwrap().len(), 1);
    assert_eq!(
        Client::from_harness(f.harness.clone())
            .state("nope")
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn a_client_without_models_reports_how_to_configure_one() {
    let dir = tempfile::tempdir().unwrap();
    let client = Client::new(AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    })
    .unwrap();
    let Err(err) = client.stream("t1", "hi", RunOptions::default()).await else {
        panic!("a run without models must not start");
    };
    assert!(err.to_string().contains("models:"), "{err}");
    assert_eq!(
        client.harness().active_run("t1"),
        None,
        "the failed start frees the thread"
    );
}
