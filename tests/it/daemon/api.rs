//! HTTP API behaviour: streaming runs with tools, busy threads, cancel, auth and isolation,
//! uploads and artifacts.

use std::time::Duration;

use antler_test_support::{FakeOpenAi, Gate, Reply};
use serde_json::{Value, json};

use super::{Setup, TOKEN_A, TOKEN_B};

fn last_ai_text(state: &Value) -> String {
    state["values"]["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["type"] == "ai"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_run_with_tools_produces_ordered_events_and_a_served_artifact() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call(
        "write_file",
        json!({"path": "/mnt/user-data/outputs/report.html", "content": "<h1>report</h1>"}),
    ))
    .push(Reply::tool_call(
        "present_files",
        json!({"filepaths": ["/mnt/user-data/outputs/report.html"]}),
    ))
    .push(Reply::chunks(["The report ", "is ready."]));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;

    let events = daemon.stream_run(TOKEN_A, &thread, "write a report").await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"metadata"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    assert_eq!(events[0].1["thread_id"], thread.as_str());
    assert!(
        names.contains(&"messages") && names.contains(&"values"),
        "{names:?}"
    );
    let tool_events: Vec<String> = events
        .iter()
        .filter(|(n, d)| {
            n == "custom" && d["type"].as_str().is_some_and(|t| t.starts_with("tool_"))
        })
        .map(|(_, d)| {
            format!(
                "{}:{}",
                d["type"].as_str().unwrap_or(""),
                d["call"]["name"]
                    .as_str()
                    .or(d["result"]["name"].as_str())
                    .unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        tool_events,
        [
            "tool_started:write_file",
            "tool_finished:write_file",
            "tool_started:present_files",
            "tool_finished:present_files"
        ]
    );
    let streamed: String = events
        .iter()
        .filter(|(n, _)| n == "messages")
        .filter_map(|(_, d)| d[0]["content"].as_str())
        .collect();
    assert!(streamed.ends_with("The report is ready."), "{streamed:?}");
    assert_eq!(fake.unscripted_calls(), 0);

    let state: Value = daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    assert_eq!(last_ai_text(&state), "The report is ready.");
    assert_eq!(
        state["values"]["artifacts"],
        json!(["/mnt/user-data/outputs/report.html"])
    );

    // The artifact is served, and HTML is always an attachment.
    let artifact = daemon
        .get(
            &format!("/api/threads/{thread}/artifacts/mnt/user-data/outputs/report.html"),
            TOKEN_A,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(artifact.status(), 200);
    let disposition = artifact.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(disposition.starts_with("attachment;"), "{disposition}");
    assert_eq!(artifact.text().await.unwrap(), "<h1>report</h1>");

    // Byte ranges.
    let ranged = daemon
        .get(
            &format!("/api/threads/{thread}/artifacts/mnt/user-data/outputs/report.html"),
            TOKEN_A,
        )
        .header("Range", "bytes=4-9")
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), 206);
    assert_eq!(ranged.text().await.unwrap(), "report");

    // Traversal is rejected; another user sees nothing.
    let traversal = daemon
        .get(
            &format!(
                "/api/threads/{thread}/artifacts/mnt/user-data/outputs/..%2F..%2F..%2Fconfig.yaml"
            ),
            TOKEN_A,
        )
        .send()
        .await
        .unwrap();
    assert!(
        traversal.status() == 400 || traversal.status() == 404,
        "{}",
        traversal.status()
    );
    let foreign = daemon
        .get(
            &format!("/api/threads/{thread}/artifacts/mnt/user-data/outputs/report.html"),
            TOKEN_B,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 404);
}

/// A model that streams for about ten seconds, so a run stays busy while the test acts.
/// A model that streams one chunk and never finishes: only a cancel ends its run.
async fn slow_model() -> FakeOpenAi {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::chunks((0..400).map(|i| format!("chunk{i} "))).hold_after(1, &Gate::new()));
    fake
}

type SseStream = futures::stream::BoxStream<'static, Result<eventsource_stream::Event, String>>;

/// Starts a streamed run and reads its `metadata` event: the open stream and the run id.
async fn start_run_with_id(daemon: &super::Daemon, thread: &str) -> (SseStream, String) {
    use eventsource_stream::Eventsource;
    use futures::StreamExt;
    let response = daemon.start_stream(TOKEN_A, thread, "go slowly").await;
    let mut stream: SseStream = response
        .bytes_stream()
        .eventsource()
        .map(|event| event.map_err(|e| e.to_string()))
        .boxed();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first.event, "metadata");
    let run_id = serde_json::from_str::<Value>(&first.data).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    (stream, run_id)
}

async fn cancel(daemon: &super::Daemon, thread: &str, run_id: &str) -> u16 {
    daemon
        .post(
            &format!("/api/threads/{thread}/runs/{run_id}/cancel"),
            TOKEN_A,
        )
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_on_a_busy_thread_is_409() {
    let fake = slow_model().await;
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let (_stream, run_id) = start_run_with_id(&daemon, &thread).await;

    let busy = daemon
        .post(&format!("/api/threads/{thread}/runs/wait"), TOKEN_A)
        .json(&json!({"input": {"messages": [{"role": "user", "content": "me too"}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(busy.status(), 409);
    let body: Value = busy.json().await.unwrap();
    assert_eq!(body["error"]["code"], "thread_busy");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancel")
    );
    let threads: Value = daemon.get_json("/api/threads", TOKEN_A).await;
    assert_eq!(threads["threads"][0]["status"], "busy");

    assert_eq!(cancel(&daemon, &thread, "not-a-run").await, 404);
    assert_eq!(cancel(&daemon, &thread, &run_id).await, 202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_slow_run() {
    use futures::StreamExt;
    let fake = slow_model().await;
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let (mut stream, run_id) = start_run_with_id(&daemon, &thread).await;
    assert_eq!(cancel(&daemon, &thread, &run_id).await, 202);
    // The model never finishes: the run can only end through the cancel.
    let last = tokio::time::timeout(Duration::from_secs(60), async {
        let mut last = String::new();
        while let Some(Ok(event)) = stream.next().await {
            last = event.data.clone();
            if event.event == "end" {
                break;
            }
        }
        last
    })
    .await
    .expect("the run kept going after cancel");
    assert!(last.contains("cancelled"), "{last}");
    let threads: Value = daemon.get_json("/api/threads", TOKEN_A).await;
    assert_eq!(threads["threads"][0]["status"], "interrupted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_is_required_and_users_are_isolated() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();

    let missing = daemon
        .http
        .get(daemon.url("/api/threads"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 401);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
    let invalid = daemon
        .get("/api/threads", "wrong-token")
        .send()
        .await
        .unwrap();
    assert_eq!(invalid.status(), 401);
    // Health probes need no token.
    let health = daemon
        .http
        .get(daemon.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let ready = daemon.http.get(daemon.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    // The web chat page loads without a token (its API calls still need one).
    let page = daemon.http.get(daemon.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    // The streaming lives in its modules; the page names the entry one.
    assert!(page.text().await.unwrap().contains("/js/app.js"));

    let thread = daemon.create_thread(TOKEN_A).await;
    for path in [
        format!("/api/threads/{thread}"),
        format!("/api/threads/{thread}/state"),
        format!("/api/threads/{thread}/uploads/list"),
    ] {
        let foreign = daemon.get(&path, TOKEN_B).send().await.unwrap();
        assert_eq!(foreign.status(), 404, "{path}");
    }
    let upload = reqwest::multipart::Form::new().part(
        "files",
        reqwest::multipart::Part::bytes(b"x".to_vec()).file_name("a.txt"),
    );
    let foreign_upload = daemon
        .post(&format!("/api/threads/{thread}/uploads"), TOKEN_B)
        .multipart(upload)
        .send()
        .await
        .unwrap();
    assert_eq!(foreign_upload.status(), 404);
    let foreign_delete = daemon
        .delete(&format!("/api/threads/{thread}"), TOKEN_B)
        .send()
        .await
        .unwrap();
    assert_eq!(foreign_delete.status(), 404);
    let listed: Value = daemon.get_json("/api/threads", TOKEN_B).await;
    assert_eq!(listed["threads"], json!([]));
    let models: Value = daemon.get_json("/api/models", TOKEN_B).await;
    assert_eq!(models["models"][0]["name"], "fake");
    assert!(
        !models.to_string().contains("127.0.0.1"),
        "models leak the base_url"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_enforce_limits_names_and_never_follow_symlinks() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(
        &fake.base_url(),
        "uploads:\n  max_files: 2\n  max_file_size: 1000\n  max_total_size: 1500\n",
    );
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let url = format!("/api/threads/{thread}/uploads");
    let send = |files: Vec<(&'static str, Vec<u8>)>| {
        let mut form = reqwest::multipart::Form::new();
        for (name, bytes) in files {
            form = form.part(
                "files",
                reqwest::multipart::Part::bytes(bytes).file_name(name),
            );
        }
        daemon.post(&url, TOKEN_A).multipart(form).send()
    };

    let ok: Value = send(vec![("notes.txt", b"hello".to_vec())])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ok["files"][0]["path"], "/mnt/user-data/uploads/notes.txt");
    let again: Value = send(vec![("notes.txt", b"again".to_vec())])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again["files"][0]["filename"], "notes_1.txt");

    let too_many = send(vec![("a", vec![1]), ("b", vec![1]), ("c", vec![1])])
        .await
        .unwrap();
    assert_eq!(too_many.status(), 413);
    let too_big = send(vec![("big.bin", vec![0; 1001])]).await.unwrap();
    assert_eq!(too_big.status(), 413);
    let body: Value = too_big.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_file_size")
    );
    let over_total = send(vec![("x.bin", vec![0; 900]), ("y.bin", vec![0; 900])])
        .await
        .unwrap();
    assert_eq!(over_total.status(), 413);

    for bad in ["../x", "a/../../b", "a\\b.txt"] {
        let response = send(vec![(bad, b"x".to_vec())]).await.unwrap();
        assert_eq!(response.status(), 400, "{bad}");
    }
    let long: &'static str = Box::leak("n".repeat(300).into_boxed_str());
    assert_eq!(
        send(vec![(long, b"x".to_vec())]).await.unwrap().status(),
        400
    );

    // A symlink planted at the destination is never written through.
    let uploads_dir = setup
        .data_dir()
        .join(format!("users/alice/threads/{thread}/user-data/uploads"));
    let victim = setup.dir.path().join("victim.txt");
    std::fs::write(&victim, "original").unwrap();
    std::os::unix::fs::symlink(&victim, uploads_dir.join("victim.txt")).unwrap();
    let planted: Value = send(vec![("victim.txt", b"evil".to_vec())])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(planted["files"][0]["filename"], "victim_1.txt");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original");

    let listed: Value = daemon.get_json(&format!("{url}/list"), TOKEN_A).await;
    let names: Vec<&str> = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["filename"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notes.txt", "notes_1.txt", "victim_1.txt"]);
    let deleted = daemon
        .delete(&format!("{url}/notes.txt"), TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    let missing = daemon
        .delete(&format!("{url}/notes.txt"), TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}
