//! Finding the daemon from anywhere: a daemon started in one directory on the embedded default
//! config is found by `chat`, `status` and `skills` run from another (through its runtime
//! record), its public skills come from the binary, a config file created after its start is
//! loaded and shown; `status` and `chat` need none of the config's secrets and keep working
//! after an edit the daemon rejected.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::{Daemon, Setup};

/// `antler ARGS…` in `cwd` with `env`, `input` on stdin. The variables that pick a config or a
/// data dir are cleared, so only what the test passes counts.
async fn antler_in(cwd: &Path, args: &[&str], env: &[(&str, &str)], input: &str) -> Output {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_antler"))
        .args(args)
        .current_dir(cwd)
        .env_remove("ANTLER_HOME")
        .env_remove("ANTLER_CONFIG")
        .env_remove("ANTLER_API_TOKEN")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn antler");
    let mut stdin = child.stdin.take().expect("stdin");
    let _ = stdin.write_all(input.as_bytes()).await;
    drop(stdin);
    tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("antler finished in time")
        .expect("antler output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `GET /readyz` over the daemon's socket (the operator's view: it names the config file).
async fn readyz_on(socket: &Path) -> Value {
    let client = reqwest::Client::builder()
        .unix_socket(socket)
        .build()
        .unwrap();
    client
        .get("http://localhost/readyz")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls `check` on the socket's `/readyz` until it holds (the watcher polls every 2 s).
async fn wait_for_readyz(socket: &Path, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = readyz_on(socket).await;
        if check(&answer) {
            return answer;
        }
        assert!(Instant::now() < deadline, "{what}: {answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_started_elsewhere_is_found_and_its_skills_come_from_the_binary() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call(
        "read_file",
        json!({"description": "guide", "path": "/mnt/skills/bootstrap/references/conversation-guide.md"}),
    ))
    .push(Reply::text("Let us begin."))
    .push(Reply::text("Found you from elsewhere."));
    let tmp = tempfile::tempdir().unwrap();
    let (home, elsewhere, run) = (
        tmp.path().join("home"),
        tmp.path().join("elsewhere"),
        tmp.path().join("run"),
    );
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let run_dir = run.to_str().unwrap();
    let model_url = fake.base_url();
    let log = tmp.path().join("daemon.log");
    // `antler run` in an empty directory: no config file, no ANTLER_HOME.
    let mut command = Command::new(env!("CARGO_BIN_EXE_antler"));
    command
        .arg("run")
        .current_dir(&home)
        .env_remove("ANTLER_HOME")
        .env_remove("ANTLER_CONFIG")
        .env_remove("ANTLER_API_TOKEN");
    let daemon = Daemon::spawn_command(
        command,
        &[
            ("ANTLER_MODEL_URL", model_url.as_str()),
            ("ANTLER_LISTEN", "127.0.0.1:0"),
            ("XDG_RUNTIME_DIR", run_dir),
            ("RUST_LOG", "info"),
        ],
        Some(&log),
    );
    let data_dir = home.join(".antler");
    let socket = data_dir.join("antler.sock");
    let started = std::fs::read_to_string(&log).unwrap();
    assert!(
        started.contains("config=<embedded default config>"),
        "{started}"
    );
    assert!(
        started.contains(&home.join("config.yaml").display().to_string()),
        "{started}"
    );

    // The bootstrap interview has its guide, though nothing was started from a checkout.
    let thread = daemon.create_thread("none").await;
    let done = daemon
        .post(&format!("/api/threads/{thread}/runs/wait"), "none")
        .json(&json!({
            "input": {"messages": [{"role": "user", "content": "Set up a helper"}]},
            "context": {"is_bootstrap": true, "agent_name": "helper"},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), 200);
    let requests = fake.requests();
    assert!(
        requests[0]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("<name>bootstrap</name>")
    );
    assert!(
        requests[1]["messages"]
            .to_string()
            .contains("Bootstrap conversation guide"),
        "the guide was read: {}",
        requests[1]["messages"]
    );

    let env = [("XDG_RUNTIME_DIR", run_dir)];
    let chat = antler_in(&elsewhere, &["chat"], &env, "hello\n").await;
    let (out, err) = (text(&chat.stdout), text(&chat.stderr));
    assert!(chat.status.success(), "{out}\n{err}");
    assert!(out.contains("Found you from elsewhere."), "{out}\n{err}");
    assert!(
        err.contains(&format!("antler: using the daemon on {}", socket.display())),
        "{err}"
    );
    assert!(!elsewhere.join(".antler").exists(), "no second data dir");

    let status = antler_in(&elsewhere, &["status"], &env, "").await;
    let out = text(&status.stdout);
    assert_eq!(status.status.code(), Some(0), "{out}");
    assert!(out.contains("config    <embedded default config>"), "{out}");
    assert!(
        out.contains(&format!("data dir  {}", data_dir.display())),
        "{out}"
    );

    let skills = antler_in(&elsewhere, &["skills", "list"], &env, "").await;
    let out = text(&skills.stdout);
    assert!(out.lines().any(|l| l.starts_with("bootstrap ")), "{out}");
    let public = data_dir.join("skills/public");
    assert!(
        out.contains(&format!("public skills from {}", public.display())),
        "{out}"
    );

    // A config file created now is loaded without a restart, and status names it.
    let config = home.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "config_version: 1\nmodels:\n  - name: created\n    model: fake-model\n    \
             base_url: {model_url}\ngateway:\n  listen: 127.0.0.1:0\n"
        ),
    )
    .unwrap();
    let config_text = config.display().to_string();
    wait_for_readyz(&socket, "the created config was loaded", |answer| {
        answer["config"] == config_text.as_str()
    })
    .await;
    let status = antler_in(&elsewhere, &["status"], &env, "").await;
    let out = text(&status.stdout);
    assert!(out.contains(&format!("config    {config_text}")), "{out}");
    assert!(out.contains("model     created"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_chat_need_no_secrets_and_survive_a_rejected_edit() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("No secrets needed."));
    // A secret only the service's environment has (a disabled channel still resolves it).
    let setup = Setup::new(
        &fake.base_url(),
        "channels:\n  telegram:\n    enabled: false\n    bot_token: $ANTLER_TEST_ONLY_THE_SERVICE_HAS\n",
    );
    let run_dir = setup.dir.path().join("run");
    let env = [("XDG_RUNTIME_DIR", run_dir.to_str().unwrap())];
    let daemon = Daemon::spawn(
        &setup.config_path,
        &[("ANTLER_TEST_ONLY_THE_SERVICE_HAS", "123:abc"), env[0]],
        None,
    );
    let cwd = setup.dir.path();
    let config = setup.config_path.to_str().unwrap();

    // The whole config cannot be loaded in this shell…
    let check = antler_in(cwd, &["config", "check", config], &env, "").await;
    assert_eq!(check.status.code(), Some(64));
    // …yet what talks to the daemon works.
    let status = antler_in(cwd, &["--config", config, "status"], &env, "").await;
    let out = text(&status.stdout);
    assert_eq!(
        status.status.code(),
        Some(0),
        "{out}{}",
        text(&status.stderr)
    );
    assert!(out.starts_with("daemon    ready\n"), "{out}");
    let chat = antler_in(cwd, &["--config", config, "chat"], &env, "hi\n").await;
    assert!(
        text(&chat.stdout).contains("No secrets needed."),
        "{}{}",
        text(&chat.stdout),
        text(&chat.stderr)
    );

    // An edit the daemon rejects (it keeps its config): status stays healthy and says so.
    let original = std::fs::read_to_string(&setup.config_path).unwrap();
    std::fs::write(
        &setup.config_path,
        format!("{original}no_such_key: 1\nrecursion_limit: lots\n"),
    )
    .unwrap();
    let socket = setup.data_dir().join("antler.sock");
    wait_for_readyz(&socket, "the edit was rejected", |answer| {
        answer["reload"]["outcome"] == "rejected"
    })
    .await;
    let status = antler_in(cwd, &["--config", config, "status"], &env, "").await;
    let out = text(&status.stdout);
    assert_eq!(status.status.code(), Some(0), "{out}");
    assert!(out.contains("reload    rejected"), "{out}");

    // Even YAML that does not parse: the daemon started with this file is found by its record.
    std::fs::write(&setup.config_path, "gateway: [unclosed\n").unwrap();
    let status = antler_in(cwd, &["--config", config, "status"], &env, "").await;
    let out = text(&status.stdout);
    assert_eq!(
        status.status.code(),
        Some(0),
        "{out}{}",
        text(&status.stderr)
    );
    assert!(
        out.contains(&format!("via       {}", socket.display())),
        "{out}"
    );
    drop(daemon);
}
