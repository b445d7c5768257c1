//! A Slack thread with two people in it (events mode): each turn runs as its sender. Ann starts
//! the conversation, Bob joins it: the history is shared and names who said what, but each
//! one's memory is read and written for them alone, each pays for their own turns, and only Ann
//! (or an admin) may start the conversation over. Direct messages work as before.

use antler_test_support::{
    FAKE_SLACK_BOT_USER, FAKE_SLACK_TEAM, FakeOpenAi, FakeSlack, Reply, Signing, SlackEventsClient,
    dm_channel,
};
use serde_json::{Value, json};

use super::group_support::{memory_update, request_mentions, usage_by_user, user_texts};
use super::slack_driver::slack_section;
use super::{Bot, WAIT, daemon_yaml};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const CHANNEL: &str = "C0000999";
const ANN: &str = "U0ANN0001";
const BOB: &str = "U0BOB0001";

struct Slack {
    fake: FakeSlack,
    model: FakeOpenAi,
    bot: Bot,
    client: SlackEventsClient,
    events: std::sync::atomic::AtomicU32,
    _dir: tempfile::TempDir,
}

impl Slack {
    async fn start() -> Self {
        let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
        fake.add_user(ANN, "Ann", "Ann Lee");
        fake.add_user(BOB, "Bob", "Bob Stone");
        let dir = tempfile::tempdir().expect("tempdir");
        let extra = format!(
            "    mode: events\n    signing_secret: \"{SECRET}\"\n    allowed_channels: [{CHANNEL}]\n"
        );
        let yaml = format!(
            "{}memory:\n  enabled: true\n  debounce_seconds: 1\n",
            daemon_yaml(dir.path(), &model, &slack_section(&fake, &extra))
        );
        let bot = Bot::start(&yaml).await;
        model.script_memory_updates();
        let client = SlackEventsClient::new(
            format!("http://{}/channels/slack/webhook", bot.addr),
            SECRET,
        );
        let deadline = tokio::time::Instant::now() + WAIT;
        while bot.readyz().await["channels"]["slack"]["state"] != "running" {
            assert!(tokio::time::Instant::now() < deadline, "slack never ready");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Self {
            fake,
            model,
            bot,
            client,
            events: Default::default(),
            _dir: dir,
        }
    }

    /// Posts `event` as Slack would; returns its `ts`.
    async fn post(&self, mut event: Value) -> String {
        let n = 1 + self
            .events
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let ts = format!("1700000{n:03}.000100");
        event["ts"] = json!(ts);
        let callback = json!({"token": "verification-token", "team_id": FAKE_SLACK_TEAM,
            "api_app_id": "A0FAKE01", "type": "event_callback", "event_id": format!("Ev{n}"),
            "event_time": 1_700_000_000, "event": event})
        .to_string();
        let (status, body) = self.client.post_json(&callback, Signing::Valid, None).await;
        assert_eq!(status, 200, "{body}");
        ts
    }

    /// `user` mentions the bot in the channel, in `thread` if given; returns the message's `ts`.
    async fn mention(&self, user: &str, text: &str, thread: Option<&str>) -> String {
        let mut event = json!({"type": "app_mention", "channel": CHANNEL, "user": user,
            "text": format!("<@{FAKE_SLACK_BOT_USER}> {text}")});
        if let Some(root) = thread {
            event["thread_ts"] = json!(root);
        }
        self.post(event).await
    }

    async fn dm(&self, user: &str, text: &str) {
        self.post(
            json!({"type": "message", "channel_type": "im", "channel": dm_channel(user),
            "user": user, "text": text}),
        )
        .await;
    }

    /// Waits for the bot's `count`th text in `channel` (1-based) to be `text`.
    async fn answered(&self, channel: &str, count: usize, text: &str) {
        self.fake
            .wait_for(WAIT, text, |f| {
                f.channel_texts(channel).get(count - 1).map(String::as_str) == Some(text)
            })
            .await;
    }

    /// Waits until the model has had `count` requests (the turn's, then its memory update).
    async fn requests(&self, count: usize) -> Vec<Value> {
        let model = &self.model;
        self.fake
            .wait_for(WAIT, "the model requests", |_| {
                model.requests().len() >= count
            })
            .await;
        model.requests()
    }
}

/// Bob asks for `/status` in the thread; its answer, the bot's `n`th text in the channel.
async fn status(slack: &Slack, root: &str, n: usize) -> String {
    slack.mention(BOB, "/status", Some(root)).await;
    slack
        .fake
        .wait_for(WAIT, "the status", |f| f.channel_texts(CHANNEL).len() >= n)
        .await;
    slack.fake.channel_texts(CHANNEL)[n - 1].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_speaker_in_a_slack_thread_has_their_own_memory_usage_and_name() {
    let slack = Slack::start().await;
    let (ann_dm, bob_dm) = (dm_channel(ANN), dm_channel(BOB));

    // Ann tells the bot about herself in private first.
    slack.model.push(Reply::text("Hello Ann!"));
    slack
        .model
        .push(memory_update(&[("Drinks green tea", "preference")]));
    slack.dm(ANN, "I'm Ann and I drink green tea").await;
    slack.answered(&ann_dm, 1, "Hello Ann!").await;
    let requests = slack.requests(2).await;
    assert_eq!(
        user_texts(&requests[0]).last().map(String::as_str),
        Some("I'm Ann and I drink green tea"),
        "a direct message has no name in front"
    );

    // Ann starts a conversation in the channel, Bob joins it in her thread.
    slack.model.push(Reply::text("Sure, Ann."));
    slack.model.push(memory_update(&[]));
    let root = slack.mention(ANN, "let's plan the offsite", None).await;
    slack.answered(CHANNEL, 1, "Sure, Ann.").await;
    let requests = slack.requests(4).await;
    assert_eq!(
        user_texts(&requests[2]).last().map(String::as_str),
        Some("[Ann] let's plan the offsite")
    );
    assert!(
        !request_mentions(&requests[2], "green tea"),
        "no personal memory in a shared conversation"
    );
    assert!(request_mentions(&requests[3], "let's plan the offsite"));

    slack.model.push(Reply::text("Hi Bob!"));
    slack
        .model
        .push(memory_update(&[("Has a dog named Rex", "context")]));
    slack
        .mention(BOB, "I am Bob and my dog is Rex", Some(&root))
        .await;
    slack.answered(CHANNEL, 2, "Hi Bob!").await;
    let requests = slack.requests(6).await;
    let texts = user_texts(&requests[4]);
    assert_eq!(
        texts[texts.len() - 2..],
        [
            "[Ann] let's plan the offsite".to_string(),
            "[Bob] I am Bob and my dog is Rex".to_string()
        ],
        "the model sees who speaks"
    );
    assert!(
        !request_mentions(&requests[4], "green tea"),
        "Ann's facts stay hers"
    );
    let bobs_update = &requests[5];
    assert!(request_mentions(bobs_update, "I am Bob and my dog is Rex"));
    assert!(
        !request_mentions(bobs_update, "offsite") && !request_mentions(bobs_update, "Sure, Ann."),
        "Bob's memory learns from Bob's messages only"
    );

    // Only the person who started the conversation (or an admin) may start it over.
    let before = status(&slack, &root, 3).await;
    assert!(before.starts_with("Active thread: "), "{before}");
    slack.mention(BOB, "/new", Some(&root)).await;
    slack
        .answered(
            CHANNEL,
            4,
            "Only Ann, who started this conversation, or an admin can start a new one here.",
        )
        .await;
    assert_eq!(
        status(&slack, &root, 5).await,
        before,
        "Bob's /new changed nothing"
    );
    slack.mention(ANN, "/new", Some(&root)).await;
    slack
        .answered(CHANNEL, 6, "New conversation started.")
        .await;
    let after = status(&slack, &root, 7).await;
    assert_ne!(after, before, "Ann's /new started a new one for everyone");

    // Direct messages: memory injected on a thread's first turn (in the system prompt), no
    // names. Ann's has her facts and not Bob's; Bob's has his.
    slack.dm(ANN, "/new").await;
    slack
        .answered(&ann_dm, 2, "New conversation started.")
        .await;
    slack.model.push(Reply::text("You like tea."));
    slack.model.push(memory_update(&[]));
    slack.dm(ANN, "what do you know about me?").await;
    slack.answered(&ann_dm, 3, "You like tea.").await;
    let requests = slack.requests(8).await;
    let ann_again = &requests[6];
    assert!(request_mentions(ann_again, "<memory>") && request_mentions(ann_again, "green tea"));
    assert!(
        !request_mentions(ann_again, "Rex"),
        "Bob's fact is not Ann's"
    );
    // In a direct message the memory block is the thread's, merged into the system prompt: the
    // person's message is theirs alone.
    let system = ann_again["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        ann_again["messages"][0]["role"] == "system"
            && system.contains("<memory>")
            && system.contains("green tea"),
        "{system}"
    );
    assert_eq!(
        user_texts(ann_again),
        ["what do you know about me?"],
        "a direct message: no memory in the person's words, no name"
    );
    slack.model.push(Reply::text("Hi."));
    slack.model.push(memory_update(&[]));
    slack.dm(BOB, "hello").await;
    slack.answered(&bob_dm, 1, "Hi.").await;
    let requests = slack.requests(10).await;
    assert!(request_mentions(&requests[8], "Has a dog named Rex"));
    assert!(!request_mentions(&requests[8], "green tea"));

    // Each paid for their own turns: Ann two DMs and one group turn, Bob one of each.
    let usage = usage_by_user(slack.bot.addr).await;
    assert_eq!(usage.get("slack-U0ANN0001"), Some(&3), "{usage:?}");
    assert_eq!(usage.get("slack-U0BOB0001"), Some(&2), "{usage:?}");
    let looked_up = slack.fake.calls_of("users.info").len();
    assert_eq!(looked_up, 2, "one users.info per person in the channel");
    slack.bot.stop().await;
}
