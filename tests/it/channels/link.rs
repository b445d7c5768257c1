//! One person across apps: a code issued in Telegram and used in Slack makes both accounts one
//! user (memory written from one is read from the other, the turn is paid by that user), a
//! wrong, reused or own code is refused, a group is no place for a code, and `/unlink` makes the
//! Slack account its own user again, with what it had before linking.

use antler_test_support::{
    FAKE_BOT_TOKEN, FAKE_SLACK_TEAM, FakeOpenAi, FakeSlack, FakeTelegram, Reply, Signing,
    SlackEventsClient, dm_channel, private_chat,
};
use serde_json::{Value, json};

use super::group_support::{memory_update, request_mentions, usage_by_user, user_texts};
use super::slack_driver::slack_section;
use super::{Bot, WAIT, daemon_yaml};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const CHANNEL: &str = "C0000777";
const ALICE_TG: i64 = 4242;
const ALICE_SLACK: &str = "U0ALICE01";
const EVE_SLACK: &str = "U0EVE0001";

struct Apps {
    telegram: FakeTelegram,
    slack: FakeSlack,
    model: FakeOpenAi,
    bot: Bot,
    client: SlackEventsClient,
    events: std::sync::atomic::AtomicU32,
    _dir: tempfile::TempDir,
}

impl Apps {
    async fn start() -> Self {
        let (telegram, slack, model) = (
            FakeTelegram::start().await,
            FakeSlack::start().await,
            FakeOpenAi::start().await,
        );
        slack.add_user(ALICE_SLACK, "alice", "Alice Doe");
        slack.add_user(EVE_SLACK, "eve", "Eve Black");
        let dir = tempfile::tempdir().expect("tempdir");
        let channels = format!(
            "  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {api}\n    poll_timeout: 1\n{slack}",
            api = telegram.api_url(),
            slack = slack_section(
                &slack,
                &format!(
                    "    mode: events\n    signing_secret: \"{SECRET}\"\n    allowed_channels: [{CHANNEL}]\n"
                )
            ),
        );
        let yaml = format!(
            "{}memory:\n  enabled: true\n  debounce_seconds: 1\n",
            daemon_yaml(dir.path(), &model, &channels)
        );
        let bot = Bot::start(&yaml).await;
        model.script_memory_updates();
        bot.readyz_until("both channels running", |ready| {
            ready["channels"]["slack"]["state"] == "running"
                && ready["channels"]["telegram"]["state"] == "running"
        })
        .await;
        let client = SlackEventsClient::new(
            format!("http://{}/channels/slack/webhook", bot.addr),
            SECRET,
        );
        Self {
            telegram,
            slack,
            model,
            bot,
            client,
            events: Default::default(),
            _dir: dir,
        }
    }

    /// `user` writes to the bot in a Slack direct message.
    async fn slack_dm(&self, user: &str, text: &str) {
        self.slack_event(json!({"type": "message", "channel_type": "im",
            "channel": dm_channel(user), "user": user, "text": text}))
            .await;
    }

    async fn slack_event(&self, mut event: Value) {
        let n = 1 + self
            .events
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        event["ts"] = json!(format!("1700000{n:03}.000100"));
        let callback = json!({"token": "verification-token", "team_id": FAKE_SLACK_TEAM,
            "api_app_id": "A0FAKE01", "type": "event_callback", "event_id": format!("Ev{n}"),
            "event_time": 1_700_000_000, "event": event})
        .to_string();
        let (status, body) = self.client.post_json(&callback, Signing::Valid, None).await;
        assert_eq!(status, 200, "{body}");
    }

    /// The bot's `count`th text in the Slack channel `channel` (1-based), once it is there.
    async fn slack_answer(&self, channel: &str, count: usize) -> String {
        self.slack
            .wait_for(WAIT, "the Slack answer", |f| {
                f.channel_texts(channel).len() >= count
            })
            .await;
        self.slack.channel_texts(channel)[count - 1].clone()
    }

    /// Waits for the bot's `count`th text in `channel` to be `text` (a turn's answer replaces
    /// its status message).
    async fn slack_answered(&self, channel: &str, count: usize, text: &str) {
        self.slack
            .wait_for(WAIT, text, |f| {
                f.channel_texts(channel).get(count - 1).map(String::as_str) == Some(text)
            })
            .await;
    }

    async fn telegram_turn(&self, text: &str, count: usize, answer: &str) {
        self.telegram
            .send_text(private_chat(ALICE_TG), ALICE_TG, text);
        self.telegram
            .wait_for(WAIT, answer, |f| {
                f.chat_texts(ALICE_TG).get(count - 1).map(String::as_str) == Some(answer)
            })
            .await;
    }

    async fn telegram_dm(&self, text: &str, count: usize) -> String {
        self.telegram
            .send_text(private_chat(ALICE_TG), ALICE_TG, text);
        self.telegram
            .wait_for(WAIT, "the Telegram answer", |f| {
                f.chat_texts(ALICE_TG).len() >= count
            })
            .await;
        self.telegram.chat_texts(ALICE_TG)[count - 1].clone()
    }

    async fn requests(&self, count: usize) -> Vec<Value> {
        let model = &self.model;
        self.slack
            .wait_for(WAIT, "the model requests", |_| {
                model.requests().len() >= count
            })
            .await;
        self.model.requests()
    }
}

/// The code in a `/link` answer (`ABCD-EFGH`).
fn code_in(text: &str) -> String {
    let code = regex::Regex::new(r"\b[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}\b").expect("regex");
    code.find(text)
        .unwrap_or_else(|| panic!("no code in {text:?}"))
        .as_str()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_from_telegram_makes_a_slack_account_the_same_user_until_unlinked() {
    let apps = Apps::start().await;
    let slack_dm = dm_channel(ALICE_SLACK);

    // Before linking, the Slack account is its own user with its own memory.
    apps.model.push(Reply::text("Hello from Slack."));
    apps.model
        .push(memory_update(&[("Reviews the Slack app", "context")]));
    apps.slack_dm(ALICE_SLACK, "I review the Slack app").await;
    apps.slack_answered(&slack_dm, 1, "Hello from Slack.").await;
    apps.requests(2).await;
    // The Telegram account learns something else.
    apps.model.push(Reply::text("Noted."));
    apps.model
        .push(memory_update(&[("Drinks green tea", "preference")]));
    apps.telegram_turn("I drink green tea", 1, "Noted.").await;
    apps.requests(4).await;

    // A code is asked for in Telegram; it is no good for Telegram itself.
    let answer = apps.telegram_dm("/link", 2).await;
    let code = code_in(&answer);
    assert!(answer.contains("telegram-4242"), "{answer}");
    let own = apps.telegram_dm(&format!("/link {code}"), 3).await;
    assert!(own.contains("issued for your own user"), "{own}");

    // Not in a group chat, where everyone would read it.
    apps.slack_event(
        json!({"type": "app_mention", "channel": CHANNEL, "user": ALICE_SLACK,
        "text": format!("<@{}> /link", antler_test_support::FAKE_SLACK_BOT_USER)}),
    )
    .await;
    let group = apps.slack_answer(CHANNEL, 1).await;
    assert!(group.contains("direct message"), "{group}");

    // A wrong code, then the right one from Slack.
    apps.slack_dm(ALICE_SLACK, "/link ZZZZ-ZZZZ").await;
    let wrong = apps.slack_answer(&slack_dm, 2).await;
    assert!(wrong.contains("not valid"), "{wrong}");
    apps.slack_dm(ALICE_SLACK, &format!("/link {}", code.to_lowercase()))
        .await;
    let linked = apps.slack_answer(&slack_dm, 3).await;
    assert!(
        linked.contains("slack:U0ALICE01 is now the same user as telegram:4242 (telegram-4242)"),
        "{linked}"
    );
    assert!(
        linked.contains("slack-U0ALICE01 (1 fact in memory, 1 thread) was not merged"),
        "the reply says what stays behind: {linked}"
    );
    // Someone else cannot use it again.
    apps.slack_dm(EVE_SLACK, &format!("/link {code}")).await;
    let reused = apps.slack_answer(&dm_channel(EVE_SLACK), 1).await;
    assert!(reused.contains("already used"), "{reused}");

    // From now on Slack is Telegram's user: its memory, its usage.
    apps.model.push(Reply::text("You drink green tea."));
    apps.model.push(memory_update(&[]));
    apps.slack_dm(ALICE_SLACK, "what do you know about me?")
        .await;
    apps.slack_answered(&slack_dm, 4, "You drink green tea.")
        .await;
    let requests = apps.requests(6).await;
    assert!(
        request_mentions(&requests[4], "green tea"),
        "Telegram's memory is read from Slack"
    );
    assert!(
        !request_mentions(&requests[4], "Reviews the Slack app"),
        "the account's old memory is not merged"
    );
    assert_eq!(
        user_texts(&requests[4]),
        ["what do you know about me?"],
        "a new thread of the linked user, not the old one's history"
    );
    let usage = usage_by_user(apps.bot.addr).await;
    assert_eq!(usage.get("telegram-4242"), Some(&2), "{usage:?}");
    assert_eq!(usage.get("slack-U0ALICE01"), Some(&1), "{usage:?}");

    // `/unlink`: the Slack account is its own user again, with its own memory.
    apps.slack_dm(ALICE_SLACK, "/unlink").await;
    let unlinked = apps.slack_answer(&slack_dm, 5).await;
    assert!(
        unlinked.contains("its own user again (slack-U0ALICE01)")
            && unlinked.contains("stay with telegram-4242"),
        "{unlinked}"
    );
    apps.model.push(Reply::text("You review the Slack app."));
    apps.model.push(memory_update(&[]));
    apps.slack_dm(ALICE_SLACK, "and now?").await;
    apps.slack_answered(&slack_dm, 6, "You review the Slack app.")
        .await;
    let requests = apps.requests(8).await;
    assert!(request_mentions(&requests[6], "Reviews the Slack app"));
    assert!(!request_mentions(&requests[6], "green tea"));
    apps.bot.stop().await;
}
