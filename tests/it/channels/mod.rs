//! Channel layer end to end: the daemon in-process, the fake Telegram Bot API, the fake Slack,
//! the fake Discord or the fake Feishu, and the scripted OpenAI-compatible model.

mod agent_audit_telegram;
mod approvals_buttons;
mod approvals_telegram;
mod attachments;
mod bots_slack;
mod buttons_discord;
mod buttons_feishu;
mod buttons_slack;
mod buttons_support;
mod commands;
mod conformance;
mod context_discord;
mod context_feishu;
mod context_slack;
mod context_telegram;
mod discord;
mod discord_driver;
mod discord_gateway;
mod documents_chat;
mod feishu;
mod feishu_driver;
mod feishu_forgeries;
mod files_webhook;
mod group_agent;
mod group_discord;
mod group_migration;
mod group_slack;
mod group_support;
mod link;
mod names;
mod reload;
mod schedules_telegram;
mod slack;
mod slack_driver;
mod slack_events;
mod slack_transport;
mod speakers;
mod spoken_telegram;
mod telegram;
mod telegram_driver;
mod telegram_markup;
mod telegram_plan;
mod voice_platforms;
mod voice_telegram;
mod webhooks;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use antler::config::{ConfigHandle, ConfigOrigin, MapEnv, load_from_str};
use antler::daemon::{DaemonOptions, Shutdown, run};
use antler_convert::Program;
use antler_test_support::{FAKE_BOT_TOKEN, FakeOpenAi, FakeTelegram};
use serde_json::Value;

/// How long a test waits for something that should happen: generous, because a loaded machine
/// is slow, and free when things work, because every wait returns as soon as its event occurs.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// A daemon with Telegram enabled against `fake`, on `dir`. Restartable on the same dir.
pub(crate) struct Bot {
    pub(crate) addr: SocketAddr,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<()>,
}

/// A daemon config with a fake model and `channels_section` (the keys under `channels:`).
pub(crate) fn daemon_yaml(dir: &Path, model: &FakeOpenAi, channels_section: &str) -> String {
    format!(
        "config_version: 1\n\
         data_dir: {data}\n\
         models:\n  - name: fake\n    provider: openai\n    model: fake-model\n    base_url: {model_url}\n    timeout: 30\n  - name: other\n    provider: openai\n    model: other-model\n    base_url: {model_url}\n\
         llm_call:\n  retry_max_attempts: 1\n\
         sandbox:\n  provider: local\n\
         gateway:\n  listen: 127.0.0.1:0\n  shutdown_grace_seconds: 0\n\
         channels:\n{channels_section}",
        data = dir.join("data").display(),
        model_url = model.base_url(),
    )
}

/// A daemon with Telegram enabled against `fake`; `telegram_extra` adds keys to its section.
pub(crate) fn config_yaml(
    dir: &Path,
    fake: &FakeTelegram,
    model: &FakeOpenAi,
    telegram_extra: &str,
) -> String {
    let section = format!(
        "  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {api}\n    poll_timeout: 1\n{telegram_extra}",
        api = fake.api_url(),
    );
    daemon_yaml(dir, model, &section)
}

impl Bot {
    pub(crate) async fn start(yaml: &str) -> Self {
        Self::start_watching(yaml, None).await
    }

    /// A daemon reading `yaml`; with `config_path` (holding the same text) it reloads the file
    /// when it changes, as `antler run` does.
    pub(crate) async fn start_watching(yaml: &str, config_path: Option<&Path>) -> Self {
        let loaded =
            match load_from_str(yaml, ConfigOrigin::Embedded, &MapEnv::new(), Path::new("/")) {
                Ok(loaded) => loaded,
                Err(error) => panic!("bad test config: {error}\n{yaml}"),
            };
        let config = ConfigHandle::fixed(loaded.config);
        let shutdown = Shutdown::default();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let options = DaemonOptions {
            config_path: config_path.map(Path::to_path_buf),
            config_candidates: Vec::new(),
            env: Arc::new(MapEnv::new()),
            on_ready: Some(Box::new(move |addr| {
                let _ = ready_tx.send(addr);
            })),
            reload_signal: None,
            // The daemon runs inside this test binary: documents convert in the real one.
            converter: Some(Program::antler(env!("CARGO_BIN_EXE_antler"))),
        };
        let signals = shutdown.clone();
        let task = tokio::spawn(async move {
            if let Err(error) = run(config, options, signals).await {
                panic!("daemon failed: {error}");
            }
        });
        let addr = tokio::time::timeout(WAIT, ready_rx)
            .await
            .expect("daemon ready in time")
            .expect("daemon ready");
        Self {
            addr,
            shutdown,
            task,
        }
    }

    pub(crate) async fn stop(self) {
        self.shutdown.graceful.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("daemon stopped in time")
            .expect("daemon task");
    }

    pub(crate) async fn readyz(&self) -> Value {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client")
            .get(format!("http://{}/readyz", self.addr))
            .send()
            .await
            .expect("readyz")
            .json()
            .await
            .expect("readyz json")
    }

    /// Polls `/readyz` until `check` holds and returns that answer; panics after [`WAIT`].
    pub(crate) async fn readyz_until(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let ready = self.readyz().await;
            if check(&ready) {
                return ready;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}: {ready}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
