//! What the group-conversation tests of each platform read: the model requests, scripted
//! memory updates and `/api/usage`; and a Slack channel (events mode) with Ann and Bob in it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use antler_test_support::{
    FAKE_SLACK_BOT_USER, FAKE_SLACK_TEAM, FakeOpenAi, FakeSlack, Reply, Signing, SlackEventsClient,
    dm_channel,
};
use serde_json::{Value, json};

use super::slack_driver::slack_section;
use super::{Bot, WAIT, daemon_yaml};

pub(crate) const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
pub(crate) const SLACK_CHANNEL: &str = "C0000999";

/// The daemon with Slack in events mode, allowed in [`SLACK_CHANNEL`], memory on; Ann
/// (`U0ANN0001`) and Bob (`U0BOB0001`) are known to the fake. Restartable on its data dir.
pub(crate) struct SlackGroup {
    pub(crate) fake: FakeSlack,
    pub(crate) model: FakeOpenAi,
    bot: Option<Bot>,
    yaml: String,
    events: std::sync::atomic::AtomicU32,
    dir: tempfile::TempDir,
}

impl SlackGroup {
    /// `extra` adds top-level config keys (after `memory:`, whose keys it may continue).
    pub(crate) async fn start(extra: &str) -> Self {
        let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
        fake.add_user("U0ANN0001", "Ann", "Ann Lee");
        fake.add_user("U0BOB0001", "Bob", "Bob Stone");
        let dir = tempfile::tempdir().expect("tempdir");
        let section = format!(
            "    mode: events\n    signing_secret: \"{SLACK_SECRET}\"\n    allowed_channels: [{SLACK_CHANNEL}]\n"
        );
        let yaml = format!(
            "{}memory:\n  enabled: true\n  debounce_seconds: 1\n{extra}",
            daemon_yaml(dir.path(), &model, &slack_section(&fake, &section))
        );
        model.script_memory_updates();
        let mut slack = Self {
            fake,
            model,
            bot: None,
            yaml,
            events: Default::default(),
            dir,
        };
        slack.start_bot().await;
        slack
    }

    /// Starts the daemon (again) on the same data dir and waits for Slack to run.
    pub(crate) async fn start_bot(&mut self) {
        let bot = Bot::start(&self.yaml).await;
        let deadline = tokio::time::Instant::now() + WAIT;
        while bot.readyz().await["channels"]["slack"]["state"] != "running" {
            assert!(tokio::time::Instant::now() < deadline, "slack never ready");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        self.bot = Some(bot);
    }

    pub(crate) async fn stop(&mut self) {
        if let Some(bot) = self.bot.take() {
            bot.stop().await;
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.bot.as_ref().expect("the daemon runs").addr
    }

    /// The daemon's data dir (`data_dir:` of its config).
    pub(crate) fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Posts `event` as Slack would; returns its `ts`.
    pub(crate) async fn post(&self, mut event: Value) -> String {
        let n = 1 + self
            .events
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let ts = format!("1700000{n:03}.000100");
        event["ts"] = json!(ts);
        let callback = json!({"token": "verification-token", "team_id": FAKE_SLACK_TEAM,
            "api_app_id": "A0FAKE01", "type": "event_callback", "event_id": format!("Ev{n}"),
            "event_time": 1_700_000_000, "event": event})
        .to_string();
        let client = SlackEventsClient::new(
            format!("http://{}/channels/slack/webhook", self.addr()),
            SLACK_SECRET,
        );
        let (status, body) = client.post_json(&callback, Signing::Valid, None).await;
        assert_eq!(status, 200, "{body}");
        ts
    }

    /// `user` mentions the bot in the channel, in `thread` if given; returns the message's `ts`.
    pub(crate) async fn mention(&self, user: &str, text: &str, thread: Option<&str>) -> String {
        let mut event = json!({"type": "app_mention", "channel": SLACK_CHANNEL, "user": user,
            "text": format!("<@{FAKE_SLACK_BOT_USER}> {text}")});
        if let Some(root) = thread {
            event["thread_ts"] = json!(root);
        }
        self.post(event).await
    }

    /// `user` answers in the thread of `root` without mentioning the bot.
    pub(crate) async fn reply(&self, user: &str, text: &str, root: &str) -> String {
        self.post(
            json!({"type": "message", "channel_type": "channel", "channel": SLACK_CHANNEL,
            "user": user, "text": text, "thread_ts": root}),
        )
        .await
    }

    pub(crate) async fn dm(&self, user: &str, text: &str) {
        self.post(
            json!({"type": "message", "channel_type": "im", "channel": dm_channel(user),
            "user": user, "text": text}),
        )
        .await;
    }

    /// Waits for the bot's `count`th text in `channel` (1-based) to be `text`.
    pub(crate) async fn answered(&self, channel: &str, count: usize, text: &str) {
        self.fake
            .wait_for(WAIT, text, |f| {
                f.channel_texts(channel).get(count - 1).map(String::as_str) == Some(text)
            })
            .await;
    }

    /// The bot's `count`th text in `channel` once it is not the status message any more.
    pub(crate) async fn text(&self, channel: &str, count: usize) -> String {
        let final_text = |f: &FakeSlack| {
            f.channel_texts(channel)
                .get(count - 1)
                .filter(|t| !t.starts_with("Working on it"))
                .cloned()
        };
        self.fake
            .wait_for(WAIT, "the bot's text", |f| final_text(f).is_some())
            .await;
        final_text(&self.fake).unwrap_or_default()
    }

    /// Waits until the model has had `count` requests (the turn's, then its memory update).
    pub(crate) async fn requests(&self, count: usize) -> Vec<Value> {
        let model = &self.model;
        self.fake
            .wait_for(WAIT, "the model requests", |_| {
                model.requests().len() >= count
            })
            .await;
        model.requests()
    }
}

/// A memory update adding `facts` (content, category), each confident enough to be kept.
pub(crate) fn memory_update(facts: &[(&str, &str)]) -> Reply {
    let facts: Vec<Value> = facts
        .iter()
        .map(|(content, category)| {
            json!({"content": content, "category": category, "confidence": 0.95})
        })
        .collect();
    Reply::text(json!({ "newFacts": facts }).to_string())
}

/// The text of every user message of a chat-completions request, in order.
pub(crate) fn user_texts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == "user")
        .filter_map(|message| message["content"].as_str().map(str::to_string))
        .collect()
}

/// Whether `text` occurs anywhere in a request (its prompt and every message).
pub(crate) fn request_mentions(request: &Value, text: &str) -> bool {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|message| message["content"].to_string().contains(text))
}

/// Runs per user today, from `GET /api/usage` (the local operator sees everyone's).
pub(crate) async fn usage_by_user(addr: SocketAddr) -> HashMap<String, u64> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    runs_ended(&client, addr).await;
    let usage: Value = client
        .get(format!("http://{addr}/api/usage"))
        .send()
        .await
        .expect("usage")
        .json()
        .await
        .expect("usage json");
    let mut runs = HashMap::new();
    // The lead agent's calls: one per turn here (titles and memory updates are metered too).
    let lead_rows = usage["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|row| row["kind"] == "lead");
    for row in lead_rows {
        let user = row["user_id"].as_str().unwrap_or_default().to_string();
        *runs.entry(user).or_default() += row["runs"].as_u64().unwrap_or(0);
    }
    runs
}

/// Waits (10 s at most) until no run is in flight: a run's usage is saved as it ends, just
/// after its answer reached the chat, so reading it at once races the run's last step.
async fn runs_ended(client: &reqwest::Client, addr: SocketAddr) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let metrics = client
            .get(format!("http://{addr}/metrics"))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        if metrics
            .lines()
            .any(|line| line == r#"antler_queue_depth{queue="runs_in_flight"} 0"#)
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "runs still in flight after 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A request as text with the quoted blocks of earlier messages (other people's words inside
/// `<untrusted source="shared_context" …>`) left out: what reached the model as anyone's own
/// turn.
pub(crate) fn outside_quotes(request: &Value) -> String {
    const START: &str = r#"<untrusted source=\"shared_context\""#;
    const END: &str = "</untrusted>";
    let mut text = request.to_string();
    while let Some(start) = text.find(START) {
        let end = text[start..]
            .find(END)
            .map_or(text.len(), |end| start + end + END.len());
        text.replace_range(start..end, "");
    }
    text
}
