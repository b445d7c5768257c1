//! The goal of #45, counted: 200 scripted turns over several conversations, with untrusted
//! sources arriving at random and random gated and ungated calls decided at random (approve,
//! approve for the conversation, deny, or left until the next message supersedes it). No gated
//! call may run without a recorded approval, and none may run twice.

use std::collections::{BTreeMap, BTreeSet};

use antler::agent_api::StopReason;
use antler::agent_api::approval::{ApprovalStatus, Decision};
use antler::agent_api::taint::TaintSource;
use antler::approvals::ApprovalFilter;
use antler_test_support::{FakeOpenAi, Reply};
use serde_json::json;

use super::*;

const TURNS: usize = 200;
const TURNS_PER_THREAD: usize = 25;

/// One call the model made and what became of it.
struct Call {
    thread: String,
    tag: String,
    tool: &'static str,
    /// The policy gates it when it is made (write_file always; bash once the thread is
    /// untrusted).
    gated: bool,
    /// Its own request's final status, if it parked.
    status: Option<ApprovalStatus>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_random_turns_run_no_gated_call_without_a_recorded_approval() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake, |c| {
        c.approvals.tools = vec!["write_file".into()];
    });
    let harness = open(&config);
    let mut rng = fastrand::Rng::with_seed(45);
    let sources = [
        ("web_fetch", "https://example.com/changelog"),
        ("web_search", "rust release"),
        ("mcp", "github"),
        ("shared_context", "Bob"),
        ("upload", "report.pdf"),
    ];
    let mut calls: Vec<Call> = Vec::new();
    let mut untrusted: BTreeSet<String> = BTreeSet::new();
    // Threads where a tool was approved for the rest of the conversation (before which call).
    let mut grants: BTreeMap<(String, &'static str), usize> = BTreeMap::new();
    let mut pending: Option<(usize, antler::agent_api::approval::ApprovalRequest)> = None;
    let mut turn = 0;
    while turn < TURNS {
        let thread = format!("t{}", turn / TURNS_PER_THREAD);
        turn += 1;
        if let Some((index, request)) = pending.take() {
            // Nobody decided: this message supersedes the request (the queued answer is the
            // model's reply to it).
            let (outcome, _) =
                run(&harness, message("alice", &request.thread_id, "never mind")).await;
            assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
            calls[index].status = Some(ApprovalStatus::Superseded);
            continue;
        }
        if harness.get_thread("alice", &thread).unwrap().is_some() && rng.u8(0..4) == 0 {
            let (kind, detail) = sources[rng.usize(0..sources.len())];
            taint(&harness, &thread, TaintSource::new(kind, detail)).await;
            untrusted.insert(thread.clone());
        }
        let tag = format!("k{turn}");
        let (tool, args, gated) = match rng.u8(0..3) {
            0 => (
                "bash",
                bash_args(&count_command(&tag)),
                untrusted.contains(&thread),
            ),
            1 => (
                "write_file",
                json!({"description": "note", "path": format!("/mnt/user-data/workspace/run-{tag}-note.txt"), "content": "x"}),
                true,
            ),
            _ => (
                "ls",
                json!({"description": "look", "path": "/mnt/user-data/workspace"}),
                false,
            ),
        };
        fake.push(Reply::tool_call(tool, args));
        fake.push(Reply::text(format!("done {tag}")));
        let index = calls.len();
        calls.push(Call {
            thread: thread.clone(),
            tag: tag.clone(),
            tool,
            gated,
            status: None,
        });
        let (outcome, events) =
            run(&harness, message("alice", &thread, &format!("turn {turn}"))).await;
        let parked = requested(&events);
        if outcome.stop == StopReason::Completed {
            assert!(parked.is_empty());
            continue;
        }
        assert_eq!(
            outcome.stop,
            StopReason::AwaitingApproval,
            "{:?}",
            outcome.error
        );
        let request = parked.into_iter().next().unwrap();
        let decision = match rng.u8(0..10) {
            0..4 => Decision::Approve,
            4 => Decision::ApproveConversation,
            5..8 => Decision::Deny,
            _ => {
                pending = Some((index, request));
                continue;
            }
        };
        let decided = decide(&harness, &request, "alice", decision, None);
        assert!(decided.fresh);
        if decision == Decision::ApproveConversation {
            grants.entry((thread.clone(), tool)).or_insert(index);
        }
        calls[index].status = Some(decided.request.status);
        let (outcome, _) = run(&harness, harness.resume_request(&decided.request)).await;
        assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    }

    let mut gated_runs = 0;
    let mut parked = 0;
    for (index, call) in calls.iter().enumerate() {
        if call.tool == "ls" {
            assert!(call.status.is_none(), "ls is never gated");
            continue;
        }
        let ran = runs(dir.path(), "alice", &call.thread, &call.tag);
        assert!(ran <= 1, "{} ran {ran} times", call.tag);
        parked += usize::from(call.status.is_some());
        let granted = grants
            .get(&(call.thread.clone(), call.tool))
            .is_some_and(|&from| from < index);
        match call.status {
            Some(ApprovalStatus::Approved) => assert_eq!(ran, 1, "{} approved", call.tag),
            Some(_) => assert_eq!(ran, 0, "{} ran without approval", call.tag),
            None if call.gated => {
                assert!(granted, "{} was gated but never asked", call.tag);
                assert_eq!(ran, 1, "{} granted", call.tag);
            }
            None => assert_eq!(ran, 1, "{} ungated", call.tag),
        }
        if call.gated && ran == 1 {
            gated_runs += 1;
        }
    }
    let audit = harness
        .approvals()
        .list(&ApprovalFilter::default())
        .unwrap();
    assert_eq!(audit.len(), parked, "every park is recorded");
    assert!(audit.iter().all(|r| r.status != ApprovalStatus::Pending));
    assert!(
        parked > 40 && gated_runs > 10,
        "{parked} parked, {gated_runs} gated runs"
    );
    println!(
        "{} calls, {parked} parked, {gated_runs} gated calls ran, each with a recorded approval",
        calls.len()
    );
    harness
        .shutdown(std::time::Duration::from_secs(10))
        .await
        .unwrap();
}
