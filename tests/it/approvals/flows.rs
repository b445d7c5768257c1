//! One story per behaviour of the gate: park, approve, deny, time out, grant for the
//! conversation, restart, sub-agents.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use antler::agent_api::approval::{ApprovalReason, ApprovalStatus, Decision};
use antler::agent_api::taint::TaintSource;
use antler::agent_api::{RunOptions, StopReason};
use antler::cluster::{Cluster, WallClock};
use antler::config::ConfigHandle;
use antler::harness::Harness;
use antler_store::ThreadStatus;
use antler_test_support::{FakeOpenAi, Reply};
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_fetched_a_page_parks_at_bash_and_an_approval_runs_it_once() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake, |_| {});
    let harness = open(&config);

    fake.push(Reply::tool_call(
        "web_fetch",
        json!({"url": "http://127.0.0.1:9/release-notes"}),
    ));
    fake.push(Reply::text("The page says to run the installer."));
    let (outcome, _) = run(&harness, message("alice", "t1", "read the release notes")).await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    // What the `web_fetch` result marks.
    let page = TaintSource::new("web_fetch", "http://127.0.0.1:9/release-notes");
    taint(&harness, "t1", page).await;

    let command = count_command("install");
    fake.push(Reply::tool_call("bash", bash_args(&command)));
    fake.push(Reply::text("Installed."));
    let (outcome, events) = run(&harness, message("alice", "t1", "do what it says")).await;
    assert_eq!(outcome.stop, StopReason::AwaitingApproval);
    let request = requested(&events).remove(0);
    assert_eq!(request.tool, "bash");
    assert_eq!(request.summary, command);
    assert_eq!(
        request.reason,
        ApprovalReason::Untrusted {
            sources: vec!["web_fetch http://127.0.0.1:9/release-notes".into()]
        }
    );
    assert_eq!(runs(dir.path(), "alice", "t1", "install"), 0);
    let record = harness.get_thread("alice", "t1").unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Interrupted);
    assert_eq!(fake.requests().len(), 3, "no model call after the park");

    let decided = decide(&harness, &request, "alice", Decision::Approve, None);
    assert!(decided.fresh);
    let (outcome, _) = run(&harness, harness.resume_request(&decided.request)).await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert_eq!(runs(dir.path(), "alice", "t1", "install"), 1);
    assert_eq!(
        outcome.state.messages.last().unwrap().content(),
        "Installed."
    );

    // A redelivered decision: not fresh, and resuming again runs nothing and calls no model.
    let again = decide(&harness, &request, "alice", Decision::Approve, None);
    assert!(!again.fresh);
    let (outcome, _) = run(&harness, harness.resume_request(&again.request)).await;
    assert_eq!((outcome.stop, outcome.steps), (StopReason::Completed, 0));
    assert_eq!(runs(dir.path(), "alice", "t1", "install"), 1);
    assert_eq!(fake.unscripted_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_reaches_the_model_with_who_and_why_and_others_cannot_decide() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake, |c| {
        c.approvals.tools = vec!["bash".into()]
    });
    let harness = open(&config);
    fake.push(Reply::tool_call("bash", bash_args(&count_command("deny"))));
    fake.push(Reply::text("Understood, I will not run it."));
    let (_, events) = run(&harness, message("alice", "t1", "clean up")).await;
    let request = requested(&events).remove(0);

    let decider = antler::approvals::Decider {
        user_id: "bob".into(),
        name: None,
        is_admin: false,
    };
    let refused = harness
        .decide_approval(&request.id, &decider, Decision::Approve, None)
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "only alice (the requester) or an admin can decide"
    );
    let decided = decide(
        &harness,
        &request,
        "alice",
        Decision::Deny,
        Some("not on a Friday"),
    );
    let (outcome, _) = run(&harness, harness.resume_request(&decided.request)).await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert_eq!(runs(dir.path(), "alice", "t1", "deny"), 0);
    let denial = last_tool_result(&fake);
    assert!(
        denial.starts_with("Denied: alice (name) did not approve the call to `bash`"),
        "{denial}"
    );
    assert!(denial.contains(": not on a Friday."), "{denial}");
    assert!(denial.contains("Do not retry the same call"), "{denial}");
}

/// A wall clock the test moves.
struct ManualClock(AtomicU64);

impl WallClock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_request_times_out_as_a_denial_and_the_model_continues() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake, |c| {
        c.approvals.tools = vec!["bash".into()];
        c.approvals.timeout_minutes = 10;
    });
    let store = antler::storage::open_store(&config).unwrap();
    let clock = Arc::new(ManualClock(AtomicU64::new(1_767_000_000_000)));
    let cluster = Cluster::new(
        store.clone(),
        "it",
        Duration::from_secs(30),
        "sled",
        clock.clone(),
    );
    let harness =
        Harness::with_cluster(ConfigHandle::fixed(config.clone()), store, None, cluster).unwrap();
    fake.push(Reply::tool_call("bash", bash_args(&count_command("late"))));
    let (_, events) = run(&harness, message("alice", "t1", "count")).await;
    let request = requested(&events).remove(0);
    clock.0.fetch_add(9 * 60 * 1000, Ordering::SeqCst);
    assert_eq!(
        harness.expire_approvals().await,
        0,
        "9 minutes: still waiting"
    );
    clock.0.fetch_add(60 * 1000, Ordering::SeqCst);
    fake.push(Reply::text("Nobody approved it; skipping that step."));
    assert_eq!(harness.expire_approvals().await, 1);
    let stored = harness.approvals().get(&request.id).unwrap().unwrap();
    assert_eq!(stored.status, ApprovalStatus::TimedOut);
    // The harness resumes it in the background: wait for the model's answer, with a deadline.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let state = harness.thread_state("t1").await.unwrap().unwrap();
        if state.messages.last().map(|m| m.content().to_string())
            == Some("Nobody approved it; skipping that step.".into())
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the resume never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let result = last_tool_result(&fake);
    assert!(
        result.starts_with("Denied: nobody approved the call to `bash`"),
        "{result}"
    );
    assert_eq!(runs(dir.path(), "alice", "t1", "late"), 0);
    harness.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_bash_asks_without_untrusted_content_and_a_conversation_grant_covers_its_prefix() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake, |c| {
        c.approvals.tools = vec!["bash".into()]
    });
    let harness = open(&config);
    fake.push(Reply::tool_call("bash", bash_args(&count_command("a"))));
    fake.push(Reply::text("one"));
    let (outcome, events) = run(&harness, message("alice", "t1", "count")).await;
    assert_eq!(
        outcome.stop,
        StopReason::AwaitingApproval,
        "clean context, still asks"
    );
    let request = requested(&events).remove(0);
    assert_eq!(request.reason, ApprovalReason::Always);
    let decided = decide(
        &harness,
        &request,
        "alice",
        Decision::ApproveConversation,
        None,
    );
    run(&harness, harness.resume_request(&decided.request)).await;
    assert_eq!(runs(dir.path(), "alice", "t1", "a"), 1);

    // `mktemp` again: granted for the conversation, no request.
    fake.push(Reply::tool_call("bash", bash_args(&count_command("b"))));
    fake.push(Reply::text("two"));
    let (outcome, events) = run(&harness, message("alice", "t1", "again")).await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert!(requested(&events).is_empty());
    assert_eq!(runs(dir.path(), "alice", "t1", "b"), 1);
    // Another program, or the same one chained with another: asks.
    for command in [
        "ls /mnt/user-data/workspace",
        "mktemp -p /tmp x.XXXX && rm -rf /tmp/x",
    ] {
        fake.push(Reply::tool_call("bash", bash_args(command)));
        let (outcome, events) = run(&harness, message("alice", "t1", "more")).await;
        assert_eq!(outcome.stop, StopReason::AwaitingApproval, "{command}");
        assert_eq!(requested(&events)[0].summary, command);
    }
    // Another conversation: the grant does not follow.
    fake.push(Reply::tool_call("bash", bash_args(&count_command("c"))));
    let (outcome, _) = run(&harness, message("alice", "t2", "count")).await;
    assert_eq!(outcome.stop, StopReason::AwaitingApproval);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_request_and_decision_resumes_and_the_tool_runs_once() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake, |c| {
        c.approvals.tools = vec!["bash".into()]
    });
    let harness = open(&config);
    fake.push(Reply::tool_call(
        "bash",
        bash_args(&count_command("restart")),
    ));
    let (_, events) = run(&harness, message("alice", "t1", "count")).await;
    let request = requested(&events).remove(0);
    harness.shutdown(Duration::from_secs(10)).await.unwrap();
    drop(harness);

    let harness = open(&config);
    let stored = harness.approvals().get(&request.id).unwrap().unwrap();
    assert_eq!(
        stored.status,
        ApprovalStatus::Pending,
        "kept across the restart"
    );
    let decided = decide(&harness, &request, "alice", Decision::Approve, None);
    fake.push(Reply::text("Counted after the restart."));
    let (outcome, _) = run(&harness, harness.resume_request(&decided.request)).await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert_eq!(runs(dir.path(), "alice", "t1", "restart"), 1);
    // The decision delivered again after another restart: nothing runs twice.
    harness.shutdown(Duration::from_secs(10)).await.unwrap();
    drop(harness);
    let harness = open(&config);
    let again = decide(&harness, &request, "alice", Decision::Approve, None);
    assert!(!again.fresh);
    let (outcome, _) = run(&harness, harness.resume_request(&again.request)).await;
    assert_eq!(outcome.steps, 0);
    assert_eq!(runs(dir.path(), "alice", "t1", "restart"), 1);
    harness.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_leaves_a_gated_call_to_the_lead_which_parks_it() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake, |c| {
        c.approvals.tools = vec!["bash".into()]
    });
    let harness = open(&config);
    fake.push(Reply::tool_call(
        "task",
        json!({"description": "count", "prompt": "count the files", "subagent_type": "general-purpose"}),
    ));
    // The sub-agent tries bash, reads why it cannot, and reports.
    fake.push(Reply::tool_call("bash", bash_args(&count_command("sub"))));
    fake.push(Reply::text(
        "Counting needs approval; left to the lead agent.",
    ));
    // The lead runs it itself: that call parks.
    fake.push(Reply::tool_call("bash", bash_args(&count_command("lead"))));
    let mut request = message("alice", "t1", "count the files");
    request.options = RunOptions {
        subagent_enabled: true,
        ..Default::default()
    };
    let (outcome, events) = run(&harness, request).await;
    assert_eq!(
        outcome.stop,
        StopReason::AwaitingApproval,
        "{:?}",
        outcome.error
    );
    let parked = requested(&events);
    assert_eq!(parked.len(), 1, "only the lead's call parks");
    assert_eq!(parked[0].summary, count_command("lead"));
    assert_eq!(runs(dir.path(), "alice", "t1", "sub"), 0);
    let sub_agent_saw = fake.requests()[2].clone();
    let refusal = sub_agent_saw["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .unwrap();
    assert!(
        refusal.starts_with("Not run: the call to `bash`")
            && refusal.contains("left to the lead agent"),
        "{refusal}"
    );
}
