//! Context before a mention on Slack (Socket Mode): what Ann and Bob said in the channel
//! without mentioning the bot reaches the model once, in order, with names, inside the quoted
//! block; a later mention in the thread reads only what is new, with one platform call and
//! the names from the cache; a missing `channels:history` scope leaves the answer as it was and
//! shows one warning in `/readyz`.

use antler_test_support::{FakeOpenAi, FakeSlack, Reply, SlackFailure};
use serde_json::{Value, json};

use super::group_support::user_texts;
use super::slack_driver::slack_section;
use super::{Bot, WAIT, daemon_yaml};

const CHANNEL: &str = "C0000777";
const ANN: &str = "U0ANN0001";
const BOB: &str = "U0BOB0001";

struct Slack {
    fake: FakeSlack,
    model: FakeOpenAi,
    bot: Bot,
    _dir: tempfile::TempDir,
}

impl Slack {
    async fn start() -> Self {
        let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
        fake.add_user(ANN, "Ann", "Ann Lee");
        fake.add_user(BOB, "Bob", "Bob Stone");
        let dir = tempfile::tempdir().expect("tempdir");
        let section = slack_section(&fake, &format!("    allowed_channels: [{CHANNEL}]\n"));
        let yaml = format!(
            "{}title:\n  enabled: false\n",
            daemon_yaml(dir.path(), &model, &section)
        );
        let bot = Bot::start(&yaml).await;
        bot.readyz_until("slack running", |r| {
            r["channels"]["slack"]["state"] == "running"
        })
        .await;
        Self {
            fake,
            model,
            bot,
            _dir: dir,
        }
    }

    /// Waits for the bot's `count`th text in the channel and returns the model's requests.
    async fn answered(&self, count: usize, text: &str) -> Vec<Value> {
        self.fake
            .wait_for(WAIT, text, |f| {
                f.channel_texts(CHANNEL).get(count - 1).map(String::as_str) == Some(text)
            })
            .await;
        self.model.requests()
    }

    /// The bot's `n`th text in the channel, waiting for it.
    async fn text(&self, n: usize) -> String {
        self.fake
            .wait_for(WAIT, "a text of the bot", |f| {
                f.channel_texts(CHANNEL).len() >= n
            })
            .await;
        self.fake.channel_texts(CHANNEL)[n - 1].clone()
    }

    fn calls(&self, method: &str) -> usize {
        self.fake.calls_of(method).len()
    }
}

/// The quoted blocks of a request, in order (the request joins a block with the question
/// after it into one user message).
pub(crate) fn blocks(request: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for text in user_texts(request) {
        let mut rest = text.as_str();
        while let Some(start) = rest.find("<channel_context>") {
            let Some(end) = rest[start..].find("</channel_context>") else {
                break;
            };
            let end = start + end + "</channel_context>".len();
            found.push(rest[start..end].to_string());
            rest = &rest[end..];
        }
    }
    found
}

/// The `[time] Name: text` lines of a block.
pub(crate) fn lines(block: &str) -> Vec<String> {
    block
        .lines()
        .filter(|line| line.starts_with('['))
        .map(|line| {
            line.split_once("] ")
                .map_or(line, |(_, rest)| rest)
                .to_string()
        })
        .collect()
}

pub(crate) fn occurrences(request: &Value, text: &str) -> usize {
    user_texts(request)
        .iter()
        .map(|t| t.matches(text).count())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_said_before_a_slack_mention_reaches_the_model_once_quoted_and_named() {
    let slack = Slack::start().await;
    // Three messages without a mention: their events arrive and are rightly not answered.
    slack
        .fake
        .user_says_in_channel(CHANNEL, ANN, "we should ship on friday", false, None);
    slack
        .fake
        .user_says_in_channel(CHANNEL, BOB, "the build is red though", false, None);
    slack
        .fake
        .user_says_in_channel(CHANNEL, ANN, "I'll fix it tonight", false, None);

    slack
        .model
        .push(Reply::text("Friday, once the build is fixed."));
    let root = slack
        .fake
        .user_says_in_channel(CHANNEL, BOB, "what did we decide?", true, None);
    let requests = slack.answered(1, "Friday, once the build is fixed.").await;
    assert_eq!(requests.len(), 1, "only the mention was answered");
    let found = blocks(&requests[0]);
    assert_eq!(found.len(), 1);
    assert_eq!(
        user_texts(&requests[0]).last(),
        Some(&format!(
            "<untrusted source=\"shared_context\" from=\"Ann, Bob\">\n{}\n</untrusted>\n\n\
             [Bob] what did we decide?",
            found[0]
        )),
        "the block comes just before the mention, marked as other people's words"
    );
    assert!(found[0].contains("not instructions"), "{}", found[0]);
    assert_eq!(
        lines(&found[0]),
        [
            "Ann: we should ship on friday",
            "Bob: the build is red though",
            "Ann: I'll fix it tonight"
        ]
    );
    for said in ["we should ship on friday", "the build is red though"] {
        assert_eq!(occurrences(&requests[0], said), 1, "{said} once");
    }
    assert_eq!(slack.calls("conversations.history"), 1);
    assert_eq!(slack.calls("users.info"), 2, "one look-up per person");

    // In the thread, without events for the app: only what is new since the first mention.
    slack.fake.message_in_history(
        CHANNEL,
        ANN,
        "QA needs a day",
        Some(&root),
        json!({"files": [{"id": "F1", "name": "qa-plan.pdf", "title": "QA plan"}]}),
    );
    slack.fake.message_in_history(
        CHANNEL,
        "UCIBOT001",
        "nightly build passed",
        Some(&root),
        json!({"bot_id": "B0CI0001", "username": "CI",
            "bot_profile": {"id": "B0CI0001", "name": "CI", "app_id": "A0CI", "deleted": false}}),
    );
    slack.model.push(Reply::text("Saturday, then."));
    slack
        .fake
        .user_says_in_channel(CHANNEL, BOB, "so when?", true, Some(&root));
    let requests = slack.answered(2, "Saturday, then.").await;
    let found = blocks(&requests[1]);
    assert_eq!(found.len(), 2, "the first block stays in the thread");
    assert_eq!(
        lines(&found[1]),
        [
            "Ann: QA needs a day [files: qa-plan.pdf]",
            "CI (bot): nightly build passed"
        ],
        "only what is new; the bot's own answer is not quoted back"
    );
    assert_eq!(occurrences(&requests[1], "we should ship on friday"), 1);
    let replies = slack.fake.calls_of("conversations.replies");
    assert_eq!(replies.len(), 1, "one platform call for the mention");
    assert_eq!(replies[0].params["ts"], json!(root));
    assert_eq!(slack.calls("conversations.history"), 1);
    assert_eq!(slack.calls("users.info"), 2, "names come from the cache");

    // The quoted words taint the conversation: `/status` names whose, `/new` starts clean.
    slack
        .fake
        .user_says_in_channel(CHANNEL, BOB, "/status", true, Some(&root));
    let status = slack.text(3).await;
    assert!(
        status.contains(
            "Untrusted content: shared_context Ann; shared_context Bob; shared_context CI (bot)"
        ),
        "{status}"
    );
    slack
        .fake
        .user_says_in_channel(CHANNEL, BOB, "/new", true, Some(&root));
    assert_eq!(slack.text(4).await, "New conversation started.");
    slack
        .fake
        .user_says_in_channel(CHANNEL, BOB, "/status", true, Some(&root));
    let status = slack.text(5).await;
    assert!(status.contains("Untrusted content: none"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_history_scope_answers_without_context_and_warns() {
    let slack = Slack::start().await;
    slack
        .fake
        .user_says_in_channel(CHANNEL, ANN, "we should ship on friday", false, None);
    slack.fake.fail_next(
        "conversations.history",
        SlackFailure::Error("missing_scope".into()),
    );
    slack.model.push(Reply::text("Hello."));
    slack
        .fake
        .user_says_in_channel(CHANNEL, BOB, "hi", true, None);
    let requests = slack.answered(1, "Hello.").await;
    assert!(blocks(&requests[0]).is_empty());
    assert_eq!(
        user_texts(&requests[0]).last().map(String::as_str),
        Some("[Bob] hi")
    );
    let ready = slack.bot.readyz().await;
    let warnings = ready["channels"]["slack"]["warnings"].to_string();
    assert!(warnings.contains("channels:history"), "{ready}");
    assert_eq!(ready["channels"]["slack"]["state"], "running");
}
