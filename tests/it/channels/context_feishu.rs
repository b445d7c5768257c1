//! Context before a mention on Feishu: the group's earlier messages from `im.message.list`
//! (one call per mention) reach the model once, quoted and in order; a later mention in the
//! reply chain reads only the chain's new messages; a missing permission (99991672) answers
//! without context and warns in `/readyz`.

use antler_test_support::{FakeFeishu, FakeOpenAi, FeishuFailure, Reply};
use serde_json::Value;

use super::context_slack::{blocks, lines, occurrences};
use super::feishu_driver::{feishu_section, webhook_url};
use super::group_support::user_texts;
use super::{Bot, WAIT, daemon_yaml};

const GROUP: &str = "oc_context0001";
const ANN: &str = "ou_ann0000000000000000000000000001";
const BOB: &str = "ou_bob0000000000000000000000000002";

async fn start() -> (FakeFeishu, FakeOpenAi, Bot, tempfile::TempDir) {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = format!("    allowed_chats: [{GROUP}]\n");
    let yaml = format!(
        "{}title:\n  enabled: false\n",
        daemon_yaml(dir.path(), &model, &feishu_section(&fake, &extra))
    );
    let bot = Bot::start(&yaml).await;
    fake.set_webhook(webhook_url(bot.addr));
    bot.readyz_until("feishu running", |r| {
        r["channels"]["feishu"]["state"] == "running"
    })
    .await;
    (fake, model, bot, dir)
}

async fn answered(fake: &FakeFeishu, model: &FakeOpenAi, text: &str) -> Vec<Value> {
    fake.wait_for(WAIT, text, |f| {
        f.chat_texts(GROUP).iter().any(|t| t == text)
    })
    .await;
    model.requests()
}

/// A block's lines with each author shown as `who`: the display name once the channel
/// resolves names, the open_id until then.
fn by(lines: Vec<String>, who: &[(&str, &str)]) -> Vec<String> {
    lines
        .into_iter()
        .map(|line| {
            who.iter().fold(line, |line, (open_id, name)| {
                line.replacen(&format!("{open_id}:"), &format!("{name}:"), 1)
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_said_before_a_feishu_mention_reaches_the_model_once_and_quoted() {
    let (fake, model, _bot, _dir) = start().await;
    let people = [(ANN, "Ann"), (BOB, "Bob")];
    fake.user_says_in_group(GROUP, ANN, "we should ship on friday", false, None);
    fake.user_says_in_group(GROUP, BOB, "the build is red though", false, None);
    fake.user_says_in_group(GROUP, ANN, "I'll fix it tonight", false, None);
    model.push(Reply::text("Friday, once the build is fixed."));
    let root = fake.user_says_in_group(GROUP, BOB, "what did we decide?", true, None);
    let requests = answered(&fake, &model, "Friday, once the build is fixed.").await;
    assert_eq!(requests.len(), 1);
    let found = blocks(&requests[0]);
    assert_eq!(found.len(), 1, "{:?}", user_texts(&requests[0]));
    assert!(
        user_texts(&requests[0]).last().is_some_and(|t| t
            .starts_with("<untrusted source=\"shared_context\" from=\"")
            && t.contains(&format!("\">\n{}\n</untrusted>\n\n", found[0]))
            && t.ends_with("what did we decide?")),
        "the block comes just before the mention, marked as other people's words"
    );
    assert_eq!(
        by(lines(&found[0]), &people),
        [
            "Ann: we should ship on friday",
            "Bob: the build is red though",
            "Ann: I'll fix it tonight"
        ]
    );
    assert_eq!(occurrences(&requests[0], "we should ship on friday"), 1);
    assert_eq!(fake.calls_of("im.message.list").len(), 1);

    // In the reply chain (messages without a mention in it would be answered as follow-ups,
    // so these reach the bot only through the list): only the chain's new messages.
    fake.said_without_event(GROUP, ANN, false, "QA needs a day", Some(&root));
    fake.said_without_event(GROUP, BOB, false, "unrelated: lunch?", None);
    fake.said_without_event(
        GROUP,
        "cli_ci0000000001",
        true,
        "nightly build passed",
        Some(&root),
    );
    model.push(Reply::text("Saturday, then."));
    fake.user_says_in_group(GROUP, BOB, "so when?", true, Some(&root));
    let requests = answered(&fake, &model, "Saturday, then.").await;
    let found = blocks(&requests[1]);
    assert_eq!(found.len(), 2, "the first block stays in the thread");
    let new_lines = by(lines(&found[1]), &people);
    assert_eq!(new_lines.len(), 2, "{new_lines:?}");
    assert_eq!(new_lines[0], "Ann: QA needs a day");
    assert!(
        new_lines[1].ends_with("(bot): nightly build passed"),
        "{new_lines:?}"
    );
    assert_eq!(occurrences(&requests[1], "we should ship on friday"), 1);
    assert_eq!(occurrences(&requests[1], "lunch"), 0, "not in the chain");
    assert_eq!(
        fake.calls_of("im.message.list").len(),
        2,
        "one call per mention"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_feishu_permission_answers_without_context_and_warns() {
    let (fake, model, bot, _dir) = start().await;
    fake.user_says_in_group(GROUP, ANN, "we should ship on friday", false, None);
    fake.fail_next(
        "im.message.list",
        FeishuFailure::Code(
            99991672,
            "Access denied. One of the following scopes is required: [im:message.group_msg]".into(),
        ),
    );
    model.push(Reply::text("Hello."));
    fake.user_says_in_group(GROUP, BOB, "hi", true, None);
    let requests = answered(&fake, &model, "Hello.").await;
    assert!(blocks(&requests[0]).is_empty());
    let ready = bot.readyz().await;
    assert!(
        ready["channels"]["feishu"]["warnings"]
            .to_string()
            .contains("im:message.group_msg"),
        "{ready}"
    );
}
