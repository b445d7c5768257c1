//! Approvals over the HTTP API on the real daemon: a gated bash call parks the streamed run
//! (`custom` `approval_requested`, stop reason `awaiting_approval`), the thread lists the
//! request, a decision resumes the run once (JSON like `/runs/wait`, or streamed like
//! `/runs/stream`), a repeat changes nothing, only approvers decide, `/approve` typed through
//! `POST /api/commands` does the same, and the audit list, the CLI and the metric agree.

use std::path::PathBuf;

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::cli::antler;
use super::{Daemon, Setup, TOKEN_A, TOKEN_B, collect_sse};

/// Appends a line to a file of the thread's outputs and prints the file: the file says how
/// many times the call ran.
const COMMAND: &str =
    "echo ran >> /mnt/user-data/outputs/ran.txt; cat /mnt/user-data/outputs/ran.txt";

fn ran_file(setup: &Setup, user: &str, thread: &str) -> PathBuf {
    setup
        .data_dir()
        .join("users")
        .join(user)
        .join("threads")
        .join(thread)
        .join("user-data/outputs/ran.txt")
}

/// Streams a message that makes the model call bash; the run parks. Returns the request.
async fn park(daemon: &Daemon, fake: &FakeOpenAi, token: &str, thread: &str) -> Value {
    fake.push(Reply::tool_call("bash", json!({"command": COMMAND})));
    let events = daemon.stream_run(token, thread, "count the runs").await;
    let requested: Vec<&Value> = events
        .iter()
        .filter(|(name, data)| name == "custom" && data["type"] == "approval_requested")
        .map(|(_, data)| &data["data"])
        .collect();
    assert_eq!(requested.len(), 1, "{events:?}");
    let (last, end) = events.last().expect("events");
    assert_eq!(last, "end");
    assert_eq!(end["stop_reason"], "awaiting_approval", "{events:?}");
    let request = requested[0].clone();
    assert_eq!(request["tool"], "bash", "{request}");
    assert_eq!(request["status"], "pending", "{request}");
    assert!(
        request["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("ran.txt"),
        "{request}"
    );
    request
}

fn decide(
    daemon: &Daemon,
    token: &str,
    thread: &str,
    id: &str,
    body: Value,
) -> reqwest::RequestBuilder {
    daemon
        .post(&format!("/api/threads/{thread}/approvals/{id}"), token)
        .json(&body)
}

/// The series' value in `/metrics`.
fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{series} ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{series} missing from\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_bash_call_is_approved_over_http_and_runs_once() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "approvals:\n  tools: [bash]\n");
    let daemon = setup.start();
    let metrics_before = daemon.metrics().await;
    assert_eq!(
        metric(
            &metrics_before,
            "antler_approvals_total{decision=\"approved\"}"
        ),
        0
    );
    let thread = daemon.create_thread(TOKEN_A).await;
    let request = park(&daemon, &fake, TOKEN_A, &thread).await;
    let id = request["id"].as_str().expect("id").to_string();
    assert_eq!(fake.requests().len(), 1, "parking costs no model call");
    assert!(!ran_file(&setup, "alice", &thread).exists(), "nothing ran");

    // The thread lists it; the thread is not shown as running.
    let listed = daemon
        .get_json(&format!("/api/threads/{thread}/approvals"), TOKEN_A)
        .await;
    assert_eq!(listed["approvals"][0]["id"], id.as_str(), "{listed}");
    assert_eq!(listed["approvals"][0]["status"], "pending", "{listed}");
    let record = daemon
        .get_json(&format!("/api/threads/{thread}"), TOKEN_A)
        .await;
    assert_ne!(record["status"], "busy", "{record}");

    // Someone who may not see the thread gets what an unknown id gets.
    let foreign = decide(
        &daemon,
        TOKEN_B,
        &thread,
        &id,
        json!({"decision": "approve"}),
    )
    .send()
    .await
    .unwrap();
    Daemon::expect_error(foreign, 404, "approval_not_found", &[&id]).await;
    let foreign_list = daemon
        .get(&format!("/api/threads/{thread}/approvals"), TOKEN_B)
        .send()
        .await
        .unwrap();
    assert_eq!(foreign_list.status(), 404);
    // A malformed body names the field.
    let malformed = decide(&daemon, TOKEN_A, &thread, &id, json!({"decision": "maybe"}))
        .send()
        .await
        .unwrap();
    let status = malformed.status().as_u16();
    assert!(matches!(status, 400 | 422), "{status}");
    let body: Value = malformed.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("decision"), "{body}");

    // Approve: the run resumes, the tool runs, the model answers.
    fake.push(Reply::text("It ran once."));
    let approved = decide(
        &daemon,
        TOKEN_A,
        &thread,
        &id,
        json!({"decision": "approve"}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(approved.status(), 200);
    let approved: Value = approved.json().await.unwrap();
    assert_eq!(approved["fresh"], true, "{approved}");
    assert_eq!(approved["approval"]["status"], "approved", "{approved}");
    assert_eq!(
        approved["approval"]["decision"]["by"], "alice",
        "{approved}"
    );
    assert_eq!(approved["stop_reason"], "completed", "{approved}");
    let messages = approved["values"]["messages"].as_array().expect("messages");
    let last = messages.last().expect("a message");
    assert_eq!(last["content"], "It ran once.", "{last}");
    let tool_result = messages
        .iter()
        .find(|m| m["type"] == "tool" && m["name"] == "bash")
        .expect("the bash result");
    assert!(
        tool_result["content"]
            .as_str()
            .unwrap_or_default()
            .contains("ran"),
        "{tool_result}"
    );
    assert_eq!(fake.requests().len(), 2);
    let ran = ran_file(&setup, "alice", &thread);
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n");

    // A second click: the same record, nothing runs.
    let again = decide(&daemon, TOKEN_A, &thread, &id, json!({"decision": "deny"}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["fresh"], false, "{again}");
    assert_eq!(again["approval"]["status"], "approved", "{again}");
    assert!(again.get("run_id").is_none(), "{again}");
    assert_eq!(fake.requests().len(), 2, "no model call");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n");

    // The audit list: one's own, and another's only for admins.
    let mine = daemon.get_json("/api/approvals", TOKEN_A).await;
    assert_eq!(mine["approvals"].as_array().unwrap().len(), 1, "{mine}");
    let bobs = daemon.get_json("/api/approvals", TOKEN_B).await;
    assert_eq!(bobs["approvals"], json!([]), "{bobs}");
    let snooping = daemon
        .get("/api/approvals?user=alice", TOKEN_B)
        .send()
        .await
        .unwrap();
    Daemon::expect_error(snooping, 403, "forbidden", &["admins"]).await;
    let pending = daemon
        .get_json("/api/approvals?status=pending", TOKEN_A)
        .await;
    assert_eq!(pending["approvals"], json!([]), "{pending}");

    let metrics = daemon.metrics().await;
    for (label, count) in [("requested", 1), ("approved", 1), ("denied", 0)] {
        let series = format!("antler_approvals_total{{decision=\"{label}\"}}");
        assert_eq!(metric(&metrics, &series), count, "{series}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_approvers_decide_a_streamed_denial_reaches_the_model_and_approve_can_be_typed() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(
        &fake.base_url(),
        "admins: [bob]\napprovals:\n  tools: [bash]\n  approvers: admins\n",
    );
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let request = park(&daemon, &fake, TOKEN_A, &thread).await;
    let id = request["id"].as_str().expect("id").to_string();

    // Alice sees her request but only an admin may decide it.
    let refused = decide(
        &daemon,
        TOKEN_A,
        &thread,
        &id,
        json!({"decision": "approve"}),
    )
    .send()
    .await
    .unwrap();
    Daemon::expect_error(refused, 403, "not_an_approver", &["admin"]).await;
    assert_eq!(fake.requests().len(), 1);

    // Bob denies, streamed: the decision first, then the resumed run.
    fake.push(Reply::text("Understood, I will not run it."));
    let response = decide(
        &daemon,
        TOKEN_B,
        &thread,
        &id,
        json!({"decision": "deny", "reason": "not on this box"}),
    )
    .header("Accept", "text/event-stream")
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    let events = collect_sse(response).await;
    let (first, lead) = &events[0];
    assert_eq!(first, "custom");
    assert_eq!(lead["type"], "approval_decided", "{lead}");
    assert_eq!(lead["data"]["approval"]["status"], "denied", "{lead}");
    assert_eq!(lead["data"]["approval"]["decision"]["by"], "bob", "{lead}");
    let (last, end) = events.last().unwrap();
    assert_eq!(last, "end");
    assert_eq!(end["stop_reason"], "completed", "{events:?}");
    let said: String = events
        .iter()
        .filter(|(name, _)| name == "messages")
        .filter_map(|(_, data)| data[0]["content"].as_str())
        .collect();
    assert_eq!(said, "Understood, I will not run it.");
    // The model read the denial, who made it and why; the command never ran.
    let second = fake.requests()[1].to_string();
    assert!(
        second.contains("bob") && second.contains("not on this box"),
        "{second}"
    );
    assert!(!ran_file(&setup, "alice", &thread).exists());

    // The admin's audit list has Alice's request, alone or filtered to her.
    let all = daemon.get_json("/api/approvals", TOKEN_B).await;
    assert_eq!(all["approvals"][0]["id"], id.as_str(), "{all}");
    let hers = daemon.get_json("/api/approvals?user=alice", TOKEN_B).await;
    assert_eq!(hers["approvals"].as_array().unwrap().len(), 1, "{hers}");

    // A second request, approved by Bob typing /approve: the run goes on and answers.
    let request = park(&daemon, &fake, TOKEN_A, &thread).await;
    let second_id = request["id"].as_str().expect("id").to_string();
    fake.push(Reply::text("Done this time."));
    let typed = daemon
        .post("/api/commands", TOKEN_B)
        .json(&json!({"command": format!("/approve {second_id}")}))
        .send()
        .await
        .unwrap();
    assert_eq!(typed.status(), 200);
    let typed: Value = typed.json().await.unwrap();
    assert!(
        typed["reply"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Approved: bash"),
        "{typed}"
    );
    assert_eq!(typed["approval"]["status"], "approved", "{typed}");
    assert_eq!(typed["stop_reason"], "completed", "{typed}");
    assert_eq!(
        std::fs::read_to_string(ran_file(&setup, "alice", &thread)).unwrap(),
        "ran\n"
    );
    // Typed again, or denied after the fact: nothing changes.
    let repeat = daemon
        .post("/api/commands", TOKEN_B)
        .json(&json!({"command": format!("/deny {second_id} too late")}))
        .send()
        .await
        .unwrap();
    let repeat: Value = repeat.json().await.unwrap();
    assert_eq!(
        repeat["reply"],
        format!("{second_id} was already approved by bob; nothing changed."),
        "{repeat}"
    );
    assert_eq!(fake.requests().len(), 4, "no model call for the repeat");

    // The CLI, through the daemon's socket as the operator: both requests and who decided.
    let output = antler(&setup.config_path, &["approvals", "list"], "").await;
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("ID  "), "{text}");
    assert!(
        lines[1].contains(&second_id) && lines[1].contains("approved") && lines[1].contains("bob"),
        "{text}"
    );
    assert!(
        lines[2].contains(&id)
            && lines[2].contains("denied")
            && lines[2].contains("not on this box"),
        "{text}"
    );
    let only_bob = antler(
        &setup.config_path,
        &["approvals", "list", "--user", "carol"],
        "",
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&only_bob.stdout),
        "No approval requests.\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_typed_in_antler_chat_streams_the_resumed_run_through_the_daemon() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::tokenless(&fake.base_url(), "");
    let yaml = std::fs::read_to_string(&setup.config_path).unwrap();
    std::fs::write(
        &setup.config_path,
        format!("{yaml}approvals:\n  tools: [bash]\n"),
    )
    .unwrap();
    let daemon = setup.start();
    // Tokenless: every request is the local user's; any token string is ignored.
    let thread = daemon.create_thread("none").await;
    let request = park(&daemon, &fake, "none", &thread).await;
    let id = request["id"].as_str().expect("id").to_string();

    fake.push(Reply::chunks(["Ran it ", "once."]));
    let output = antler(
        &setup.config_path,
        &["chat", "--thread", &thread],
        &format!("/approve {id}\n"),
    )
    .await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("using the daemon"), "{stderr}");
    assert!(stdout.contains("Approved: bash `"), "{stdout}");
    assert!(stdout.contains("[tool] bash"), "{stdout}");
    assert!(stdout.contains("Ran it once."), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(ran_file(&setup, "local", &thread)).unwrap(),
        "ran\n"
    );
}
