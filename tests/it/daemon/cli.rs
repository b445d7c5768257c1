//! The CLI next to a running daemon: `antler chat`, `agents` and `status` reach it through the
//! Unix socket in its data dir (the daemon holds the store's lock), and say so clearly when a
//! process holds the data dir without answering.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::{Setup, TOKEN_A};

/// Runs `antler --config CONFIG ARGS…` with `input` on stdin and waits for it.
pub(crate) async fn antler(config: &Path, args: &[&str], input: &str) -> Output {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_antler"))
        .arg("--config")
        .arg(config)
        .args(args)
        .env("XDG_RUNTIME_DIR", config.with_file_name("run"))
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn antler");
    let mut stdin = child.stdin.take().expect("stdin");
    // A command that refuses its arguments exits before reading stdin: the pipe is then closed.
    if let Err(e) = stdin.write_all(input.as_bytes()).await {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    drop(stdin);
    tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("antler finished in time")
        .expect("antler output")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn thread_id(stdout: &str) -> String {
    stdout
        .split_whitespace()
        .skip_while(|w| *w != "thread")
        .nth(1)
        .expect("a thread id")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_talks_to_the_running_daemon_through_its_socket() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::chunks(["Hello ", "through the daemon."]))
        .push(Reply::text("Resumed fine."));
    let setup = Setup::new(&fake.base_url(), "");
    let socket = setup.data_dir().join("antler.sock");
    let _daemon = setup.start();
    let meta = std::fs::symlink_metadata(&socket).expect("the daemon made its socket");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    let first = antler(&setup.config_path, &["chat"], "hi there\n").await;
    let out = stdout(&first);
    assert!(first.status.success(), "{out}\n{}", stderr(&first));
    assert!(out.contains("Talking to the running daemon"), "{out}");
    assert!(out.contains("Hello through the daemon."), "{out}");
    let thread = thread_id(&out);

    let again = antler(
        &setup.config_path,
        &["chat", "--thread", &thread],
        "once more\n",
    )
    .await;
    let out = stdout(&again);
    assert!(out.contains("Resumed fine."), "{out}\n{}", stderr(&again));
    assert!(!out.contains("No conversation has the id"), "{out}");
    // The resumed turn carried the first one's history.
    let contents = fake.requests().pop().expect("a model call")["messages"].to_string();
    assert!(
        contents.contains("hi there") && contents.contains("through the daemon"),
        "{contents}"
    );
    assert_eq!(fake.unscripted_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_thread_ids_are_checked_and_unknown_ones_are_announced() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("Fresh thread."));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();

    let bad = antler(
        &setup.config_path,
        &["chat", "--thread", "../../etc"],
        "hi\n",
    )
    .await;
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("invalid thread id \"../../etc\""),
        "{}",
        stderr(&bad)
    );

    let fresh = antler(
        &setup.config_path,
        &["chat", "--thread", "my-notes"],
        "hi\n",
    )
    .await;
    let out = stdout(&fresh);
    assert!(fresh.status.success(), "{out}\n{}", stderr(&fresh));
    assert!(
        out.contains("No conversation has the id my-notes yet: starting a new one under that id."),
        "{out}"
    );
    assert!(out.contains("Fresh thread."), "{out}");

    // Another user's thread is refused, not silently shared or shadowed.
    let alices = daemon.create_thread(TOKEN_A).await;
    let taken = antler(&setup.config_path, &["chat", "--thread", &alices], "hi\n").await;
    assert_eq!(taken.status.code(), Some(1));
    assert!(
        stderr(&taken).contains("belongs to another user"),
        "{}",
        stderr(&taken)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_managed_through_the_daemon_and_need_a_user_once_tokens_exist() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let soul = setup.dir.path().join("soul.md");
    std::fs::write(&soul, "You review pull requests.").unwrap();
    let config = &setup.config_path;

    let anonymous = antler(config, &["agents", "list"], "").await;
    assert_eq!(anonymous.status.code(), Some(2));
    let text = stderr(&anonymous);
    assert!(text.contains("--user is required"), "{text}");
    assert!(text.contains("alice, bob"), "{text}");

    let soul_arg = soul.to_str().unwrap();
    let created = antler(
        config,
        &[
            "agents",
            "create",
            "reviewer",
            "--user",
            "alice",
            "--soul-file",
            soul_arg,
            "--description",
            "Reviews",
        ],
        "",
    )
    .await;
    assert!(created.status.success(), "{}", stderr(&created));
    assert!(stdout(&created).starts_with("created agent 'reviewer' for user 'alice'"));

    let updated = antler(
        config,
        &[
            "agents",
            "update",
            "reviewer",
            "--user",
            "alice",
            "--description",
            "Reviews Rust",
            "--skills",
            "",
        ],
        "",
    )
    .await;
    assert!(updated.status.success(), "{}", stderr(&updated));
    assert_eq!(
        stdout(&updated),
        "updated agent 'reviewer' of user 'alice': description, skills; the replaced files are kept as version 000001\n"
    );
    let listed = antler(config, &["agents", "list", "--user", "alice"], "").await;
    assert!(
        stdout(&listed).contains("Reviews Rust"),
        "{}",
        stdout(&listed)
    );

    // The daemon serves the change to alice's token at once.
    let agent: Value = daemon.get_json("/api/agents/reviewer", TOKEN_A).await;
    assert_eq!(agent["agent"]["description"], "Reviews Rust");
    assert_eq!(agent["agent"]["skills"], serde_json::json!([]));

    let missing = antler(
        config,
        &[
            "agents", "update", "nobody", "--user", "alice", "--model", "fake",
        ],
        "",
    )
    .await;
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("no agent named 'nobody' for user 'alice'"),
        "{}",
        stderr(&missing)
    );
    let bad_model = antler(
        config,
        &[
            "agents", "update", "reviewer", "--user", "alice", "--model", "gpt-nope",
        ],
        "",
    )
    .await;
    assert!(
        stderr(&bad_model).contains("model 'gpt-nope' is not configured"),
        "{}",
        stderr(&bad_model)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_an_unreachable_model_while_the_daemon_stays_ready() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let setup = Setup::new(&format!("http://127.0.0.1:{port}/v1"), "");
    let daemon = setup.start();

    let status = antler(&setup.config_path, &["status"], "").await;
    let out = stdout(&status);
    assert!(status.status.success(), "{out}\n{}", stderr(&status));
    assert!(out.contains("daemon    ready"), "{out}");
    assert!(
        out.contains(&format!(
            "model     fake (openai fake-model) at http://127.0.0.1:{port}/v1: unreachable: cannot connect"
        )),
        "{out}"
    );
    assert!(out.contains("antler.sock"), "{out}");

    let response = daemon.http.get(daemon.url("/readyz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let ready: Value = response.json().await.unwrap();
    assert_eq!(ready["status"], "ready");
    assert_eq!(ready["model"]["reachable"], false);
    assert_eq!(ready["model"]["name"], "fake");
    assert!(ready["model"]["problem"].is_string(), "{ready}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_a_reachable_model() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let _daemon = setup.start();
    let status = antler(&setup.config_path, &["status"], "").await;
    let out = stdout(&status);
    assert!(
        out.contains(&format!(
            "model     fake (openai fake-model) at {}: reachable\n",
            fake.base_url()
        )),
        "{out}"
    );
    assert_eq!(fake.unscripted_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_goes_with_the_daemon_and_a_stale_one_is_replaced() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("Embedded answer."))
        .push(Reply::text("Daemon answer."));
    let setup = Setup::new(&fake.base_url(), "");
    let socket = setup.data_dir().join("antler.sock");

    let mut daemon = setup.start();
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)), Some(0));
    assert!(!socket.exists(), "a clean stop removes the socket");

    let mut daemon = setup.start();
    daemon.signal("KILL");
    daemon.wait_exit(Duration::from_secs(60));
    assert!(socket.exists(), "a killed daemon leaves its socket behind");
    // Nobody holds the data dir: chat opens it itself despite the stale socket.
    let alone = antler(&setup.config_path, &["chat"], "hello\n").await;
    let out = stdout(&alone);
    assert!(
        out.contains("Embedded answer."),
        "{out}\n{}",
        stderr(&alone)
    );
    assert!(!out.contains("Talking to the running daemon"), "{out}");

    let _daemon = setup.start();
    let through = antler(&setup.config_path, &["chat"], "hello\n").await;
    let out = stdout(&through);
    assert!(out.contains("Talking to the running daemon"), "{out}");
    assert!(out.contains("Daemon answer."), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_data_dir_without_an_answering_daemon_is_named_as_such() {
    let setup = Setup::new("http://127.0.0.1:9/v1", "");
    // This process holds the store, as a daemon that hangs (or predates the socket) would.
    let _held = antler_store::SledStore::open(setup.data_dir().join("store")).unwrap();
    for args in [&["chat"][..], &["agents", "list", "--user", "alice"][..]] {
        let output = antler(&setup.config_path, args, "hi\n").await;
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let text = stderr(&output);
        assert!(
            text.contains("is locked by another process") && text.contains("antler.sock"),
            "{args:?}: {text}"
        );
    }
    let status = antler(&setup.config_path, &["status"], "").await;
    assert_eq!(status.status.code(), Some(1));
    assert!(
        stdout(&status).contains("is locked by another process"),
        "{}",
        stdout(&status)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_socket_trusts_the_user_header() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    // Over TCP the header is no credential, and never overrides a token's user.
    let anonymous = daemon
        .http
        .get(daemon.url("/api/agents"))
        .header("x-antler-user", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let bob: Value = daemon
        .get("/api/agents", super::TOKEN_B)
        .header("x-antler-user", "alice")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bob["user"], "bob");

    // Over the socket: no token, the header names the user (default: local), checked as an id.
    let local = reqwest::Client::builder()
        .unix_socket(setup.data_dir().join("antler.sock"))
        .build()
        .unwrap();
    let as_user = |user: Option<&str>| {
        let request = local.get("http://localhost/api/agents");
        match user {
            Some(user) => request.header("x-antler-user", user),
            None => request,
        }
    };
    let alice: Value = as_user(Some("alice"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(alice["user"], "alice");
    let operator: Value = as_user(None).send().await.unwrap().json().await.unwrap();
    assert_eq!(operator["user"], "local");
    let bad = as_user(Some("../etc")).send().await.unwrap();
    assert_eq!(bad.status(), 400);
}
