//! Every error the HTTP API gives is `{"error": {"code", "message"}}` with advice, including the
//! ones axum, the timeout and the file server produce; upload URLs survive odd file names;
//! symlinks get errors that say what happened.

use antler_test_support::FakeOpenAi;
use serde_json::{Value, json};

use super::{Daemon, Setup, TOKEN_A};

async fn daemon() -> (FakeOpenAi, Setup, Daemon) {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    (fake, setup, daemon)
}

/// `POST /runs/wait` of a fresh thread with a raw body and content type.
async fn post_run(daemon: &Daemon, content_type: &str, body: &str) -> reqwest::Response {
    let thread = daemon.create_thread(TOKEN_A).await;
    daemon
        .post(&format!("/api/threads/{thread}/runs/wait"), TOKEN_A)
        .header("content-type", content_type)
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

async fn upload(daemon: &Daemon, thread: &str, name: &str, bytes: &[u8]) -> Value {
    let form = reqwest::multipart::Form::new().part(
        "files",
        reqwest::multipart::Part::bytes(bytes.to_vec()).file_name(name.to_owned()),
    );
    let response = daemon
        .post(&format!("/api/threads/{thread}/uploads"), TOKEN_A)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_body_from_curl_d_is_415_saying_to_send_json() {
    let (_fake, _setup, daemon) = daemon().await;
    // What `curl -d '{"input": …}'` sends.
    let response = post_run(
        &daemon,
        "application/x-www-form-urlencoded",
        r#"{"input": {"messages": [{"role": "user", "content": "hi"}]}}"#,
    )
    .await;
    Daemon::expect_error(
        response,
        415,
        "unsupported_media_type",
        &["Content-Type: application/json", "curl"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_is_400_naming_the_syntax_error() {
    let (_fake, _setup, daemon) = daemon().await;
    let response = post_run(&daemon, "application/json", r#"{"input": {"messages": [}"#).await;
    Daemon::expect_error(
        response,
        400,
        "bad_request",
        &["json", "line 1", "fix the request"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_of_the_wrong_shape_is_422_naming_the_field() {
    let (_fake, _setup, daemon) = daemon().await;
    let response = post_run(
        &daemon,
        "application/json",
        r#"{"input": {"messages": "hello"}}"#,
    )
    .await;
    Daemon::expect_error(
        response,
        422,
        "invalid_body",
        &[
            "input.messages",
            "expected a sequence",
            "fix the named field",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_json_body_is_413_naming_the_limit() {
    let (_fake, _setup, daemon) = daemon().await;
    let big = json!({"name": "big", "soul": "x".repeat(1024 * 1024 + 10)});
    let response = daemon
        .post("/api/agents", TOKEN_A)
        .json(&big)
        .send()
        .await
        .unwrap();
    Daemon::expect_error(
        response,
        413,
        "payload_too_large",
        &["1 MiB", "send a smaller body"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_method_is_405_naming_the_allowed_ones() {
    let (_fake, _setup, daemon) = daemon().await;
    let response = daemon.delete("/api/models", TOKEN_A).send().await.unwrap();
    assert_eq!(response.headers()["allow"], "GET,HEAD");
    Daemon::expect_error(
        response,
        405,
        "method_not_allowed",
        &["DELETE is not allowed on /api/models", "use GET"],
    )
    .await;
    let response = daemon
        .http
        .put(daemon.url("/api/threads"))
        .bearer_auth(TOKEN_A)
        .send()
        .await
        .unwrap();
    Daemon::expect_error(response, 405, "method_not_allowed", &["POST"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsatisfiable_range_is_416_giving_the_file_size() {
    let (_fake, _setup, daemon) = daemon().await;
    let thread = daemon.create_thread(TOKEN_A).await;
    let stored = upload(&daemon, &thread, "ten.txt", b"0123456789").await;
    let url = stored["files"][0]["artifact_url"].as_str().unwrap();
    let response = daemon
        .get(url, TOKEN_A)
        .header("range", "bytes=100-200")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-range"], "bytes */10");
    Daemon::expect_error(
        response,
        416,
        "range_not_satisfiable",
        &["10 bytes", "bytes=0-9", "no Range header"],
    )
    .await;
    // A satisfiable range still works through the same layer.
    let ranged = daemon
        .get(url, TOKEN_A)
        .header("range", "bytes=2-4")
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), 206);
    assert_eq!(ranged.text().await.unwrap(), "234");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_uploads_and_unknown_paths_are_json_too() {
    let (_fake, _setup, daemon) = daemon().await;
    let thread = daemon.create_thread(TOKEN_A).await;
    // Not multipart at all: axum's own rejection.
    let response = daemon
        .post(&format!("/api/threads/{thread}/uploads"), TOKEN_A)
        .json(&json!({"files": []}))
        .send()
        .await
        .unwrap();
    Daemon::expect_error(
        response,
        400,
        "bad_request",
        &["boundary", "multipart/form-data", "-F 'files=@"],
    )
    .await;
    let response = daemon
        .get("/api/nothing-here", TOKEN_A)
        .send()
        .await
        .unwrap();
    Daemon::expect_error(response, 404, "not_found", &["README.md"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_urls_are_percent_encoded_and_serve_the_file() {
    let (_fake, _setup, daemon) = daemon().await;
    let thread = daemon.create_thread(TOKEN_A).await;
    for (name, encoded, bytes) in [
        (
            "report #1?.txt",
            "report%20%231%3F.txt",
            b"hash and question".as_slice(),
        ),
        ("100% done&more.txt", "100%25%20done%26more.txt", b"percent"),
        ("报告.md", "%E6%8A%A5%E5%91%8A.md", "# 报告".as_bytes()),
    ] {
        let stored = upload(&daemon, &thread, name, bytes).await;
        let file = &stored["files"][0];
        assert_eq!(file["filename"], name);
        assert_eq!(file["path"], format!("/mnt/user-data/uploads/{name}"));
        let url = file["artifact_url"].as_str().unwrap();
        assert_eq!(
            url,
            format!("/api/threads/{thread}/artifacts/mnt/user-data/uploads/{encoded}")
        );
        let served = daemon.get(url, TOKEN_A).send().await.unwrap();
        assert_eq!(served.status(), 200, "{url}");
        assert_eq!(&served.bytes().await.unwrap()[..], bytes, "{url}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlinks_get_errors_that_say_what_happened() {
    let (_fake, setup, daemon) = daemon().await;
    let thread = daemon.create_thread(TOKEN_A).await;
    let user_data = setup
        .data_dir()
        .join(format!("users/alice/threads/{thread}/user-data"));
    let secret = setup.dir.path().join("secret.txt");
    std::fs::write(&secret, "host secret").unwrap();
    for dir in ["outputs", "uploads"] {
        std::fs::create_dir_all(user_data.join(dir)).unwrap();
        std::os::unix::fs::symlink(&secret, user_data.join(dir).join("link.txt")).unwrap();
    }
    let host_path = setup.dir.path().to_str().unwrap().to_owned();

    let response = daemon
        .get(
            &format!("/api/threads/{thread}/artifacts/mnt/user-data/outputs/link.txt"),
            TOKEN_A,
        )
        .send()
        .await
        .unwrap();
    let message = Daemon::expect_error(
        response,
        403,
        "artifact_outside_thread",
        &[
            "/mnt/user-data/outputs/link.txt",
            "symlink",
            "outside this thread",
            "copy the file",
        ],
    )
    .await;
    assert!(!message.contains("must start with"), "{message}");
    assert!(!message.contains(&host_path), "{message}");

    let response = daemon
        .delete(&format!("/api/threads/{thread}/uploads/link.txt"), TOKEN_A)
        .send()
        .await
        .unwrap();
    let message = Daemon::expect_error(
        response,
        409,
        "upload_not_a_file",
        &["link.txt", "symlink", "left in place", "remove it"],
    )
    .await;
    assert!(!message.contains("refusing to write"), "{message}");
    assert!(!message.contains(&host_path), "{message}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "host secret");
    assert!(
        user_data
            .join("uploads/link.txt")
            .symlink_metadata()
            .is_ok()
    );
}
