//! The coordinator against a hand-driven session board (the lifecycles' part), on paused time.

use super::*;
use crate::config::Secret;

const LIMIT: u64 = 30;

fn config(telegram: Option<&str>, slack: Option<&str>, model: &str) -> AppConfig {
    let mut config = AppConfig::default();
    config.channels.reload_connect_timeout_seconds = LIMIT;
    if let Some(token) = telegram {
        config.channels.telegram.enabled = true;
        config.channels.telegram.bot_token = Some(Secret::new(token));
    }
    if let Some(token) = slack {
        config.channels.slack.enabled = true;
        config.channels.slack.bot_token = Some(Secret::new(token));
    }
    config.channels.session.agent = Some(model.to_string());
    config
}

fn key(config: &AppConfig, name: &str) -> u64 {
    config.channels.section(name).unwrap().connection_key()
}

struct Rig {
    handle: ConfigHandle,
    board: SessionBoard,
    stop: CancellationToken,
}

impl Rig {
    /// A coordinator running on `start`, with its enabled channels connected.
    async fn start(start: AppConfig) -> Self {
        let board = SessionBoard::default();
        for section in start.channels.sections() {
            if section.enabled() {
                board.set(
                    section.name(),
                    section.connection_key(),
                    SessionPhase::Connected,
                );
            }
        }
        let handle = ConfigHandle::fixed(start);
        let stop = CancellationToken::new();
        let coordinator = ReloadCoordinator {
            config: handle.clone(),
            sessions: board.clone(),
        };
        tokio::spawn(coordinator.run(stop.clone()));
        tokio::task::yield_now().await;
        Self {
            handle,
            board,
            stop,
        }
    }

    /// Reloads `next` and returns it as the handle holds it.
    async fn reload(&self, next: AppConfig) -> Arc<AppConfig> {
        self.handle.replace(next);
        settle().await;
        self.handle.current()
    }

    fn agent(&self) -> String {
        self.handle
            .current()
            .channels
            .session
            .agent
            .clone()
            .unwrap()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_reload_that_restarts_no_channel_is_kept_at_once() {
    let rig = Rig::start(config(Some("a"), None, "one")).await;
    rig.reload(config(Some("a"), None, "two")).await;
    tokio::time::sleep(Duration::from_secs(LIMIT + 5)).await;
    assert_eq!(rig.agent(), "two");
    assert_eq!(rig.handle.last_reload(), None, "nothing was rolled back");
}

#[tokio::test(start_paused = true)]
async fn a_channel_that_connects_with_new_credentials_keeps_the_reload() {
    let rig = Rig::start(config(Some("a"), None, "one")).await;
    let next = rig.reload(config(Some("b"), None, "two")).await;
    rig.board
        .set("telegram", key(&next, "telegram"), SessionPhase::Connecting);
    tokio::time::sleep(Duration::from_secs(5)).await;
    rig.board
        .set("telegram", key(&next, "telegram"), SessionPhase::Connected);
    settle().await;
    tokio::time::sleep(Duration::from_secs(LIMIT + 5)).await;
    assert_eq!(rig.agent(), "two");
    assert_eq!(rig.handle.last_reload(), None);
}

#[tokio::test(start_paused = true)]
async fn a_refused_credential_restores_the_whole_previous_config() {
    let start = config(Some("a"), None, "one");
    let rig = Rig::start(start).await;
    let next = rig.reload(config(Some("refused"), None, "two")).await;
    rig.board.set(
        "telegram",
        key(&next, "telegram"),
        SessionPhase::Failed("telegram answered 401/404 for the bot token".into()),
    );
    settle().await;
    assert_eq!(
        rig.agent(),
        "one",
        "the model change of the failed edit went too"
    );
    let telegram = rig.handle.current().channels.telegram.bot_token.clone();
    assert_eq!(telegram.unwrap().expose(), "a");
    let record = rig.handle.last_reload().expect("a record");
    assert_eq!(record.outcome, "rolled_back");
    let detail = record.detail.unwrap();
    assert!(
        detail.contains("telegram: telegram answered 401"),
        "{detail}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_channel_still_retrying_at_the_limit_rolls_back() {
    let rig = Rig::start(config(Some("a"), None, "one")).await;
    let next = rig.reload(config(Some("b"), None, "two")).await;
    rig.board.set(
        "telegram",
        key(&next, "telegram"),
        SessionPhase::Retrying("connection refused".into()),
    );
    tokio::time::sleep(Duration::from_secs(LIMIT - 1)).await;
    assert_eq!(rig.agent(), "two", "still within the limit");
    tokio::time::sleep(Duration::from_secs(2)).await;
    settle().await;
    assert_eq!(rig.agent(), "one");
    let detail = rig.handle.last_reload().unwrap().detail.unwrap();
    assert!(
        detail.contains("telegram: not connected within 30 s (last error: connection refused)"),
        "{detail}"
    );
}

#[tokio::test(start_paused = true)]
async fn one_failing_channel_of_two_rolls_back_both() {
    let rig = Rig::start(config(Some("a"), Some("x"), "one")).await;
    let next = rig.reload(config(Some("b"), Some("y"), "two")).await;
    rig.board
        .set("slack", key(&next, "slack"), SessionPhase::Connected);
    settle().await;
    assert_eq!(rig.agent(), "two", "telegram has not answered yet");
    rig.board.set(
        "telegram",
        key(&next, "telegram"),
        SessionPhase::Failed("refused".into()),
    );
    settle().await;
    let now = rig.handle.current();
    assert_eq!(now.channels.slack.bot_token.as_ref().unwrap().expose(), "x");
    assert_eq!(
        now.channels.telegram.bot_token.as_ref().unwrap().expose(),
        "a"
    );
    let detail = rig.handle.last_reload().unwrap().detail.unwrap();
    assert!(
        detail.contains("telegram: refused") && !detail.contains("slack"),
        "{detail}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_newer_reload_is_judged_instead_and_a_fix_is_kept() {
    let rig = Rig::start(config(Some("a"), None, "one")).await;
    let broken = rig.reload(config(Some("typo"), None, "two")).await;
    tokio::time::sleep(Duration::from_secs(LIMIT - 5)).await;
    let fixed = rig.reload(config(Some("b"), None, "three")).await;
    // The broken session's failure no longer matters: its key is not the one in force.
    rig.board.set(
        "telegram",
        key(&broken, "telegram"),
        SessionPhase::Failed("refused".into()),
    );
    settle().await;
    assert_eq!(rig.agent(), "three");
    // The limit restarted with the newer reload.
    tokio::time::sleep(Duration::from_secs(10)).await;
    rig.board
        .set("telegram", key(&fixed, "telegram"), SessionPhase::Connected);
    settle().await;
    tokio::time::sleep(Duration::from_secs(LIMIT + 5)).await;
    assert_eq!(rig.agent(), "three");
    assert_eq!(rig.handle.last_reload(), None);
}

#[tokio::test(start_paused = true)]
async fn after_a_rollback_a_later_fixed_edit_applies() {
    let rig = Rig::start(config(Some("a"), None, "one")).await;
    let broken = rig.reload(config(Some("typo"), None, "two")).await;
    rig.board.set(
        "telegram",
        key(&broken, "telegram"),
        SessionPhase::Failed("refused".into()),
    );
    settle().await;
    assert_eq!(rig.agent(), "one");
    // The lifecycle reconnects with the old token.
    rig.board.set(
        "telegram",
        key(&rig.handle.current(), "telegram"),
        SessionPhase::Connected,
    );
    let fixed = rig.reload(config(Some("b"), None, "three")).await;
    rig.board
        .set("telegram", key(&fixed, "telegram"), SessionPhase::Connected);
    settle().await;
    tokio::time::sleep(Duration::from_secs(LIMIT + 5)).await;
    assert_eq!(rig.agent(), "three");
}

#[tokio::test(start_paused = true)]
async fn a_newly_enabled_channel_must_come_up_too() {
    let rig = Rig::start(config(None, None, "one")).await;
    let next = rig.reload(config(Some("b"), None, "two")).await;
    rig.board.set(
        "telegram",
        key(&next, "telegram"),
        SessionPhase::Failed("refused".into()),
    );
    settle().await;
    assert_eq!(rig.agent(), "one");
    assert!(!rig.handle.current().channels.telegram.enabled);
}
