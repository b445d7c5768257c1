//! Slack in Socket Mode end to end: threads, DMs, redeliveries, reconnects, long answers,
//! files both ways, slash commands and bad credentials.

use std::time::{Duration, Instant};

use antler_test_support::{
    FAKE_SLACK_BOT_USER, FakeOpenAi, FakeSlack, PostedMessage, Reply, dm_channel,
};
use serde_json::json;

use antler::channels::manager::QUEUED_NOTE;

use super::group_support::outside_quotes;
use super::slack_driver::slack_section;
use super::{Bot, WAIT, daemon_yaml};

const CHANNEL: &str = "C0000777";

async fn start(fake: &FakeSlack, model: &FakeOpenAi, dir: &std::path::Path, extra: &str) -> Bot {
    let extra = format!("    allowed_channels: [{CHANNEL}]\n{extra}");
    Bot::start(&daemon_yaml(dir, model, &slack_section(fake, &extra))).await
}

/// The turn of the message `ts` is over (its "answered" reaction is on), so a next message is
/// not queued behind it.
async fn wait_answered(fake: &FakeSlack, channel: &str, ts: &str) {
    let done = (
        channel.to_string(),
        ts.to_string(),
        "white_check_mark".to_string(),
    );
    fake.wait_for(WAIT, "the answered reaction", |f| {
        f.reactions().contains(&done)
    })
    .await;
}

/// The bot's public messages in `channel`, without "queued" notes (a message that arrives
/// while the previous turn is still finishing gets one; that is the daemon's, not Slack's).
fn posted_in(fake: &FakeSlack, channel: &str) -> Vec<PostedMessage> {
    fake.messages()
        .into_iter()
        .filter(|m| m.channel == channel && m.ephemeral_to.is_none() && m.text != QUEUED_NOTE)
        .collect()
}

fn answers(fake: &FakeSlack, channel: &str) -> Vec<String> {
    posted_in(fake, channel)
        .into_iter()
        .map(|m| m.text)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_is_answered_in_its_thread_and_follow_ups_continue_it() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "").await;
    fake.user_says_in_channel(CHANNEL, "U1", "chatter before", false, None);
    model.push(Reply::text("**Noted**: walnut"));
    // Slack sends both `app_mention` and `message` for this one message.
    let root = fake.user_says_in_channel(CHANNEL, "U1", "remember walnut", true, None);
    fake.wait_for(WAIT, "the answer", |f| {
        posted_in(f, CHANNEL)
            .iter()
            .any(|m| m.text == "*Noted*: walnut")
    })
    .await;
    wait_answered(&fake, CHANNEL, &root).await;
    model.push(Reply::text("it was walnut"));
    let follow_up = fake.user_says_in_channel(CHANNEL, "U2", "what was it?", false, Some(&root));
    // The thread's messages are handled in order: once the follow-up's turn is over, a second
    // answer to the mention pair would have come before it.
    wait_answered(&fake, CHANNEL, &follow_up).await;
    let posted = posted_in(&fake, CHANNEL);
    assert_eq!(posted.len(), 2, "one answer per question: {posted:?}");
    assert!(
        posted
            .iter()
            .all(|m| m.thread_ts.as_deref() == Some(root.as_str())),
        "replies go into the mention's thread: {posted:?}"
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "unaddressed chatter is not answered");
    assert!(
        requests[1].to_string().contains("walnut"),
        "one Antler thread per Slack thread"
    );
    assert!(
        !outside_quotes(&requests[0]).contains("chatter"),
        "chatter is quoted context at most"
    );
    // Reactions: received, then answered (the received one taken away).
    let reactions = fake.reactions();
    assert!(reactions.contains(&(CHANNEL.into(), root.clone(), "white_check_mark".into())));
    assert!(!reactions.contains(&(CHANNEL.into(), root.clone(), "eyes".into())));
    // A new top-level mention is a new conversation in its own thread.
    model.push(Reply::text("fresh"));
    let second = fake.user_says_in_channel(CHANNEL, "U1", "new topic", true, None);
    fake.wait_for(WAIT, "the new thread", |f| {
        posted_in(f, CHANNEL).iter().any(|m| m.text == "fresh")
    })
    .await;
    let fresh = posted_in(&fake, CHANNEL)
        .into_iter()
        .find(|m| m.text == "fresh");
    assert_eq!(fresh.and_then(|m| m.thread_ts), Some(second));
    assert!(
        !outside_quotes(&model.requests()[2]).contains("walnut"),
        "a new conversation; the channel's earlier messages are quoted context at most"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_keeps_one_thread_and_a_redelivered_envelope_is_answered_once() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "").await;
    let dm = dm_channel("U5");
    model.push(Reply::text("hello there"));
    let first = fake.user_says_dm("U5", "my name is Ann");
    fake.wait_for(WAIT, "the answer", |f| answers(f, &dm) == ["hello there"])
        .await;
    wait_answered(&fake, &dm, &first).await;
    fake.redeliver_last();
    model.push(Reply::text("you are Ann"));
    let second = fake.user_says_dm("U5", "who am I?");
    // The DM's messages are handled in order: once the second one's turn is over, anything
    // the redelivery could have started has run.
    wait_answered(&fake, &dm, &second).await;
    assert_eq!(answers(&fake, &dm), ["hello there", "you are Ann"]);
    assert!(
        posted_in(&fake, &dm).iter().all(|m| m.thread_ts.is_none()),
        "DM answers stay top-level"
    );
    assert!(model.requests()[1].to_string().contains("my name is Ann"));
    let envelopes = fake.envelopes();
    let copies: Vec<_> = envelopes
        .iter()
        .filter(|e| e.event_id == envelopes[0].event_id)
        .collect();
    assert_eq!(copies.len(), 2, "the redelivery reached the bot");
    assert!(
        copies.iter().all(|e| e.acked_at.is_some()),
        "both copies acknowledged"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_reconnects_after_closing_the_old_socket_and_nothing_is_processed_twice() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "").await;
    let dm = dm_channel("U6");
    model.push(Reply::text("before"));
    fake.user_says_dm("U6", "one");
    fake.wait_for(WAIT, "the first answer", |f| answers(f, &dm) == ["before"])
        .await;
    // Without debug_info: slack-morphism's listener would not even parse this.
    fake.disconnect_all(false);
    fake.wait_for(WAIT, "a second connection", |f| {
        f.connections()
            .iter()
            .filter(|c| c.hello_at.is_some())
            .count()
            == 2
    })
    .await;
    model.push(Reply::text("after"));
    fake.user_says_dm("U6", "two");
    fake.wait_for(WAIT, "the answer after reconnecting", |f| {
        answers(f, &dm) == ["before", "after"]
    })
    .await;
    let connections = fake.connections();
    let (old, new) = (&connections[0], &connections[1]);
    let closed = old.closed_at.expect("the old socket is closed");
    assert!(
        old.closed_by_client,
        "closed with a close frame, not dropped"
    );
    assert!(closed <= new.opened_at, "closed before the new one opened");
    assert_eq!(
        connections.iter().filter(|c| c.closed_at.is_none()).count(),
        1
    );
    assert_eq!(model.requests().len(), 2, "nothing processed twice");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_is_split_into_messages_in_the_thread() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "").await;
    let code: String = (0..250)
        .map(|i| format!("let value_{i} = {i} < {};\n", i + 1))
        .collect();
    let answer = format!("Here is the code:\n\n```rust\n{code}```\n\nDone & dusted.");
    model.push(Reply::text(&answer));
    let root = fake.user_says_in_channel(CHANNEL, "U1", "write code", true, None);
    fake.wait_for(WAIT, "the last chunk", |f| {
        posted_in(f, CHANNEL)
            .iter()
            .any(|m| m.text.ends_with("Done &amp; dusted."))
    })
    .await;
    let chunks = posted_in(&fake, CHANNEL);
    assert!(chunks.len() >= 3, "{} chunks", chunks.len());
    let limit = antler_slack::SLACK_PROFILE.max_text_len;
    for chunk in &chunks {
        assert_eq!(chunk.thread_ts.as_deref(), Some(root.as_str()));
        assert!(
            chunk.text.matches("```").count() % 2 == 0,
            "fences balanced: {:.60}",
            chunk.text
        );
        assert!(
            !chunk.text.contains("```rust"),
            "mrkdwn fences have no language"
        );
        // Escaping (`<` → `&lt;`) may lengthen a chunk, but never past Slack's 4,000.
        assert!(
            chunk.text.chars().count() <= limit + limit / 3,
            "chunk of {}",
            chunk.text.len()
        );
    }
    let lines: usize = chunks
        .iter()
        .map(|c| c.text.matches("let value_").count())
        .sum();
    assert_eq!(lines, 250, "nothing lost between chunks");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_in_reaches_the_agent_and_an_artifact_goes_out_into_the_thread() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "").await;
    let file = fake.add_file("notes.txt", "text/plain", b"meeting at noon".to_vec());
    model.push(Reply::tool_call(
        "write_file",
        json!({"path": "/mnt/user-data/outputs/report.md", "content": "# Report"}),
    ));
    model.push(Reply::tool_call(
        "present_files",
        json!({"filepaths": ["/mnt/user-data/outputs/report.md"]}),
    ));
    model.push(Reply::text("Report attached."));
    let root = fake.user_message(
        CHANNEL,
        "channel",
        "U1",
        &format!("<@{FAKE_SLACK_BOT_USER}> summarise this into a report"),
        None,
        json!({"subtype": "file_share", "files": [file]}),
    );
    fake.wait_for(WAIT, "the artifact", |f| !f.shared_files().is_empty())
        .await;
    let request = model.requests()[0].to_string();
    assert!(
        request.contains("/mnt/user-data/uploads/notes.txt"),
        "{request}"
    );
    let shared = &fake.shared_files()[0];
    assert_eq!(shared.title, "report.md");
    assert_eq!(shared.bytes, b"# Report");
    assert_eq!(shared.channel.as_deref(), Some(CHANNEL));
    assert_eq!(shared.thread_ts.as_deref(), Some(root.as_str()));
    let methods: Vec<String> = fake.calls().into_iter().map(|c| c.method).collect();
    let position = |m: &str| {
        methods
            .iter()
            .position(|x| x == m)
            .unwrap_or_else(|| panic!("{m} called"))
    };
    assert!(position("files.getUploadURLExternal") < position("files.completeUploadExternal"));
    assert!(
        !methods.iter().any(|m| m == "files.upload"),
        "never the retired files.upload"
    );
    // The thread is the channel's, not the sender's.
    let owner = std::fs::read_dir(dir.path().join("data/users"))
        .expect("users")
        .filter_map(Result::ok)
        .find(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("chat-slack-")
        })
        .expect("the chat's owner");
    let threads = owner.path().join("threads");
    let thread = std::fs::read_dir(&threads)
        .expect("threads")
        .next()
        .expect("a thread")
        .expect("entry");
    let stored = std::fs::read(thread.path().join("user-data/uploads/notes.txt")).expect("upload");
    assert_eq!(stored, b"meeting at noon");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_are_answered_ephemerally() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "").await;
    let dm = dm_channel("U8");
    // A "queued" note is the daemon's, not an answer (it comes only under load).
    let answers = |f: &FakeSlack| -> Vec<String> {
        f.messages()
            .into_iter()
            .filter(|m| m.ephemeral_to.as_deref() == Some("U8") && m.text != QUEUED_NOTE)
            .map(|m| m.text)
            .collect()
    };
    fake.slash_command(&dm, "U8", "new");
    fake.wait_for(WAIT, "the first answer", |f| answers(f).len() == 1)
        .await;
    fake.slash_command(&dm, "U8", "");
    fake.wait_for(WAIT, "two ephemeral answers", |f| answers(f).len() == 2)
        .await;
    let answers = answers(&fake);
    assert_eq!(answers[0], "New conversation started.");
    assert!(answers[1].starts_with("Available commands:"));
    assert!(fake.channel_texts(&dm).is_empty(), "nothing public");
    assert!(fake.envelopes().iter().all(|e| e.acked_at.is_some()));
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_stops_only_the_channel_with_a_clear_reason() {
    let fake = FakeSlack::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let section = slack_section(&fake, "").replace("xapp-fake-app-token", "xapp-revoked");
    let bot = Bot::start(&daemon_yaml(dir.path(), &model, &section)).await;
    let started = Instant::now();
    loop {
        let ready = bot.readyz().await;
        if ready["channels"]["slack"]["state"] == "unhealthy" {
            let reason = ready["channels"]["slack"]["reason"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            assert!(
                reason.contains("app_token") && reason.contains("invalid_auth"),
                "{reason}"
            );
            assert_eq!(ready["status"], "ready", "the daemon itself keeps serving");
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "the channel never became unhealthy: {ready}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        fake.connections().is_empty(),
        "no socket with a refused token"
    );
    bot.stop().await;
}
