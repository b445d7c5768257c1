//! Approvals end to end through the harness against the fake OpenAI server: a gated call parks
//! the run, a decision resumes it (once, also across a restart), denials and timeouts reach the
//! model, a conversation grant covers its command prefix, sub-agents leave gated calls to the
//! lead, and 200 random turns never run a gated call without a recorded approval.

mod flows;
mod goal;

use std::path::Path;

use antler::agent::RunOutcome;
use antler::agent_api::approval::{ApprovalRequest, Decision};
use antler::agent_api::taint::{self, TaintSource};
use antler::agent_api::{RunEvent, RunOptions};
use antler::approvals::{Decided, Decider};
use antler::config::{AppConfig, ConfigHandle, ModelConfig, SandboxProviderKind};
use antler::harness::{Harness, RunRequest, Speaker};
use antler::paths::ThreadPaths;
use antler_store::StepCheckpoint;
use antler_store::messages::Message;
use antler_store::state::StateChanges;
use antler_test_support::FakeOpenAi;

/// Each run of it leaves one more `run-*` file in the thread's workspace; no redirection, so
/// it has a prefix (`mktemp`) a conversation grant can cover.
pub(super) fn count_command(tag: &str) -> String {
    format!("mktemp -p /mnt/user-data/workspace run-{tag}-XXXXXX")
}

pub(super) fn bash_args(command: &str) -> serde_json::Value {
    serde_json::json!({"description": "count a run", "command": command})
}

/// A daemon's config: the fake model, bash on the host (the local sandbox), `approvals` as
/// `configure` sets them.
pub(super) fn config(
    data_dir: &Path,
    fake: &FakeOpenAi,
    configure: impl FnOnce(&mut AppConfig),
) -> AppConfig {
    let mut config = AppConfig {
        data_dir: Some(data_dir.to_path_buf()),
        models: vec![ModelConfig {
            name: "fake".into(),
            model: "fake-model".into(),
            base_url: fake.base_url(),
            timeout: 30.0,
            ..Default::default()
        }],
        ..AppConfig::default()
    };
    config.sandbox.provider = SandboxProviderKind::Local;
    config.sandbox.allow_host_bash = true;
    config.memory.enabled = false;
    configure(&mut config);
    config
}

pub(super) fn open(config: &AppConfig) -> Harness {
    Harness::open(ConfigHandle::fixed(config.clone())).unwrap()
}

pub(super) fn message(user: &str, thread: &str, text: &str) -> RunRequest {
    RunRequest {
        user_id: user.into(),
        speaker: Speaker::Owner,
        thread_id: thread.into(),
        input: vec![Message::human(text)],
        options: RunOptions::default(),
        want_values: false,
    }
}

/// Runs to the end; the outcome and every event.
pub(super) async fn run(harness: &Harness, request: RunRequest) -> (RunOutcome, Vec<RunEvent>) {
    let mut handle = harness.start_run(request).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = handle.events.recv().await {
        events.push(event);
    }
    (handle.outcome.await.unwrap(), events)
}

pub(super) fn requested(events: &[RunEvent]) -> Vec<ApprovalRequest> {
    events
        .iter()
        .filter_map(|event| match event {
            RunEvent::ApprovalRequested(request) => Some(*request.clone()),
            _ => None,
        })
        .collect()
}

pub(super) fn decide(
    harness: &Harness,
    request: &ApprovalRequest,
    user: &str,
    decision: Decision,
    reason: Option<&str>,
) -> Decided {
    let decider = Decider {
        user_id: user.into(),
        name: Some(format!("{user} (name)")),
        is_admin: false,
    };
    harness
        .decide_approval(&request.id, &decider, decision, reason.map(str::to_string))
        .unwrap()
}

/// The `run-{tag}-*` files in the thread's workspace: how often the command ran.
pub(super) fn runs(data_dir: &Path, user: &str, thread: &str, tag: &str) -> usize {
    let workspace = ThreadPaths::new(data_dir, user, thread)
        .unwrap()
        .workspace();
    let prefix = format!("run-{tag}-");
    std::fs::read_dir(workspace)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .count()
        })
        .unwrap_or(0)
}

/// Marks the thread's context untrusted as a `web_fetch` result marks it (nothing when it is
/// marked with this source already).
pub(super) async fn taint(harness: &Harness, thread: &str, source: TaintSource) {
    let mut state = harness.thread_state(thread).await.unwrap().unwrap();
    let Some(update) = taint::mark(&state, [source]) else {
        return;
    };
    let mut changes = StateChanges::new();
    changes.record(&update);
    state.apply(update).unwrap();
    harness
        .threads()
        .save_step(StepCheckpoint {
            thread_id: thread,
            run_id: "web_fetch-mark",
            step: 0,
            state: &state,
            changes: &changes,
        })
        .unwrap();
}

/// The text of the last tool result the model was sent.
pub(super) fn last_tool_result(fake: &FakeOpenAi) -> String {
    let request = fake.requests().last().cloned().unwrap();
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}
