//! Other bots in a Slack channel (events mode): ignored unless listed in `allowed_bots` (by
//! bot id or bot user id); an allowed bot that keeps mentioning Antler in one thread is
//! answered `bot_turn_limit` times in a row, then not until a person speaks there; with
//! `require_mention_in_threads` a person's follow-up in the thread needs a mention too.

use antler_test_support::{
    FAKE_SLACK_BOT_USER, FAKE_SLACK_TEAM, FakeOpenAi, FakeSlack, Reply, Signing, SlackEventsClient,
};
use serde_json::{Value, json};

use antler::channels::manager::QUEUED_NOTE;

use super::slack_driver::slack_section;
use super::{Bot, WAIT, daemon_yaml};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const CHANNEL: &str = "C0000777";
const ANN: &str = "U0ANN0001";
/// The CI bot: its app's bot id and its bot user.
const CI_BOT: &str = "B0CI00001";
const CI_USER: &str = "U0CI00001";
/// A bot nobody allowed.
const NOISY_BOT: &str = "B0NOISY01";

struct Channel {
    fake: FakeSlack,
    model: FakeOpenAi,
    bot: Bot,
    client: SlackEventsClient,
    events: std::sync::atomic::AtomicU32,
    _dir: tempfile::TempDir,
}

impl Channel {
    async fn start(extra: &str) -> Self {
        let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
        fake.add_user(ANN, "Ann", "Ann Lee");
        let dir = tempfile::tempdir().expect("tempdir");
        let extra = format!(
            "    mode: events\n    signing_secret: \"{SECRET}\"\n    allowed_channels: [{CHANNEL}]\n{extra}"
        );
        let bot = Bot::start(&daemon_yaml(
            dir.path(),
            &model,
            &slack_section(&fake, &extra),
        ))
        .await;
        let client = SlackEventsClient::new(
            format!("http://{}/channels/slack/webhook", bot.addr),
            SECRET,
        );
        bot.readyz_until("slack running", |r| {
            r["channels"]["slack"]["state"] == "running"
        })
        .await;
        Self {
            fake,
            model,
            bot,
            client,
            events: Default::default(),
            _dir: dir,
        }
    }

    /// Posts `event` as Slack would and returns its `ts`; the daemon has decided whether to
    /// answer it (and journalled it if so) when this returns.
    async fn post(&self, mut event: Value) -> String {
        let n = 1 + self
            .events
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let ts = format!("1700000{n:03}.000100");
        event["ts"] = json!(ts);
        event["channel"] = json!(CHANNEL);
        event["channel_type"] = json!("channel");
        let callback = json!({"token": "verification-token", "team_id": FAKE_SLACK_TEAM,
            "api_app_id": "A0FAKE01", "type": "event_callback", "event_id": format!("Ev{n}"),
            "event_time": 1_700_000_000, "event": event})
        .to_string();
        let (status, body) = self.client.post_json(&callback, Signing::Valid, None).await;
        assert_eq!(status, 200, "{body}");
        ts
    }

    /// Ann writes in the thread `root` (a new top-level message without it).
    async fn ann(&self, text: &str, mention: bool, root: Option<&str>) -> String {
        let text = if mention {
            format!("<@{FAKE_SLACK_BOT_USER}> {text}")
        } else {
            text.to_string()
        };
        let mut event = json!({"type": "message", "user": ANN, "text": text});
        if let Some(root) = root {
            event["thread_ts"] = json!(root);
        }
        self.post(event).await
    }

    /// A bot's post mentioning Antler in the thread `root`, as an app posts it.
    async fn bot_says(&self, bot_id: &str, user: Option<&str>, text: &str, root: &str) {
        let mut event = json!({"type": "message", "bot_id": bot_id, "thread_ts": root,
            "text": format!("<@{FAKE_SLACK_BOT_USER}> {text}"),
            "bot_profile": {"id": bot_id, "name": "CI"}});
        if let Some(user) = user {
            event["user"] = json!(user);
        }
        self.post(event).await;
    }

    /// Waits until Antler's answers in the channel are `expected` (status messages finished,
    /// without the "queued" notes a message sent during a turn gets).
    async fn answers_are(&self, expected: &[&str]) {
        let answers = |fake: &FakeSlack| -> Vec<String> {
            fake.channel_texts(CHANNEL)
                .into_iter()
                .filter(|text| text != QUEUED_NOTE)
                .collect()
        };
        self.fake
            .wait_for(WAIT, &format!("the answers {expected:?}"), |f| {
                answers(f) == expected
            })
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_bot_is_answered_up_to_the_limit_and_again_after_a_person_speaks() {
    let slack = Channel::start(&format!(
        "    allowed_bots: [{CI_BOT}, U0OTHER01]\n    bot_turn_limit: 3\n"
    ))
    .await;
    slack.model.push(Reply::text("Watching the build."));
    let root = slack.ann("keep an eye on CI", true, None).await;
    let mut expected = vec!["Watching the build.".to_string()];
    slack.answers_are(&["Watching the build."]).await;

    // Not allowed: ignored, as bots always were.
    slack
        .bot_says(NOISY_BOT, Some("U0NOISY01"), "spam", &root)
        .await;
    // Allowed by its bot id (its bot user is not listed): three turns in a row.
    for n in 1..=3 {
        slack.model.push(Reply::text(format!("Seen failure {n}.")));
        slack
            .bot_says(CI_BOT, Some(CI_USER), &format!("build {n} failed"), &root)
            .await;
        expected.push(format!("Seen failure {n}."));
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        slack.answers_are(&expected).await;
    }
    // The fourth in a row is not answered: the webhook returned once the daemon decided.
    slack
        .bot_says(CI_BOT, Some(CI_USER), "build 4 failed", &root)
        .await;
    // A person speaks: answered, and the bot may be answered again.
    slack.model.push(Reply::text("Ann, I'm here."));
    slack.ann("still there?", true, Some(&root)).await;
    slack.model.push(Reply::text("Seen failure 5."));
    slack
        .bot_says(CI_BOT, Some(CI_USER), "build 5 failed", &root)
        .await;
    slack
        .answers_are(&[
            "Watching the build.",
            "Seen failure 1.",
            "Seen failure 2.",
            "Seen failure 3.",
            "Ann, I'm here.",
            "Seen failure 5.",
        ])
        .await;
    let asked: Vec<String> = slack
        .model
        .requests()
        .iter()
        .map(|request| request["messages"].to_string())
        .collect();
    assert_eq!(
        asked.len(),
        6,
        "the noisy bot and the 4th failure reached no model"
    );
    assert!(
        asked
            .iter()
            .all(|r| !r.contains("spam") && !r.contains("build 4 failed"))
    );
    assert!(
        asked[1].contains("[CI] build 1 failed"),
        "the bot is named like a person: {}",
        asked[1]
    );
    slack.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_is_allowed_by_its_bot_user_too_and_threads_can_require_mentions() {
    let slack = Channel::start(&format!(
        "    allowed_bots: [{CI_USER}]\n    require_mention_in_threads: true\n"
    ))
    .await;
    slack.model.push(Reply::text("On it."));
    let root = slack.ann("watch the deploy", true, None).await;
    slack.answers_are(&["On it."]).await;
    // A follow-up without a mention is not for the bot in this channel.
    slack.ann("and the staging one", false, Some(&root)).await;
    slack.model.push(Reply::text("Deploy noted."));
    slack
        .bot_says(CI_BOT, Some(CI_USER), "deploy done", &root)
        .await;
    slack.model.push(Reply::text("Staging too."));
    slack
        .ann("staging as well, please", true, Some(&root))
        .await;
    slack
        .answers_are(&["On it.", "Deploy noted.", "Staging too."])
        .await;
    // `/status` names who has spoken in the conversation, the bot among them.
    slack.ann("/status", true, Some(&root)).await;
    slack
        .fake
        .wait_for(WAIT, "the status", |f| {
            f.channel_texts(CHANNEL)
                .iter()
                .any(|t| t.starts_with("Active thread: "))
        })
        .await;
    let texts = slack.fake.channel_texts(CHANNEL);
    let status = texts.iter().find(|t| t.starts_with("Active thread: "));
    assert!(
        status.is_some_and(|t| t.ends_with("\nPeople: Ann, CI")),
        "{status:?}"
    );
    let requests = slack.model.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        !requests
            .iter()
            .any(|r| r.to_string().contains("and the staging one")),
        "the unmentioned follow-up reached no model"
    );
    slack.bot.stop().await;
}
