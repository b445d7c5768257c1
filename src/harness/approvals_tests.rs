//! Parking, deciding, resuming, superseding and timing out approval requests through the
//! harness, with bash on the local sandbox (each run of the command adds a line to a file).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use super::*;
use crate::agent::RunOutcome;
use crate::agent_api::approval::{ApprovalReason, ApprovalRequest, ApprovalStatus, Decision};
use crate::agent_api::taint::{self, TaintSource};
use crate::agent_api::{RunEvent, RunOptions, StopReason};
use crate::approvals::{ApprovalError, Decider};
use crate::cluster::{Cluster, WallClock};
use crate::config::approvals::{ApproverKind, ApproversSetting};
use crate::config::{AppConfig, ConfigHandle, ModelConfig, SandboxProviderKind};
use crate::model::ModelRegistry;
use crate::model::{ScriptedModel, ScriptedTurn};
use crate::paths::ThreadPaths;
use antler_store::messages::Message;
use antler_store::state::StateChanges;
use antler_store::{MemoryStore, StepCheckpoint, StoreRef, ThreadStatus};

/// A wall clock the test moves by hand.
#[derive(Default)]
struct ManualClock(AtomicU64);

impl WallClock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

struct Fixture {
    harness: Harness,
    model: Arc<ScriptedModel>,
    clock: Arc<ManualClock>,
    dir: tempfile::TempDir,
}

fn fixture(configure: impl FnOnce(&mut AppConfig)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut config = AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    };
    config.sandbox.provider = SandboxProviderKind::Local;
    config.sandbox.allow_host_bash = true;
    configure(&mut config);
    let model = Arc::new(ScriptedModel::new("scripted", []));
    let models = ModelRegistry::new().with_model("scripted", model.clone(), ModelConfig::default());
    let store: StoreRef = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock(AtomicU64::new(1_700_000_000_000)));
    let cluster = Cluster::new(
        store.clone(),
        "test",
        Duration::from_secs(30),
        "sled",
        clock.clone(),
    );
    let harness =
        Harness::with_cluster(ConfigHandle::fixed(config), store, Some(models), cluster).unwrap();
    Fixture {
        harness,
        model,
        clock,
        dir,
    }
}

/// Each run leaves one more `run.*` file (no redirection: a command that redirects has no
/// prefix a conversation grant could cover).
const COUNT_COMMAND: &str = "mktemp -p /mnt/user-data/workspace run.XXXXXX";

fn bash(command: &str) -> ScriptedTurn {
    ScriptedTurn::ToolCalls {
        text: String::new(),
        calls: vec![(
            "bash".into(),
            json!({"description": "count", "command": command}),
        )],
    }
}

fn answer(text: &str) -> ScriptedTurn {
    ScriptedTurn::Text(vec![text.to_string()])
}

impl Fixture {
    fn runs_counted(&self, thread: &str) -> usize {
        let paths = ThreadPaths::new(self.dir.path(), "alice", thread).unwrap();
        std::fs::read_dir(paths.workspace())
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with("run."))
                    .count()
            })
            .unwrap_or(0)
    }

    async fn turn(&self, thread: &str, text: &str) -> (RunOutcome, Vec<RunEvent>) {
        let request = RunRequest {
            user_id: "alice".into(),
            speaker: Speaker::Owner,
            thread_id: thread.into(),
            input: vec![Message::human(text)],
            options: RunOptions::default(),
            want_values: false,
        };
        self.run(request).await
    }

    async fn run(&self, request: RunRequest) -> (RunOutcome, Vec<RunEvent>) {
        let mut handle = self.harness.start_run(request).await.unwrap();
        let mut events = Vec::new();
        while let Some(event) = handle.events.recv().await {
            events.push(event);
        }
        (handle.outcome.await.unwrap(), events)
    }

    /// Marks the thread's context untrusted, as a `web_fetch` result does.
    async fn taint(&self, thread: &str, url: &str) {
        let mut state = self.harness.thread_state(thread).await.unwrap().unwrap();
        let update = taint::mark(&state, [TaintSource::new("web_fetch", url)]).unwrap();
        let mut changes = StateChanges::new();
        changes.record(&update);
        state.apply(update).unwrap();
        self.harness
            .threads()
            .save_step(StepCheckpoint {
                thread_id: thread,
                run_id: "taint",
                step: 0,
                state: &state,
                changes: &changes,
            })
            .unwrap();
    }
}

fn decider(user: &str) -> Decider {
    Decider {
        user_id: user.into(),
        name: Some(user.to_uppercase()),
        is_admin: false,
    }
}

fn requested(events: &[RunEvent]) -> Vec<ApprovalRequest> {
    events
        .iter()
        .filter_map(|event| match event {
            RunEvent::ApprovalRequested(request) => Some(*request.clone()),
            _ => None,
        })
        .collect()
}

fn always_bash(config: &mut AppConfig) {
    config.approvals.tools = vec!["bash".into()];
}

#[tokio::test]
async fn a_gated_call_parks_and_an_approval_runs_it_once() {
    let f = fixture(always_bash);
    f.model.push(bash(COUNT_COMMAND));
    let (outcome, events) = f.turn("t1", "count once").await;
    assert_eq!(
        outcome.stop,
        StopReason::AwaitingApproval,
        "{:?}",
        outcome.error
    );
    let parked = requested(&events);
    assert_eq!(parked.len(), 1, "one approval_requested event");
    let request = &parked[0];
    assert_eq!(request.reason, ApprovalReason::Always);
    assert_eq!(request.summary, COUNT_COMMAND);
    assert_eq!(
        (request.requester.as_str(), request.owner.as_str()),
        ("alice", "alice")
    );
    // Stored before it was announced, with its expiry.
    let stored = f.harness.approvals().get(&request.id).unwrap().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Pending);
    assert_eq!((stored.expires_at - stored.created_at).num_minutes(), 60);
    assert_eq!(f.runs_counted("t1"), 0, "the command did not run");
    let record = f.harness.get_thread("alice", "t1").unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Interrupted);
    let state = f.harness.thread_state("t1").await.unwrap().unwrap();
    assert_eq!(crate::agent::run::unanswered_calls(&state).len(), 1);

    let decided = f
        .harness
        .decide_approval(&request.id, &decider("alice"), Decision::Approve, None)
        .unwrap();
    assert!(decided.fresh);
    assert_eq!(decided.request.status, ApprovalStatus::Approved);
    let again = f
        .harness
        .decide_approval(&request.id, &decider("alice"), Decision::Deny, None)
        .unwrap();
    assert!(!again.fresh, "a second click changes nothing");
    assert_eq!(again.request.status, ApprovalStatus::Approved);

    f.model.push(answer("counted"));
    let (outcome, _) = f.run(f.harness.resume_request(&decided.request)).await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert_eq!(f.runs_counted("t1"), 1);
    assert_eq!(outcome.state.messages.last().unwrap().content(), "counted");

    // A redelivered decision resumes again: nothing runs, the model is not called.
    let (outcome, _) = f.run(f.harness.resume_request(&decided.request)).await;
    assert_eq!(outcome.stop, StopReason::Completed);
    assert_eq!(f.runs_counted("t1"), 1);
    assert_eq!(f.model.unscripted_calls(), 0);
}

#[tokio::test]
async fn a_denial_reaches_the_model_with_who_and_why() {
    let f = fixture(always_bash);
    f.model.push(bash(COUNT_COMMAND));
    let (_, events) = f.turn("t1", "count").await;
    let request = requested(&events).remove(0);
    let refused = f
        .harness
        .decide_approval(&request.id, &decider("mallory"), Decision::Approve, None)
        .unwrap_err();
    assert!(
        matches!(&refused, ApprovalError::NotAllowed { who } if who == "only alice (the requester) or an admin can decide"),
        "{refused}"
    );
    let decided = f
        .harness
        .decide_approval(
            &request.id,
            &decider("alice"),
            Decision::Deny,
            Some("not on prod".into()),
        )
        .unwrap();
    f.model.push(answer("understood"));
    let (outcome, _) = f.run(f.harness.resume_request(&decided.request)).await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert_eq!(f.runs_counted("t1"), 0);
    let seen = f.model.requests().last().unwrap().messages.clone();
    let denial = seen
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Tool(tool) => Some(tool.content.to_string()),
            _ => None,
        })
        .unwrap();
    assert!(denial.contains("ALICE did not approve"), "{denial}");
    assert!(denial.contains("not on prod"), "{denial}");
    assert!(denial.contains("Do not retry the same call"), "{denial}");
}

#[tokio::test]
async fn untrusted_content_gates_bash_and_a_conversation_grant_covers_its_prefix_only() {
    let f = fixture(|_| {});
    // Clean context: bash runs without asking.
    f.model.push(bash(COUNT_COMMAND));
    f.model.push(answer("ran"));
    let (outcome, _) = f.turn("t1", "count").await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert_eq!(f.runs_counted("t1"), 1);

    f.taint("t1", "https://example.com/page").await;
    f.model.push(bash(COUNT_COMMAND));
    let (outcome, events) = f.turn("t1", "again").await;
    assert_eq!(outcome.stop, StopReason::AwaitingApproval);
    let request = requested(&events).remove(0);
    assert_eq!(
        request.reason,
        ApprovalReason::Untrusted {
            sources: vec!["web_fetch https://example.com/page".into()]
        }
    );
    let decided = f
        .harness
        .decide_approval(
            &request.id,
            &decider("alice"),
            Decision::ApproveConversation,
            None,
        )
        .unwrap();
    f.model.push(answer("done"));
    f.run(f.harness.resume_request(&decided.request)).await;
    assert_eq!(f.runs_counted("t1"), 2);

    // Same prefix (`mktemp`): granted. Another program: asks.
    f.model
        .push(bash("mktemp -p /mnt/user-data/workspace run.third.XXXXXX"));
    f.model.push(answer("third"));
    let (outcome, events) = f.turn("t1", "third").await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert!(requested(&events).is_empty());
    assert_eq!(f.runs_counted("t1"), 3);
    f.model.push(bash("ls /mnt/user-data/workspace"));
    let (outcome, events) = f.turn("t1", "list").await;
    assert_eq!(outcome.stop, StopReason::AwaitingApproval);
    assert_eq!(requested(&events)[0].summary, "ls /mnt/user-data/workspace");
}

#[tokio::test]
async fn a_new_message_supersedes_a_pending_request() {
    let f = fixture(always_bash);
    f.model.push(bash(COUNT_COMMAND));
    let (_, events) = f.turn("t1", "count").await;
    let request = requested(&events).remove(0);
    f.model.push(answer("ok, never mind"));
    let (outcome, _) = f.turn("t1", "forget it").await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let stored = f.harness.approvals().get(&request.id).unwrap().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Superseded);
    // The call's result sits before the new message: the history stays valid.
    let messages = &outcome.state.messages;
    let at = messages
        .iter()
        .position(|m| matches!(m, Message::Tool(t) if t.tool_call_id == request.tool_call_id))
        .unwrap();
    assert!(
        messages[at]
            .content()
            .starts_with("Not run: a new message arrived")
    );
    assert!(matches!(&messages[at + 1], Message::Human(_)));
    // A late approval finds it settled and runs nothing.
    let late = f
        .harness
        .decide_approval(&request.id, &decider("alice"), Decision::Approve, None)
        .unwrap();
    assert!(!late.fresh);
    assert_eq!(f.runs_counted("t1"), 0);
}

#[tokio::test]
async fn an_unanswered_request_times_out_as_a_denial_and_the_run_goes_on() {
    let f = fixture(|config| {
        always_bash(config);
        config.approvals.timeout_minutes = 5;
        config.approvals.approvers = ApproversSetting::Named(ApproverKind::Admins);
    });
    f.model.push(bash(COUNT_COMMAND));
    let (_, events) = f.turn("t1", "count").await;
    let request = requested(&events).remove(0);
    assert_eq!(f.harness.expire_approvals().await, 0, "not yet expired");
    f.clock.0.fetch_add(5 * 60 * 1000, Ordering::SeqCst);
    f.model.push(answer("nobody answered"));
    assert_eq!(f.harness.expire_approvals().await, 1);
    let stored = f.harness.approvals().get(&request.id).unwrap().unwrap();
    assert_eq!(stored.status, ApprovalStatus::TimedOut);
    assert_eq!(stored.decision.as_ref().unwrap().by, "system");
    // The background run answers the call with the timeout and calls the model once.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while f.model.remaining() > 0 || f.harness.active_run("t1").is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the resume never ran"
        );
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let state = f.harness.thread_state("t1").await.unwrap().unwrap();
    assert!(crate::agent::run::unanswered_calls(&state).is_empty());
    assert_eq!(state.messages.last().unwrap().content(), "nobody answered");
    assert_eq!(f.runs_counted("t1"), 0);
    assert_eq!(f.harness.expire_approvals().await, 0, "settled once");
}

/// In a shared conversation the parked run may have run the chooser's custom agent; the stored
/// request cannot carry that in its options (never (de)serialized), so it keeps it apart and
/// the resumed run gets it back.
#[tokio::test]
async fn a_resumed_run_keeps_the_chosen_agents_owner() {
    let f = fixture(always_bash);
    let request = ApprovalRequest {
        owner: "chat-slack-abc".into(),
        requester: "bob".into(),
        options: RunOptions {
            agent_name: Some("reviewer".into()),
            agent_owner: Some("ann".into()),
            ..Default::default()
        },
        agent_owner: Some("ann".into()),
        ..serde_json::from_value(serde_json::json!({
            "id": "0a1b2c3d", "thread_id": "t", "run_id": "r", "tool_call_id": "c",
            "tool": "bash", "args": {}, "summary": "ls", "reason": {"kind": "always"},
            "owner": "o", "requester": "r", "approvers": {"kind": "requester"},
            "options": {}, "created_at": "2026-12-05T00:00:00Z",
            "expires_at": "2026-12-05T01:00:00Z", "status": "approved"
        }))
        .unwrap()
    };
    let stored: ApprovalRequest =
        serde_json::from_value(serde_json::to_value(&request).unwrap()).unwrap();
    assert_eq!(stored.options.agent_owner, None, "options never carry it");
    let resumed = f.harness.resume_request(&stored);
    assert_eq!(resumed.options.agent_owner.as_deref(), Some("ann"));
    assert_eq!(resumed.options.agent_name.as_deref(), Some("reviewer"));
    assert_eq!(
        resumed.speaker,
        Speaker::Member {
            user_id: "bob".into()
        }
    );
}
