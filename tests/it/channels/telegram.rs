//! Telegram through the real adapter (teloxide) against the fake Bot API.

use std::time::Duration;

use antler_test_support::{
    BotFailure, FakeOpenAi, FakeTelegram, Gate, Reply, group_chat, private_chat,
};
use serde_json::json;

use antler::channels::manager::QUEUED_NOTE;

use super::{Bot, WAIT, config_yaml};

const FINAL: &str = "Hello there, this is a streamed answer.";

fn streamed_answer() -> Reply {
    Reply::slow(
        ["Hello", " there,", " this is", " a streamed", " answer."],
        Duration::from_millis(350),
    )
}

pub(crate) async fn setup_bot(extra: &str) -> (FakeTelegram, FakeOpenAi, tempfile::TempDir, Bot) {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = Bot::start(&config_yaml(dir.path(), &fake, &model, extra)).await;
    (fake, model, dir, bot)
}

pub(crate) fn has_text(fake: &FakeTelegram, chat: i64, text: &str) -> bool {
    fake.chat_texts(chat).iter().any(|t| t == text)
}

/// The bot's messages in `chat` without the "queued" note, which a message sent right after an
/// answer gets when the previous turn is still finishing on a slow machine.
fn answers(fake: &FakeTelegram, chat: i64) -> Vec<String> {
    fake.chat_texts(chat)
        .into_iter()
        .filter(|text| text != QUEUED_NOTE)
        .collect()
}

/// How many status messages ("Working on it…") the bot sent.
fn status_messages(fake: &FakeTelegram) -> usize {
    fake.calls_of("sendMessage")
        .iter()
        .filter(|call| call.body["text"] == "Working on it…")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_chat_streams_into_the_status_message_then_answers() {
    let (fake, model, _dir, bot) = setup_bot("").await;
    model.push(streamed_answer());
    let message_id = fake.send_text(private_chat(42), 42, "hi");
    fake.wait_for(WAIT, "the final answer", |f| has_text(f, 42, FINAL))
        .await;

    let sends = fake.calls_of("sendMessage");
    assert_eq!(
        sends.len(),
        1,
        "only the status message is sent; the answer edits it"
    );
    assert_eq!(sends[0].body["text"], "Working on it…");
    assert_eq!(sends[0].body["reply_parameters"]["message_id"], message_id);
    let edits = fake.calls_of("editMessageText");
    let streaming: Vec<_> = edits
        .iter()
        .filter(|e| e.body["text"].as_str().is_some_and(|t| t.ends_with(" ▉")))
        .collect();
    assert!(
        !streaming.is_empty(),
        "the growing answer is shown with a cursor"
    );
    for pair in streaming.windows(2) {
        assert!(
            pair[1].at - pair[0].at >= Duration::from_millis(900),
            "edits at most every second"
        );
    }
    assert_eq!(
        edits.last().map(|e| e.body["text"].clone()),
        Some(json!(FINAL))
    );
    assert!(
        !fake.calls_of("sendChatAction").is_empty(),
        "typing indicator while working"
    );
    // The user's text reached the model.
    let request = model.requests().pop().expect("model request");
    assert!(request.to_string().contains("hi"));
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_starts_a_fresh_thread_and_status_shows_it() {
    let (fake, model, _dir, bot) = setup_bot("").await;
    model.push(Reply::text("first answer"));
    fake.send_text(private_chat(7), 7, "hello");
    fake.wait_for(WAIT, "first answer", |f| has_text(f, 7, "first answer"))
        .await;
    fake.send_text(private_chat(7), 7, "/status");
    fake.wait_for(WAIT, "status", |f| {
        f.chat_texts(7)
            .iter()
            .any(|t| t.starts_with("Active thread:"))
    })
    .await;
    let status = fake.chat_texts(7);
    let status = status.iter().find(|t| t.starts_with("Active thread:"));
    assert!(
        status.is_some_and(|t| t.contains("\nTitle: hello\n")),
        "the first message names the thread: {status:?}"
    );
    let thread_of = |fake: &FakeTelegram| -> Vec<String> {
        fake.chat_texts(7)
            .iter()
            .filter_map(|t| t.strip_prefix("Active thread: "))
            .map(|t| t.lines().next().unwrap_or_default().to_string())
            .collect()
    };
    fake.send_text(private_chat(7), 7, "/new@AntlerBot");
    fake.wait_for(WAIT, "new", |f| has_text(f, 7, "New conversation started."))
        .await;
    fake.send_text(private_chat(7), 7, "/status");
    fake.wait_for(WAIT, "second status", |f| thread_of(f).len() == 2)
        .await;
    let threads = thread_of(&fake);
    assert_ne!(threads[0], threads[1], "/new maps the chat to a new thread");
    // Unknown commands are chat text for the agent.
    model.push(Reply::text("skill answer"));
    fake.send_text(private_chat(7), 7, "/unknown-thing please");
    fake.wait_for(WAIT, "unknown command answered by the agent", |f| {
        has_text(f, 7, "skill answer")
    })
    .await;
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_need_an_allowlist_and_a_mention_and_strangers_get_nothing() {
    let extra = "    allowed_chats: [-100]\n    allowed_users: [1, 2]\n";
    let (fake, model, _dir, bot) = setup_bot(extra).await;
    model.push(Reply::text("group answer"));
    fake.send_text(group_chat(-100, false), 1, "talking among ourselves");
    fake.send_text(
        group_chat(-200, false),
        1,
        "@AntlerBot in a group not allowed",
    );
    fake.send_text(private_chat(3), 3, "I am not on the list");
    fake.send_text(group_chat(-100, false), 2, "@AntlerBot what is up");
    fake.wait_for(WAIT, "the mentioned message answered", |f| {
        has_text(f, -100, "group answer")
    })
    .await;
    // Access is decided as each update is journalled, before the poll that acknowledges it:
    // once every update is acknowledged, the ignored ones can no longer start anything.
    fake.wait_for(WAIT, "every update acknowledged", |f| f.all_confirmed())
        .await;
    assert!(
        fake.chat_texts(-200).is_empty(),
        "not-allowlisted group gets nothing"
    );
    assert!(
        fake.chat_texts(3).is_empty(),
        "not-allowlisted user gets nothing"
    );
    assert_eq!(
        model.requests().len(),
        1,
        "only the mentioned message reached the agent"
    );
    let request = model.requests()[0].to_string();
    assert!(request.contains("what is up") && !request.contains("@AntlerBot"));
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_update_is_answered_once_even_after_a_restart() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = config_yaml(dir.path(), &fake, &model, "");
    let bot = Bot::start(&yaml).await;
    model.push(Reply::text("only once"));
    fake.send_text(private_chat(5), 5, "ping");
    fake.wait_for(WAIT, "answer", |f| has_text(f, 5, "only once"))
        .await;
    fake.redeliver_last();
    let confirmed = fake.confirmed_offset();
    fake.wait_for(WAIT, "redelivery polled", |f| {
        f.confirmed_offset() > confirmed
    })
    .await;
    bot.stop().await;

    let bot = Bot::start(&yaml).await;
    fake.redeliver_last();
    let confirmed = fake.confirmed_offset();
    fake.wait_for(WAIT, "redelivery polled after restart", |f| {
        f.confirmed_offset() > confirmed
    })
    .await;
    // The chat's messages are handled in order: once a later one is answered, anything the
    // redelivery could have started has run.
    model.push(Reply::text("and the next one"));
    fake.send_text(private_chat(5), 5, "next");
    fake.wait_for(WAIT, "the next message's answer", |f| {
        has_text(f, 5, "and the next one")
    })
    .await;
    assert_eq!(answers(&fake, 5), ["only once", "and the next one"]);
    assert_eq!(status_messages(&fake), 2, "one status message per question");
    assert_eq!(
        model.requests().len(),
        2,
        "the agent ran once for the redelivered message"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_cut_short_by_shutdown_is_answered_after_restart() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = config_yaml(dir.path(), &fake, &model, "");
    let bot = Bot::start(&yaml).await;
    model.push(Reply::slow(["never", " finished"], Duration::from_secs(30)));
    fake.send_text(private_chat(6), 6, "long job");
    fake.wait_for(WAIT, "status message", |f| has_text(f, 6, "Working on it…"))
        .await;
    fake.wait_for(WAIT, "model called", |_| !model.requests().is_empty())
        .await;
    bot.stop().await;
    assert!(!fake.chat_texts(6).iter().any(|t| t.contains("never")));

    model.push(Reply::text("done after restart"));
    let bot = Bot::start(&yaml).await;
    fake.wait_for(WAIT, "the recovered answer", |f| {
        has_text(f, 6, "done after restart")
    })
    .await;
    assert_eq!(
        fake.calls_of("sendMessage").len(),
        1,
        "the status message is reused, not resent"
    );
    let resumed = model.requests().pop().expect("the model was called again");
    let asked = resumed["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| {
            m["role"] == "user"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("long job"))
        })
        .count();
    assert_eq!(
        asked, 1,
        "the question is in the thread once, not once per attempt: {resumed}"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_on_edits_pauses_the_chat_and_the_final_still_arrives() {
    let (fake, model, _dir, bot) = setup_bot("").await;
    model.push(Reply::slow(
        ["one", " two", " three", " four", " five", " six", " seven"],
        Duration::from_millis(400),
    ));
    fake.fail_next("editMessageText", BotFailure::RetryAfter(3));
    fake.send_text(private_chat(8), 8, "go");
    fake.wait_for(WAIT, "final", |f| {
        has_text(f, 8, "one two three four five six seven")
    })
    .await;
    let calls = fake.calls();
    let limited_at = calls
        .iter()
        .find(|c| c.method == "editmessagetext")
        .map(|c| c.at)
        .expect("an edit was attempted");
    let inside_window = calls
        .iter()
        .filter(|c| c.method != "getupdates" && c.at > limited_at)
        .filter(|c| c.at < limited_at + Duration::from_millis(2900))
        .count();
    assert_eq!(
        inside_window, 0,
        "nothing is sent to the chat inside the retry_after window"
    );
    assert!(
        fake.calls_of("editMessageText").len() <= 6,
        "edits stay bounded"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_is_split_on_lines_with_fences_intact() {
    let (fake, model, _dir, bot) = setup_bot("").await;
    let mut answer = String::from("Here is the code:\n```rust\n");
    while answer.len() < 9_900 {
        answer.push_str(&format!("let value_{0} = compute({0});\n", answer.len()));
    }
    answer.push_str("```\nDone.");
    model.push(Reply::text(answer.clone()));
    fake.send_text(private_chat(9), 9, "write code");
    fake.wait_for(WAIT, "three messages", |f| {
        f.chat_texts(9).iter().any(|t| t.ends_with("Done."))
    })
    .await;
    let texts = fake.chat_texts(9);
    assert_eq!(
        texts.len(),
        3,
        "status edited into chunk 1, then two more messages"
    );
    for text in &texts {
        // Telegram counts the text after HTML parsing against its limit.
        assert!(visible(text).chars().count() <= 4096);
        assert_eq!(
            text.matches("<pre>").count(),
            text.matches("</pre>").count(),
            "every chunk has a balanced code block"
        );
        for line in visible(text).lines().filter(|l| l.starts_with("let ")) {
            assert!(line.ends_with(");"), "cut mid-line: {line}");
        }
    }
    assert!(
        texts[1].starts_with("<pre><code class=\"language-rust\">let "),
        "the code block reopens with its language"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poller_conflict_marks_the_channel_unhealthy_without_a_retry_loop() {
    let fake = FakeTelegram::start().await;
    fake.set_conflict(true);
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = Bot::start(&config_yaml(dir.path(), &fake, &model, "")).await;
    let ready = bot
        .readyz_until("the channel marked unhealthy", |r| {
            r["channels"]["telegram"]["state"] == "unhealthy"
        })
        .await;
    assert!(
        ready["channels"]["telegram"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("409"),
        "{ready}"
    );
    assert_eq!(ready["status"], "ready", "the daemon itself keeps serving");
    // Unhealthy is reported once supervision has given up: only a settings change starts the
    // channel again, so the count is final.
    assert_eq!(
        fake.calls_of("getUpdates").len(),
        1,
        "no retry after a conflict"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forum_topics_keep_their_own_threads_and_replies_stay_in_the_topic() {
    let extra = "    allowed_chats: [-300]\n    group_policy: all\n";
    let (fake, model, _dir, bot) = setup_bot(extra).await;
    let forum = group_chat(-300, true);
    let in_topic = |topic: i64, text: &str| json!({"message_thread_id": topic, "is_topic_message": true, "text": text});
    model.push(Reply::text("topic seven answer"));
    fake.send_message(forum.clone(), 1, in_topic(7, "question in seven"));
    fake.wait_for(WAIT, "answer", |f| has_text(f, -300, "topic seven answer"))
        .await;
    let status = &fake.calls_of("sendMessage")[0];
    assert_eq!(
        status.body["message_thread_id"], 7,
        "the reply stays in the topic"
    );
    fake.send_message(forum.clone(), 1, in_topic(7, "/status"));
    fake.send_message(forum.clone(), 1, in_topic(8, "/status"));
    fake.wait_for(WAIT, "two statuses", |f| {
        f.chat_texts(-300)
            .iter()
            .filter(|t| t.starts_with("Active thread:") || t.starts_with("No active"))
            .count()
            == 2
    })
    .await;
    let texts = fake.chat_texts(-300);
    assert!(
        texts.iter().any(|t| t.starts_with("Active thread:")),
        "topic 7 has its thread"
    );
    assert!(
        texts.iter().any(|t| t == "No active conversation."),
        "topic 8 has none yet"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_for_a_busy_conversation_is_queued_with_a_note_and_answered_next() {
    let (fake, model, _dir, bot) = setup_bot("").await;
    // The first answer waits until the second message got its note (due after 2 s).
    let noted = Gate::new();
    model.push(Reply::chunks(["slow", " first"]).hold_after(1, &noted));
    model.push(Reply::text("second answer"));
    fake.send_text(private_chat(21), 21, "first");
    fake.wait_for(WAIT, "first status", |f| has_text(f, 21, "Working on it…"))
        .await;
    fake.send_text(private_chat(21), 21, "second");
    fake.wait_for(WAIT, "the queued note", |f| {
        f.chat_texts(21).iter().any(|t| t.starts_with("Queued"))
    })
    .await;
    noted.open();
    fake.wait_for(WAIT, "second answer", |f| has_text(f, 21, "second answer"))
        .await;
    let texts = fake.chat_texts(21);
    let first = texts
        .iter()
        .position(|t| t == "slow first")
        .expect("first answer");
    let second = texts
        .iter()
        .position(|t| t == "second answer")
        .expect("second");
    assert!(first < second, "answered in order");
    assert_eq!(model.requests().len(), 2);
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_turn_then_restart_replies_exactly_once() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    model.push(Reply::slow(["never", " finished"], Duration::from_secs(60)));
    let extra = format!(
        "sandbox:\n  provider: local\nchannels:\n  telegram:\n    enabled: true\n    bot_token: \"{}\"\n    api_url: {}\n    poll_timeout: 1\n",
        antler_test_support::FAKE_BOT_TOKEN,
        fake.api_url()
    );
    let setup = crate::daemon::Setup::new(&model.base_url(), &extra);
    let daemon = setup.start();
    fake.send_text(private_chat(31), 31, "important");
    fake.wait_for(WAIT, "status message", |f| {
        has_text(f, 31, "Working on it…")
    })
    .await;
    fake.wait_for(WAIT, "model called", |_| !model.requests().is_empty())
        .await;
    daemon.signal("KILL");
    drop(daemon);

    model.push(Reply::text("answered after the crash"));
    let daemon = setup.start();
    fake.wait_for(WAIT, "the answer", |f| {
        has_text(f, 31, "answered after the crash")
    })
    .await;
    // The chat's messages are handled in order: once a later one is answered, a second
    // recovery of the first would have shown.
    model.push(Reply::text("and the next one"));
    fake.send_text(private_chat(31), 31, "next");
    fake.wait_for(WAIT, "the next message's answer", |f| {
        has_text(f, 31, "and the next one")
    })
    .await;
    assert_eq!(
        answers(&fake, 31),
        ["answered after the crash", "and the next one"]
    );
    assert_eq!(
        status_messages(&fake),
        2,
        "the first status message was not sent twice"
    );
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_user_gets_one_polite_notice_not_one_per_message() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = config_yaml(dir.path(), &fake, &model, "")
        .replace("channels:\n", "channels:\n  user_messages_per_minute: 2\n");
    let bot = Bot::start(&yaml).await;
    model.push(Reply::text("a1")).push(Reply::text("a2"));
    for idx in 0..5 {
        fake.send_text(private_chat(41), 41, &format!("message {idx}"));
    }
    let notice = |f: &FakeTelegram| {
        f.chat_texts(41)
            .iter()
            .any(|t| t.starts_with("You are sending messages faster"))
    };
    // Each message is admitted or throttled (and the notice decided) before the poll that
    // acknowledges it.
    fake.wait_for(
        WAIT,
        "two answers, the notice, every update acknowledged",
        |f| has_text(f, 41, "a1") && has_text(f, 41, "a2") && notice(f) && f.all_confirmed(),
    )
    .await;
    let notices = fake
        .chat_texts(41)
        .iter()
        .filter(|t| t.starts_with("You are sending messages faster"))
        .count();
    assert_eq!(notices, 1);
    assert_eq!(
        model.requests().len(),
        2,
        "throttled messages never reach the agent"
    );
    bot.stop().await;
}

/// The text a user sees: HTML tags removed, entities decoded.
fn visible(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}
