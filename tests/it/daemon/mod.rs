//! Integration tests of the daemon: the real `antler` binary on an ephemeral port, a scripted
//! OpenAI-compatible fake model, and plain HTTP from the test.

mod agent_checks;
mod api;
mod approvals;
mod artifact_headers;
mod chat_commands;
pub(crate) mod cli;
mod cluster_runs;
mod connections;
mod conversion;
pub(crate) mod edge;
mod exposure;
mod http_errors;
mod leaks;
mod lifecycle;
mod locate;
mod mcp_api;
mod metrics;
mod model_trouble;
mod otel_traces;
mod prompt_budget;
mod reload;
mod run_errors;
mod schedule_task;
mod scheduled_slots;
mod schedules;
mod schedules_cli;
mod subagents;
mod systemd;
mod usage;
mod users;
mod web_chat;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;

pub(crate) const TOKEN_A: &str = "token-alice-0123456789";
pub(crate) const TOKEN_B: &str = "token-bob-0123456789";

/// A temp data dir + config for one daemon, reusable across restarts.
pub(crate) struct Setup {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) config_path: PathBuf,
}

impl Setup {
    /// `model_url` is the fake's `/v1` base URL; `extra` is appended YAML.
    pub(crate) fn new(model_url: &str, extra: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let config_path = dir.path().join("config.yaml");
        let yaml = format!(
            "config_version: 1\n\
             data_dir: {data}\n\
             models:\n  - name: fake\n    provider: openai\n    model: fake-model\n    base_url: {model_url}\n    timeout: 30\n\
             llm_call:\n  retry_max_attempts: 1\n\
             gateway:\n  listen: 127.0.0.1:0\n  shutdown_grace_seconds: 5\n  api_tokens:\n    - token: {TOKEN_A}\n      user: alice\n    - token: {TOKEN_B}\n      user: bob\n\
             {extra}",
            data = dir.path().join("data").display(),
        );
        std::fs::write(&config_path, yaml).expect("write config");
        Self { dir, config_path }
    }

    /// A daemon on loopback with no API tokens (the shipped default); `extra` is appended to
    /// the `gateway:` section.
    pub(crate) fn tokenless(model_url: &str, gateway_extra: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let config_path = dir.path().join("config.yaml");
        let yaml = format!(
            "config_version: 1\ndata_dir: {data}\n\
             models:\n  - name: fake\n    provider: openai\n    model: fake-model\n    base_url: {model_url}\n    timeout: 30\n\
             llm_call:\n  retry_max_attempts: 1\n\
             gateway:\n  listen: 127.0.0.1:0\n  shutdown_grace_seconds: 2\n{gateway_extra}",
            data = dir.path().join("data").display(),
        );
        std::fs::write(&config_path, yaml).expect("write config");
        Self { dir, config_path }
    }

    pub(crate) fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub(crate) fn start(&self) -> Daemon {
        Daemon::start(&self.config_path)
    }
}

/// A running `antler run` child process.
pub(crate) struct Daemon {
    child: Child,
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
    /// Where its runtime record goes unless the test names a place (`XDG_RUNTIME_DIR`).
    _runtime_dir: tempfile::TempDir,
}

impl Daemon {
    fn start(config: &Path) -> Self {
        Self::spawn(config, &[], None)
    }

    /// `antler --config <config> run` with extra environment variables; its log (stderr) goes
    /// to `log` when given, else to the test's stderr.
    pub(crate) fn spawn(config: &Path, env: &[(&str, &str)], log: Option<&Path>) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_antler"));
        command.arg("--config").arg(config).arg("run");
        Self::spawn_command(command, env, log)
    }

    /// Starts `command` (an `antler run`) and waits until it listens. Its runtime record (how
    /// the CLI finds it from elsewhere) goes to a directory of its own unless `env` names one
    /// with `XDG_RUNTIME_DIR`, never to the user's.
    pub(crate) fn spawn_command(
        mut command: Command,
        env: &[(&str, &str)],
        log: Option<&Path>,
    ) -> Self {
        let stderr = match log {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("create log file")),
            None => Stdio::inherit(),
        };
        let runtime_dir = tempfile::tempdir().expect("runtime dir");
        let mut child = command
            .env("XDG_RUNTIME_DIR", runtime_dir.path())
            .env("RUST_LOG", "warn")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn antler");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let base = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(url) = line.strip_prefix("antler listening on ") {
                        break url.trim().to_string();
                    }
                }
                _ => panic!("antler exited before it was ready"),
            }
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("http client");
        Self {
            child,
            base,
            http,
            _runtime_dir: runtime_dir,
        }
    }

    /// Checks an error answer: `status`, the `{"error": {"code", "message"}}` shape with
    /// `code`, and each of `needles` in the message (case-insensitive). Returns the message.
    pub(crate) async fn expect_error(
        response: reqwest::Response,
        status: u16,
        code: &str,
        needles: &[&str],
    ) -> String {
        assert_eq!(response.status(), status, "{}", response.url());
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(content_type, "application/json");
        let body: Value = response.json().await.expect("JSON error body");
        let error = body["error"].as_object().expect("an error object");
        assert_eq!(error.len(), 2, "only code and message: {body}");
        assert_eq!(error["code"], code, "{body}");
        let message = error["message"].as_str().expect("a message").to_owned();
        for needle in needles {
            assert!(
                message.to_lowercase().contains(&needle.to_lowercase()),
                "{needle:?} missing from {message:?}"
            );
        }
        message
    }

    /// The daemon's process id (its `/proc` entry).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub(crate) fn get(&self, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http.get(self.url(path)).bearer_auth(token)
    }

    pub(crate) fn post(&self, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http.post(self.url(path)).bearer_auth(token)
    }

    pub(crate) fn delete(&self, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http.delete(self.url(path)).bearer_auth(token)
    }

    /// Sends a signal (`"TERM"`, `"KILL"`, …) with kill(1): no unsafe code in tests.
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits for the process to exit and returns its exit code.
    pub(crate) fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// GETs `path` and parses the JSON body.
    pub(crate) async fn get_json(&self, path: &str, token: &str) -> Value {
        self.get(path, token)
            .send()
            .await
            .expect("GET request")
            .json()
            .await
            .expect("JSON body")
    }

    /// Starts `/runs/stream` with one human message and returns the open response.
    pub(crate) async fn start_stream(
        &self,
        token: &str,
        thread_id: &str,
        text: &str,
    ) -> reqwest::Response {
        let response = self
            .post(&format!("/api/threads/{thread_id}/runs/stream"), token)
            .json(&serde_json::json!({"input": {"messages": [{"role": "user", "content": text}]}}))
            .send()
            .await
            .expect("stream request");
        assert_eq!(response.status(), 200, "stream status");
        response
    }

    /// `GET /metrics` (open, no token), as text.
    pub(crate) async fn metrics(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text")
    }

    /// `GET /readyz` (open, no token), as JSON.
    pub(crate) async fn readyz(&self) -> Value {
        self.http
            .get(self.url("/readyz"))
            .send()
            .await
            .expect("readyz")
            .json()
            .await
            .expect("readyz json")
    }

    /// Sends `/runs/wait` with one human message and returns the answer, whatever its status.
    pub(crate) async fn run_wait(
        &self,
        token: &str,
        thread_id: &str,
        text: &str,
    ) -> reqwest::Response {
        self.post(&format!("/api/threads/{thread_id}/runs/wait"), token)
            .json(&serde_json::json!({"input": {"messages": [{"role": "user", "content": text}]}}))
            .send()
            .await
            .expect("wait request")
    }

    /// Creates a thread for `token`'s user and returns its id.
    pub(crate) async fn create_thread(&self, token: &str) -> String {
        let body: Value = self
            .post("/api/threads", token)
            .json(&serde_json::json!({}))
            .send()
            .await
            .expect("create thread")
            .json()
            .await
            .expect("thread json");
        body["thread_id"].as_str().expect("thread_id").to_string()
    }

    /// Streams a run and collects `(event, data)` pairs until `end`.
    pub(crate) async fn stream_run(
        &self,
        token: &str,
        thread_id: &str,
        text: &str,
    ) -> Vec<(String, Value)> {
        let response = self
            .post(&format!("/api/threads/{thread_id}/runs/stream"), token)
            .json(&serde_json::json!({"input": {"messages": [{"role": "user", "content": text}]}}))
            .send()
            .await
            .expect("stream request");
        assert_eq!(response.status(), 200, "stream status");
        collect_sse(response).await
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the log at `path` holds at least `count` lines containing `needle` and returns
/// those lines; panics after a minute. For what only the daemon's log shows (start it with
/// `RUST_LOG` at the line's level).
pub(crate) async fn log_lines(path: &Path, needle: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_string)
            .collect();
        if lines.len() >= count {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {count} log lines with {needle:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) async fn collect_sse(response: reqwest::Response) -> Vec<(String, Value)> {
    use eventsource_stream::Eventsource;
    let mut events = Vec::new();
    let mut stream = response.bytes_stream().eventsource();
    while let Some(event) = stream.next().await {
        let event = event.expect("sse event");
        let data: Value = serde_json::from_str(&event.data).unwrap_or(Value::String(event.data));
        let done = event.event == "end";
        events.push((event.event, data));
        if done {
            break;
        }
    }
    events
}
