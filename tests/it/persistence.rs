//! Integration tests: persistence of threads and checkpoints across restarts and crashes.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use antler::agent_api::{RunOptions, StopReason};
use antler::config::{AppConfig, ConfigHandle, ModelConfig};
use antler::harness::testing::{
    CRASH_EXPECTED_FILE, CRASH_HISTORY_TURNS, CRASH_READY_LINE, CRASH_THREAD_ID, CRASH_USER_ID,
};
use antler::harness::{Harness, RunRequest, Speaker};
use antler::model::{ModelRegistry, ScriptedModel, ScriptedTurn};
use antler_store::messages::{Message, ToolStatus};
use antler_store::state::ThreadState;
use antler_store::{SledStore, ThreadStatus};

fn config_for(dir: &std::path::Path) -> AppConfig {
    AppConfig {
        data_dir: Some(dir.to_path_buf()),
        ..AppConfig::default()
    }
}

#[tokio::test]
async fn a_thread_reads_back_intact_after_the_store_is_closed_and_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let models = ModelRegistry::new().with_model(
        "scripted",
        Arc::new(ScriptedModel::new(
            "scripted",
            [ScriptedTurn::Text(vec![
                "persisted ".into(),
                "answer".into(),
            ])],
        )),
        ModelConfig::default(),
    );
    let written = {
        let store = Arc::new(SledStore::open(dir.path().join("store")).unwrap());
        let harness = Harness::with_parts(
            ConfigHandle::fixed(config_for(dir.path())),
            store,
            Some(models),
        )
        .unwrap();
        let handle = harness
            .start_run(RunRequest {
                user_id: "alice".into(),
                speaker: Speaker::Owner,
                thread_id: "kept".into(),
                input: vec![Message::human("remember this")],
                options: RunOptions::default(),
                want_values: false,
            })
            .await
            .unwrap();
        let outcome = handle.outcome.await.unwrap();
        assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
        harness.shutdown(Duration::from_secs(1)).await.unwrap();
        outcome.state
    };
    let reopened = Harness::open(ConfigHandle::fixed(config_for(dir.path()))).unwrap();
    let record = reopened.get_thread("alice", "kept").unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Idle);
    assert_eq!(reopened.list_threads("alice").unwrap(), [record]);
    let state = reopened.thread_state("kept").await.unwrap().unwrap();
    assert_eq!(state, written);
    assert_eq!(state.messages.last().unwrap().content(), "persisted answer");
}

#[tokio::test]
async fn a_process_killed_mid_turn_of_a_long_thread_reopens_at_the_last_completed_step() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_antler"))
        .arg("__crash-child")
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let ready = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line == CRASH_READY_LINE)
    });
    let ready = tokio::time::timeout(Duration::from_secs(60), ready).await;
    // SIGKILL: no destructor, no flush, no chance to clean up.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        matches!(ready, Ok(Ok(true))),
        "the child never reported ready"
    );

    let harness = Harness::open(ConfigHandle::fixed(config_for(dir.path()))).unwrap();
    let record = harness
        .get_thread(CRASH_USER_ID, CRASH_THREAD_ID)
        .unwrap()
        .unwrap();
    assert_eq!(
        record.status,
        ThreadStatus::Interrupted,
        "a crashed run leaves the thread interrupted"
    );
    let state = harness
        .thread_state(CRASH_THREAD_ID)
        .await
        .unwrap()
        .unwrap();
    // Exactly the state after the last completed step, as the child saw it before the kill.
    let expected: ThreadState =
        serde_json::from_slice(&std::fs::read(dir.path().join(CRASH_EXPECTED_FILE)).unwrap())
            .unwrap();
    assert_eq!(state, expected);
    let history = 2 * CRASH_HISTORY_TURNS;
    assert_eq!(state.messages.len(), history + 3);
    let kinds: Vec<&str> = state.messages[history..]
        .iter()
        .map(|m| match m {
            Message::Human(_) => "human",
            Message::Ai(_) => "ai",
            Message::Tool(_) => "tool",
            Message::System(_) => "system",
        })
        .collect();
    assert_eq!(
        kinds,
        ["human", "ai", "tool"],
        "the completed steps of the killed turn, not the one in flight"
    );
    assert_eq!(
        state.messages[history + 1].as_ai().unwrap().tool_calls[0].name,
        "lookup"
    );
    assert_eq!(
        state.messages[history + 2].as_tool().unwrap().status,
        ToolStatus::Error
    );
}
