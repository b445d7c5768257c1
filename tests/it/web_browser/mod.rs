//! The web chat in a real headless browser: Debian's `chromium` driven over WebDriver
//! (`chromedriver`, see [`webdriver`]) against the real daemon and the scripted model.
//!
//! Without chromium or chromedriver the tests say so loudly and pass, so a laptop without a
//! browser can run the suite; CI sets `ANTLER_REQUIRE_BROWSER=1` (see `.ci/run`, which installs
//! both) and there a missing browser fails. Screenshots of the main states go to
//! `<target dir>/webchat-screenshots/` for a person to look at.

mod answers;
mod approvals;
mod artifacts;
mod chat;
mod commands;
mod cross_site;
mod look;
mod schedules;
mod senders;
mod signin;
mod site;
mod threads;
mod webdriver;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::daemon::Daemon;
use webdriver::{ENTER, Element, Session};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "chromedriver";
/// How long a page condition may take (a loaded 2-core CI machine is slow).
const WAIT: Duration = Duration::from_secs(60);

/// A config for a daemon on loopback with no API tokens: the page acts as the local user.
pub(crate) struct Tokenless {
    dir: tempfile::TempDir,
}

impl Tokenless {
    pub(crate) fn new(model_url: &str) -> Self {
        Self::with_models(model_url, "")
    }

    /// `more_models`: YAML items appended to the `models:` list (after the default, `fake`).
    pub(crate) fn with_models(model_url: &str, more_models: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let yaml = format!(
            "config_version: 1\ndata_dir: {data}\n\
             models:\n  - name: fake\n    display_name: Fake model\n    provider: openai\n    model: fake-model\n    base_url: {model_url}\n    timeout: 30\n\
             {more_models}\
             llm_call:\n  retry_max_attempts: 1\n\
             gateway:\n  listen: 127.0.0.1:0\n  shutdown_grace_seconds: 2\n",
            data = dir.path().join("data").display(),
        );
        std::fs::write(dir.path().join("config.yaml"), yaml).expect("write config");
        Self { dir }
    }

    /// Adds `gateway.api_tokens` with `token` for `user` to the config file (a running daemon
    /// takes it on SIGHUP), as an operator who starts sharing the daemon does.
    pub(crate) fn add_token(&self, token: &str, user: &str) {
        let path = self.dir.path().join("config.yaml");
        let yaml = std::fs::read_to_string(&path).expect("read config");
        let tokens = format!("gateway:\n  api_tokens:\n    - token: {token}\n      user: {user}\n");
        std::fs::write(&path, yaml.replace("gateway:\n", &tokens)).expect("write config");
    }

    pub(crate) fn start(&self) -> Daemon {
        Daemon::spawn(&self.dir.path().join("config.yaml"), &[], None)
    }

    /// The daemon's local socket (the operator's way in, as the user `local`).
    pub(crate) fn socket(&self) -> PathBuf {
        self.dir.path().join("data/antler.sock")
    }

    /// The host directory of a thread's outputs (`/mnt/user-data/outputs`) for the local user.
    pub(crate) fn outputs(&self, thread: &str) -> PathBuf {
        self.dir
            .path()
            .join("data/users/local/threads")
            .join(thread)
            .join("user-data/outputs")
    }
}

/// A chromedriver process and one browser session.
pub(crate) struct Browser {
    pub(crate) session: Session,
    driver: Child,
    name: &'static str,
}

/// Starts a browser, or returns `None` (after saying why) when this machine has none and the
/// run does not require one.
pub(crate) async fn browser(name: &'static str) -> Option<Browser> {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|program| !on_path(program))
        .collect();
    if !missing.is_empty() {
        let message = format!(
            "{} not found: install Debian's chromium and chromium-driver to run the browser tests",
            missing.join(" and ")
        );
        if std::env::var_os("ANTLER_REQUIRE_BROWSER").is_some_and(|v| v == "1") {
            panic!("{message} (ANTLER_REQUIRE_BROWSER=1)");
        }
        eprintln!("\n!!!!!!!! SKIPPED browser test {name}: {message} !!!!!!!!\n");
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let driver = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn chromedriver");
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900", "--no-first-run", "--disable-extensions"],
        },
        "goog:loggingPrefs": {"browser": "ALL"},
    });
    let deadline = Instant::now() + WAIT;
    let session = loop {
        match Session::start(&format!("http://127.0.0.1:{port}"), capabilities.clone()).await {
            Ok(session) => break session,
            Err(e) if e.error == "transport" && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("chromedriver did not start a session: {e}"),
        }
    };
    Some(Browser {
        session,
        driver,
        name,
    })
}

fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).exists();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// `<target dir>/webchat-screenshots`, from the test binary's own path (`<target>/debug/deps/`).
pub(crate) fn screenshot_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let target = exe
        .ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    target.join("webchat-screenshots")
}

impl Browser {
    /// Opens `url` and waits until the page is ready for a message (its welcome note shows).
    pub(crate) async fn open_chat(&self, url: &str) {
        self.session.goto(url).await.expect("open page");
        self.wait("document.querySelector('.note')", "the welcome note")
            .await;
    }

    /// Evaluates `expression` in the page and returns its value.
    pub(crate) async fn js(&self, expression: &str) -> Value {
        self.session
            .execute(&format!("return ({expression});"))
            .await
            .unwrap_or_else(|e| panic!("script {expression:?} failed: {e}"))
    }

    /// Waits until `expression` is truthy in the page; on timeout saves a screenshot and fails.
    pub(crate) async fn wait(&self, expression: &str, what: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let value = self
                .session
                .execute(&format!("return !!({expression});"))
                .await
                .unwrap_or(Value::Bool(false));
            if value == Value::Bool(true) {
                return;
            }
            if Instant::now() > deadline {
                self.screenshot(&format!("{}-timeout", self.name)).await;
                let html = self.js("document.body.innerHTML").await;
                panic!("timed out waiting for {what} ({expression}); page: {html}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The element `selector` finds, waiting for it to appear.
    pub(crate) async fn find(&self, selector: &str) -> Element {
        let escaped = serde_json::to_string(selector).unwrap();
        self.wait(&format!("document.querySelector({escaped})"), selector)
            .await;
        self.session
            .find(selector)
            .await
            .unwrap_or_else(|e| panic!("no {selector}: {e}"))
    }

    pub(crate) async fn click(&self, selector: &str) {
        self.find(selector)
            .await
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {selector}: {e}"));
    }

    /// Types `text` into the message box and presses Enter.
    pub(crate) async fn say(&self, text: &str) {
        self.find("#input")
            .await
            .send_keys(&format!("{text}{ENTER}"))
            .await
            .expect("type");
    }

    /// Waits for the run to end (the Send button is back).
    pub(crate) async fn idle(&self) {
        self.wait(
            "!document.getElementById('send').hidden && document.querySelectorAll('.answer.streaming').length === 0",
            "the run to end",
        )
        .await;
    }

    /// Saves a PNG of the page as `<name>.png` in the screenshot directory.
    pub(crate) async fn screenshot(&self, name: &str) {
        let Ok(png) = self.session.screenshot().await else {
            return;
        };
        let dir = screenshot_dir();
        if std::fs::create_dir_all(&dir).is_ok() {
            let _ = std::fs::write(dir.join(format!("{name}.png")), png);
        }
    }

    /// The browser console's errors so far (chromedriver's log endpoint), minus `allowed`
    /// substrings (e.g. the 401 a token test provokes on purpose).
    pub(crate) async fn console_errors(&self, allowed: &[&str]) -> Vec<String> {
        let Ok(Value::Array(entries)) = self.session.browser_log().await else {
            return Vec::new();
        };
        entries
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .filter(|m| !allowed.iter().any(|a| m.contains(a)))
            .collect()
    }

    /// Fails on console errors, then ends the session.
    pub(crate) async fn finish(mut self, allowed: &[&str]) {
        let errors = self.console_errors(allowed).await;
        let _ = self.session.close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        assert!(errors.is_empty(), "console errors: {errors:#?}");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
