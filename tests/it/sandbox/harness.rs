//! The sandbox as the harness runs it: `sandbox.eager`, and a reload of `sandbox.*` between two
//! runs (the prompt names only mounts the run's sandbox really has).

use std::path::Path;
use std::sync::Arc;

use antler::agent_api::{RunOptions, StopReason};
use antler::config::{
    AppConfig, ConfigHandle, ModelConfig, SandboxMountConfig, SandboxProviderKind,
};
use antler::harness::{Harness, RunRequest, Speaker};
use antler::model::{ModelRegistry, ScriptedModel, ScriptedTurn};
use antler::paths::ThreadPaths;
use antler_store::MemoryStore;
use antler_store::messages::Message;
use antler_store::state::ThreadState;
use serde_json::json;

fn config(data_dir: &Path, mounts: Vec<SandboxMountConfig>, eager: bool) -> AppConfig {
    let mut config = AppConfig {
        data_dir: Some(data_dir.to_path_buf()),
        ..AppConfig::default()
    };
    config.sandbox.provider = SandboxProviderKind::Local;
    config.sandbox.mounts = mounts;
    config.sandbox.eager = eager;
    config
}

fn mount(host: &Path, at: &str) -> SandboxMountConfig {
    SandboxMountConfig {
        host_path: host.to_path_buf(),
        container_path: at.to_string(),
        read_only: true,
    }
}

fn harness(config: &ConfigHandle, model: &Arc<ScriptedModel>) -> Harness {
    let models = ModelRegistry::new().with_model("scripted", model.clone(), ModelConfig::default());
    Harness::with_parts(
        config.clone(),
        Arc::new(MemoryStore::default()),
        Some(models),
    )
    .unwrap()
}

async fn run(harness: &Harness, thread: &str, text: &str) -> ThreadState {
    let handle = harness
        .start_run(RunRequest {
            user_id: "alice".into(),
            speaker: Speaker::Owner,
            thread_id: thread.into(),
            input: vec![Message::human(text)],
            options: RunOptions::default(),
            want_values: false,
        })
        .await
        .unwrap();
    let outcome = handle.outcome.await.unwrap();
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    outcome.state
}

#[tokio::test]
async fn eager_binds_the_sandbox_and_creates_the_directories_before_the_first_model_call() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            ScriptedTurn::Text(vec!["no tools needed".into()]),
            ScriptedTurn::Text(vec!["still none".into()]),
        ],
    ));
    let paths = ThreadPaths::new(&data, "alice", "t-eager").unwrap();

    let lazy = ConfigHandle::fixed(config(&data, Vec::new(), false));
    let state = run(&harness(&lazy, &model), "t-lazy", "hi").await;
    assert!(state.sandbox.is_none(), "lazy binds on the first tool call");
    let lazy_paths = ThreadPaths::new(&data, "alice", "t-lazy").unwrap();
    assert!(!lazy_paths.workspace().exists(), "lazy creates nothing");

    let eager = ConfigHandle::fixed(config(&data, Vec::new(), true));
    let state = run(&harness(&eager, &model), "t-eager", "hi").await;
    assert_eq!(
        state.sandbox.map(|s| s.sandbox_id),
        Some("local:alice:t-eager".to_string()),
        "sandbox.eager binds without any tool call"
    );
    assert!(paths.workspace().is_dir() && paths.outputs().is_dir());
    let thread_data = state.thread_data.unwrap();
    assert_eq!(thread_data.workspace_path, "/mnt/user-data/workspace");
    assert_eq!(thread_data.outputs_path, "/mnt/user-data/outputs");
}

#[tokio::test]
async fn a_reload_of_the_sandbox_between_runs_changes_what_the_prompt_names_and_tools_reach() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (old_dir, new_dir) = (tmp.path().join("old"), tmp.path().join("new"));
    for (dir, text) in [(&old_dir, "old data"), (&new_dir, "new data")] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("note.txt"), text).unwrap();
    }
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            ScriptedTurn::ToolCalls {
                text: String::new(),
                calls: vec![(
                    "read_file".into(),
                    json!({"description": "read", "path": "/mnt/old-ref/note.txt"}),
                )],
            },
            ScriptedTurn::Text(vec!["read the old one".into()]),
            ScriptedTurn::ToolCalls {
                text: String::new(),
                calls: vec![
                    (
                        "read_file".into(),
                        json!({"description": "read", "path": "/mnt/new-ref/note.txt"}),
                    ),
                    (
                        "read_file".into(),
                        json!({"description": "read", "path": "/mnt/old-ref/note.txt"}),
                    ),
                ],
            },
            ScriptedTurn::Text(vec!["read the new one".into()]),
        ],
    ));
    let handle = ConfigHandle::fixed(config(&data, vec![mount(&old_dir, "/mnt/old-ref")], false));
    let harness = harness(&handle, &model);
    let first = run(&harness, "t-reload", "read the reference").await;
    assert_eq!(tool_results(&first), ["old data"]);
    let before = harness.sandbox_info().unwrap();
    assert_eq!(before.mounts, [("/mnt/old-ref".to_string(), true)]);

    handle.replace(config(&data, vec![mount(&new_dir, "/mnt/new-ref")], false));
    let second = run(&harness, "t-reload", "read it again").await;
    let results = tool_results(&second);
    assert_eq!(results[1], "new data", "{results:?}");
    assert!(
        results[2].contains("/mnt/old-ref/note.txt is outside the sandbox"),
        "the old mount is gone: {results:?}"
    );
    assert_eq!(
        harness.sandbox_info().unwrap().mounts,
        [("/mnt/new-ref".to_string(), true)]
    );

    let prompts: Vec<String> = model
        .requests()
        .iter()
        .map(|r| r.system.as_deref().unwrap_or_default().to_string())
        .collect();
    assert_eq!(prompts.len(), 4);
    assert!(prompts[0].contains("/mnt/old-ref") && !prompts[0].contains("/mnt/new-ref"));
    for later in &prompts[2..] {
        assert!(later.contains("/mnt/new-ref"), "{later}");
        assert!(!later.contains("/mnt/old-ref"), "{later}");
    }
    harness
        .shutdown(std::time::Duration::from_secs(1))
        .await
        .unwrap();
}

/// Contents of the thread's tool messages, oldest first.
fn tool_results(state: &ThreadState) -> Vec<String> {
    state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .map(|tool| tool.content.to_string())
        .collect()
}
