//! The data directory's real path never reaches a client or the model: a turn with file and
//! shell tools runs through the HTTP API, and every body (SSE, `runs/wait`, `/state`, thread
//! listings, `/readyz`) and every model request is searched for it. `/readyz` names the sandbox.

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::{Setup, TOKEN_A};

/// Every spelling of the data dir a leak could use (as configured and canonical).
fn data_dir_markers(setup: &Setup) -> Vec<String> {
    let data = setup.data_dir();
    let mut markers = vec![data.to_string_lossy().into_owned()];
    if let Ok(canonical) = data.canonicalize() {
        markers.push(canonical.to_string_lossy().into_owned());
    }
    markers
}

fn assert_clean(what: &str, body: &str, markers: &[String]) {
    for marker in markers {
        assert!(
            !body.contains(marker.as_str()),
            "{what} leaks the data dir {marker}: {body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_response_or_model_request_contains_the_data_dir() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![
        (
            "write_file".into(),
            json!({"path": "/mnt/user-data/outputs/r.txt", "content": "report"}),
        ),
        (
            "bash".into(),
            json!({"command": "pwd; echo $HOME; ls -la /mnt/user-data; realpath /mnt/user-data/outputs/r.txt; grep user-data /proc/self/mountinfo; cat /nope/x"}),
        ),
    ]))
    .push(Reply::tool_calls(vec![
        (
            "read_file".into(),
            json!({"path": "/mnt/user-data/workspace/missing.txt"}),
        ),
        ("ls".into(), json!({"path": "/mnt/user-data"})),
        (
            "str_replace".into(),
            json!({"path": "/mnt/user-data/outputs/r.txt", "old_str": "report", "new_str": "x"}),
        ),
    ]))
    .push(Reply::text("Done."))
    .push(Reply::tool_call(
        "glob",
        json!({"pattern": "**/*", "path": "/mnt/user-data", "include_dirs": true}),
    ))
    .push(Reply::text("Listed."));
    let setup = Setup::new(&fake.base_url(), "sandbox:\n  eager: true\n");
    let markers = data_dir_markers(&setup);
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;

    let response = daemon
        .start_stream(TOKEN_A, &thread, "write a report")
        .await;
    let sse = response.text().await.unwrap();
    assert!(sse.contains("tool_finished"), "{sse}");
    assert_clean("the SSE stream", &sse, &markers);

    let wait = daemon.run_wait(TOKEN_A, &thread, "list").await;
    assert_eq!(wait.status(), 200);
    let wait = wait.text().await.unwrap();
    assert_clean("runs/wait", &wait, &markers);

    let state = daemon
        .get(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_clean("/state", &state, &markers);
    let values: Value = serde_json::from_str(&state).unwrap();
    assert_eq!(
        values["values"]["thread_data"],
        json!({
            "workspace_path": "/mnt/user-data/workspace",
            "uploads_path": "/mnt/user-data/uploads",
            "outputs_path": "/mnt/user-data/outputs"
        })
    );
    for path in [
        format!("/api/threads/{thread}"),
        "/api/threads".to_string(),
        "/readyz".to_string(),
    ] {
        let body = daemon
            .get(&path, TOKEN_A)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_clean(&path, &body, &markers);
    }
    let requests = fake.requests();
    assert_eq!(requests.len(), 5, "every scripted reply was used");
    for request in &requests {
        assert_clean("a model request", &request.to_string(), &markers);
    }
    // The tools did run against the real directory (so the checks above saw real output).
    let outputs = setup.data_dir().join(format!(
        "users/alice/threads/{thread}/user-data/outputs/r.txt"
    ));
    assert!(outputs.is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_the_sandbox_chosen_at_start() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "sandbox:\n  provider: local\n");
    let daemon = setup.start();
    let ready = daemon.readyz().await;
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(ready["sandbox"]["provider"], "local", "{ready}");
    assert_eq!(ready["sandbox"]["bash"], false, "{ready}");
    let reason = ready["sandbox"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("sandbox.allow_host_bash"), "{ready}");
    assert_eq!(fake.requests().len(), 0, "chosen at start, before any run");
}
