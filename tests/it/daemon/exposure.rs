//! A listener other hosts can reach (the Docker image's `ANTLER_LISTEN=0.0.0.0:8787`) with no
//! API tokens: the daemon starts, serves probes and channel webhooks, locks the API and the web
//! chat until a token is added, and `antler config check` says so.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Daemon, TOKEN_A};

/// The repository's `config.yaml`, the file the Docker image ships.
fn shipped_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config.yaml")
}

/// `antler config check <path>` with `env`; returns the exit code and stdout.
fn config_check(path: &Path, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_antler"))
        .args(["config", "check"])
        .arg(path)
        .env_remove("ANTLER_LISTEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_config_on_0_0_0_0_serves_probes_and_locks_the_api_until_a_token_is_added() {
    let dir = tempfile::tempdir().unwrap();
    // A copy, so the test can add a token the way an operator edits the file.
    let config = dir.path().join("config.yaml");
    std::fs::copy(shipped_config(), &config).unwrap();
    let home = dir.path().join("home");
    let log = dir.path().join("antler.log");
    let mut daemon = Daemon::spawn(
        &config,
        &[
            ("ANTLER_LISTEN", "0.0.0.0:0"),
            ("ANTLER_HOME", home.to_str().unwrap()),
        ],
        Some(&log),
    );
    assert!(
        daemon.base.starts_with("http://0.0.0.0:"),
        "{}",
        daemon.base
    );
    daemon.base = daemon.base.replace("0.0.0.0", "127.0.0.1");

    let warning = std::fs::read_to_string(&log).unwrap();
    for needle in ["locked", "gateway.api_tokens", "0.0.0.0"] {
        assert!(
            warning.contains(needle),
            "{needle:?} missing from the log:\n{warning}"
        );
    }

    for probe in ["/healthz", "/readyz"] {
        let response = daemon.http.get(daemon.url(probe)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{probe}");
    }
    // Channel webhooks pass the gate (they verify their own secrets); no channel is
    // listening here, so the route answers its own 404 saying so.
    let webhook = daemon
        .http
        .post(daemon.url("/channels/telegram/webhook"))
        .body("{}")
        .send()
        .await
        .unwrap();
    Daemon::expect_error(
        webhook,
        404,
        "channel_not_listening",
        &["channels.telegram"],
    )
    .await;

    let locked_paths = [
        "/",
        "/api/threads",
        "/api/models",
        "/api/threads/t1/state",
        "/no-such-page",
    ];
    for path in locked_paths {
        let response = daemon.http.get(daemon.url(path)).send().await.unwrap();
        Daemon::expect_error(
            response,
            401,
            "api_locked",
            &[
                "locked",
                "gateway.api_tokens",
                "Authorization: Bearer",
                "ANTLER_API_TOKEN",
                ".env beside docker-compose.yml",
            ],
        )
        .await;
    }
    // No token can open it while none is configured; a run cannot start either.
    let guessed = daemon.get("/api/threads", "anything").send().await.unwrap();
    Daemon::expect_error(guessed, 401, "api_locked", &[]).await;
    let run = daemon
        .post("/api/threads/t1/runs/wait", "anything")
        .json(&serde_json::json!({"input": {"messages": [{"role": "user", "content": "hi"}]}}))
        .send()
        .await
        .unwrap();
    Daemon::expect_error(run, 401, "api_locked", &[]).await;

    // Adding a token to the file unlocks the API without a restart.
    let yaml = std::fs::read_to_string(&config).unwrap();
    let with_token = yaml.replace(
        "  api_tokens: []",
        &format!("  api_tokens:\n    - token: {TOKEN_A}\n      user: alice"),
    );
    assert_ne!(yaml, with_token, "the shipped config has `api_tokens: []`");
    std::fs::write(&config, with_token).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let response = daemon.get("/api/threads", TOKEN_A).send().await.unwrap();
        if response.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "still {}", response.status());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let without = daemon
        .http
        .get(daemon.url("/api/threads"))
        .send()
        .await
        .unwrap();
    Daemon::expect_error(without, 401, "unauthorized", &["gateway.api_tokens"]).await;
    let page = daemon.http.get(daemon.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);

    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)), Some(0));
}

#[test]
fn config_check_warns_about_a_locked_api_and_fails_on_what_run_refuses() {
    let config = shipped_config();
    let home = tempfile::tempdir().unwrap();
    let home_env = ("ANTLER_HOME", home.path().to_str().unwrap());

    let (code, out) = config_check(&config, &[home_env]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("warning: gateway.listen"), "{out}");

    let (code, out) = config_check(&config, &[home_env, ("ANTLER_LISTEN", "0.0.0.0:8787")]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("config OK"), "{out}");
    let warning = out
        .lines()
        .find(|line| line.starts_with("warning: gateway.listen"))
        .unwrap_or_else(|| panic!("no locked-API warning in:\n{out}"));
    for needle in ["0.0.0.0:8787", "locked", "gateway.api_tokens", "/healthz"] {
        assert!(
            warning.contains(needle),
            "{needle:?} missing from {warning}"
        );
    }

    // `localhost` is what people type: accepted as the loopback address.
    let (code, out) = config_check(&config, &[home_env, ("ANTLER_LISTEN", "localhost:8787")]);
    assert_eq!(code, Some(0), "{out}");
    // An address `run` cannot use is a problem with its key path, exit 64, in both commands.
    let bad = [home_env, ("ANTLER_LISTEN", "example.invalid:8787")];
    let (code, out) = config_check(&config, &bad);
    assert_eq!(code, Some(64), "{out}");
    assert!(
        out.contains("gateway.listen: must be an ip address (or localhost) and port"),
        "{out}"
    );
    let run = Command::new(env!("CARGO_BIN_EXE_antler"))
        .arg("--config")
        .arg(&config)
        .arg("run")
        .envs(bad)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&run.stderr).contains("gateway.listen"));
}

/// The image's config and environment (`--config /etc/antler/config.yaml`, `ANTLER_HOME=/data`,
/// `ANTLER_LISTEN=0.0.0.0:8787`) with the compose file's one variable, `ANTLER_API_TOKEN`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_variable_unlocks_the_container_and_keeps_what_a_token_less_start_made() {
    let home = tempfile::tempdir().unwrap();
    let home_dir = home.path().to_str().unwrap();
    // First a token-less start on loopback: its threads belong to the user `local`.
    let mut first = Daemon::spawn(
        &shipped_config(),
        &[("ANTLER_LISTEN", "127.0.0.1:0"), ("ANTLER_HOME", home_dir)],
        None,
    );
    let thread = first.create_thread("none").await;
    first.signal("TERM");
    assert_eq!(first.wait_exit(Duration::from_secs(60)), Some(0));

    let token = "container-token-0123456789abcdef";
    let mut daemon = Daemon::spawn(
        &shipped_config(),
        &[
            ("ANTLER_LISTEN", "0.0.0.0:0"),
            ("ANTLER_HOME", home_dir),
            ("ANTLER_API_TOKEN", token),
        ],
        None,
    );
    daemon.base = daemon.base.replace("0.0.0.0", "127.0.0.1");
    let page = daemon.http.get(daemon.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200, "the web chat is served");
    let anonymous = daemon
        .http
        .get(daemon.url("/api/threads"))
        .send()
        .await
        .unwrap();
    Daemon::expect_error(anonymous, 401, "unauthorized", &[]).await;
    let threads = daemon.get_json("/api/threads", token).await;
    assert!(
        threads.to_string().contains(&thread),
        "the token-less start's thread stays visible: {threads}"
    );
    // The operator's own token keeps the operator's rights (an admin-only route).
    let mcp = daemon.get("/api/mcp/config", token).send().await.unwrap();
    assert_eq!(mcp.status(), 200);
    // The CLI on the same data dir acts as `local` without being told.
    let agents = Command::new(env!("CARGO_BIN_EXE_antler"))
        .arg("--config")
        .arg(shipped_config())
        .args(["agents", "list"])
        .env("ANTLER_HOME", home_dir)
        .env("ANTLER_API_TOKEN", token)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        agents.status.success(),
        "{}",
        String::from_utf8_lossy(&agents.stderr)
    );
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)), Some(0));
}
