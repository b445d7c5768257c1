//! The shared channel conformance story: what every adapter must do, written once.
//!
//! A platform test implements [`ChannelDriver`] over its fake server and calls [`story`], which
//! runs the real daemon against it: an answer, a redelivery, commands, streaming edits within
//! the platform's pace, a file in, an artifact out, citations and pictures in an answer, a 429
//! honoured, a journalled message answered once after a restart, and the access policy (a
//! stranger, a group message without a mention).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::json;

use super::group_support::outside_quotes;
use super::{Bot, WAIT, daemon_yaml};

/// Story users and groups are small numbers; the driver maps them to platform ids.
pub(crate) const USERS: [u32; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
const GROUP: u32 = 50;
const STRANGER: u32 = 99;
/// A real PNG (160 px wide).
const CHART: &[u8] = include_bytes!("../web_browser/chart.png");

/// How the story talks to one platform's fake.
pub(crate) trait ChannelDriver: Sync {
    /// The channel's section under `channels:` (two-space indented keys), pointing at the fake,
    /// with `allowed_users` = `users` and `allowed_chats` = `groups`.
    fn section_yaml(&self, users: &[u32], groups: &[u32]) -> String;
    /// The platform's pace between streaming edits in a direct chat.
    fn edit_pace(&self) -> Duration;
    fn user_says(&self, user: u32, text: &str);
    /// A message in a group chat, mentioning the bot or not.
    fn user_says_in_group(&self, group: u32, user: u32, text: &str, mention: bool);
    /// Messages in a group chat that only look like mentions of the bot, each with `text`: one
    /// mentioning someone whose id or name starts like the bot's, one with the bot's mention
    /// inside code.
    fn user_near_misses_in_group(&self, group: u32, user: u32, text: &str);
    fn user_sends_file(&self, user: u32, filename: &str, bytes: &[u8], caption: &str);
    /// The platform delivers the last message again.
    fn redeliver_last(&self);
    /// The bot's messages in the direct chat with `user` as they read now, oldest first.
    fn bot_texts(&self, user: u32) -> Vec<String>;
    fn group_texts(&self, group: u32) -> Vec<String>;
    /// Names of the files the bot uploaded to the direct chat with `user`.
    fn bot_files(&self, user: u32) -> Vec<String>;
    /// A link titled `label` to `url` as the bot's text writes it on this platform.
    fn link(&self, label: &str, url: &str) -> String;
    /// When the bot edited messages in the direct chat with `user`.
    fn edit_times(&self, user: u32) -> Vec<Instant>;
    /// When the bot made any request concerning the direct chat with `user`.
    fn request_times(&self, user: u32) -> Vec<Instant>;
    /// The next edit is answered with a 429 asking to wait `retry_after`.
    fn rate_limit_next_edit(&self, retry_after: Duration);
    /// The Antler user a story user is on this platform (`{channel}-{platform id}`).
    fn antler_user(&self, user: u32) -> String;
    /// The daemon listens at `addr` (again, after a restart): where a platform that pushes
    /// webhooks delivers.
    fn daemon_started(&self, _addr: SocketAddr) {}
}

/// Runs every scenario against a daemon on `dir`, restarting it once.
pub(crate) async fn story(driver: &dyn ChannelDriver, model: &FakeOpenAi, dir: &Path) {
    let section = driver.section_yaml(&USERS, &[GROUP]);
    let yaml = daemon_yaml(dir, model, &section);
    let bot = Bot::start(&yaml).await;
    driver.daemon_started(bot.addr);
    conversation_and_commands(driver, model, USERS[0]).await;
    streaming_keeps_the_pace(driver, model, USERS[1]).await;
    files_in_and_out(driver, model, USERS[2]).await;
    citations_and_pictures(driver, model, dir, USERS[6]).await;
    rate_limits_are_honoured(driver, model, USERS[3]).await;
    access_policy(driver, model, USERS[4]).await;
    let bot = restart_answers_a_journalled_message_once(driver, model, bot, &yaml, USERS[5]).await;
    assert_eq!(model.unscripted_calls(), 0);
    bot.stop().await;
}

async fn wait_until(what: &str, check: impl Fn() -> bool, seen: impl Fn() -> Vec<String>) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; the bot said {:?}",
            seen()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_for_text(driver: &dyn ChannelDriver, user: u32, what: &str, text: &str) {
    wait_until(
        what,
        || driver.bot_texts(user).iter().any(|t| t == text),
        || driver.bot_texts(user),
    )
    .await;
}

/// Message → answer; a redelivery → no second answer; `/help`; `/new`; the agent sees both turns
/// of a conversation and not the previous one after `/new`.
async fn conversation_and_commands(driver: &dyn ChannelDriver, model: &FakeOpenAi, user: u32) {
    model.push(Reply::text("answer one"));
    driver.user_says(user, "remember the word walnut");
    wait_for_text(driver, user, "the first answer", "answer one").await;

    driver.redeliver_last();
    model.push(Reply::text("answer two"));
    driver.user_says(user, "what was the word?");
    wait_for_text(driver, user, "the second answer", "answer two").await;
    let texts = driver.bot_texts(user);
    assert_eq!(
        texts.iter().filter(|t| *t == "answer one").count(),
        1,
        "a redelivery is not answered again"
    );
    let second = model.requests().pop().expect("second request").to_string();
    assert!(
        second.contains("walnut"),
        "the conversation continues in one thread"
    );

    driver.user_says(user, "/help");
    wait_until(
        "help",
        || {
            driver
                .bot_texts(user)
                .iter()
                .any(|t| t.starts_with("Available commands:"))
        },
        || driver.bot_texts(user),
    )
    .await;
    driver.user_says(user, "/new");
    wait_for_text(driver, user, "/new", "New conversation started.").await;
    model.push(Reply::text("answer three"));
    driver.user_says(user, "fresh start");
    wait_for_text(driver, user, "the third answer", "answer three").await;
    let third = model.requests().pop().expect("third request").to_string();
    assert!(!third.contains("walnut"), "/new starts an empty thread");
}

/// The answer streams into the status message, never faster than the platform's pace.
async fn streaming_keeps_the_pace(driver: &dyn ChannelDriver, model: &FakeOpenAi, user: u32) {
    let chunks = [
        "Streaming",
        " an",
        " answer",
        " in",
        " seven",
        " small",
        " pieces.",
    ];
    model.push(Reply::slow(chunks, Duration::from_millis(300)));
    driver.user_says(user, "stream please");
    let answer = chunks.concat();
    wait_for_text(driver, user, "the streamed answer", &answer).await;
    let edits = driver.edit_times(user);
    assert!(edits.len() >= 2, "the answer was streamed by edits");
    let pace = driver.edit_pace();
    for pair in edits.windows(2) {
        // The final edit (the complete answer) may follow the last streaming edit at once.
        if pair[1] == *edits.last().expect("edits") {
            break;
        }
        assert!(
            pair[1] - pair[0] >= pace.mul_f64(0.9),
            "edits {:?} apart, the platform's pace is {pace:?}",
            pair[1] - pair[0]
        );
    }
}

/// A file the person sends reaches the agent as an upload; a file the agent presents arrives
/// after the text.
async fn files_in_and_out(driver: &dyn ChannelDriver, model: &FakeOpenAi, user: u32) {
    model.push(Reply::text("summary ready"));
    driver.user_sends_file(user, "notes.txt", b"meeting at noon", "summarise this");
    wait_for_text(driver, user, "the file's answer", "summary ready").await;
    let request = model.requests().pop().expect("request").to_string();
    assert!(
        request.contains("/mnt/user-data/uploads/notes.txt"),
        "the agent is told where the upload is: {request}"
    );
    assert!(request.contains("summarise this"));

    model.push(Reply::tool_call(
        "write_file",
        json!({"path": "/mnt/user-data/outputs/report.md", "content": "# Report"}),
    ));
    model.push(Reply::tool_call(
        "present_files",
        json!({"filepaths": ["/mnt/user-data/outputs/report.md"]}),
    ));
    model.push(Reply::text("Here is the report."));
    driver.user_says(user, "write a report");
    wait_until(
        "the artifact",
        || driver.bot_files(user).iter().any(|f| f == "report.md"),
        || driver.bot_texts(user),
    )
    .await;
    assert!(
        driver
            .bot_texts(user)
            .iter()
            .any(|t| t == "Here is the report.")
    );
}

/// An answer citing a source and showing a picture it made (also presented): the citation is a
/// link titled with the source's title, the picture arrives once as a file and the text says
/// so, and a picture that does not exist is named as not attached.
async fn citations_and_pictures(
    driver: &dyn ChannelDriver,
    model: &FakeOpenAi,
    dir: &Path,
    user: u32,
) {
    model.push(Reply::tool_call(
        "write_file",
        json!({"path": "/mnt/user-data/outputs/sales.csv", "content": "month,sales\nJuly,3\n"}),
    ));
    model.push(Reply::text("Data saved."));
    driver.user_says(user, "collect the sales figures");
    wait_for_text(driver, user, "the data", "Data saved.").await;
    // The chart the agent's plotting made, beside the data (the sandbox here cannot run one).
    let outputs = outputs_holding(dir, "sales.csv");
    std::fs::write(outputs.join("chart.png"), CHART).expect("write the chart");

    model.push(Reply::tool_call(
        "present_files",
        json!({"filepaths": ["/mnt/user-data/outputs/chart.png"]}),
    ));
    model.push(Reply::text(
        "Sales rose [citation:Q3 report](https://example.com/reports/q3).\n\n\
         ![Sales by month](/mnt/user-data/outputs/chart.png)\n\n\
         ![Last year](/mnt/user-data/outputs/old.png)",
    ));
    driver.user_says(user, "chart it");
    wait_until(
        "the chart",
        || driver.bot_files(user).iter().any(|f| f == "chart.png"),
        || driver.bot_texts(user),
    )
    .await;
    // A later answer in the same chat: everything of this one was delivered before it.
    model.push(Reply::text("You're welcome."));
    driver.user_says(user, "thanks");
    wait_for_text(driver, user, "the next answer", "You're welcome.").await;

    let texts = driver.bot_texts(user);
    let answer = texts
        .iter()
        .find(|t| t.starts_with("Sales rose"))
        .unwrap_or_else(|| panic!("no answer in {texts:?}"));
    let link = driver.link("Q3 report", "https://example.com/reports/q3");
    assert!(answer.contains(&link), "{link} in {answer}");
    assert!(!answer.contains("citation:"), "{answer}");
    assert!(answer.contains("Sales by month (📎 chart.png)"), "{answer}");
    assert!(
        answer.contains("old.png: not attached, the file does not exist"),
        "{answer}"
    );
    assert!(!answer.contains("/mnt/") && !answer.contains(&*dir.to_string_lossy()));
    let files = driver.bot_files(user);
    assert_eq!(
        files.iter().filter(|f| *f == "chart.png").count(),
        1,
        "shown and presented, sent once: {files:?}"
    );
    assert!(!files.iter().any(|f| f == "old.png"), "{files:?}");
}

/// The outputs directory of the one thread that has `name` in its outputs.
fn outputs_holding(dir: &Path, name: &str) -> PathBuf {
    let users = dir.join("data/users");
    let found: Vec<PathBuf> = std::fs::read_dir(&users)
        .expect("users")
        .flatten()
        .flat_map(|user| {
            std::fs::read_dir(user.path().join("threads"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .map(|thread| thread.path().join("user-data/outputs"))
        .filter(|outputs| outputs.join(name).is_file())
        .collect();
    assert_eq!(found.len(), 1, "one thread has {name}: {found:?}");
    found[0].clone()
}

/// A 429 on an edit silences the chat for the platform's delay; the answer still arrives.
async fn rate_limits_are_honoured(driver: &dyn ChannelDriver, model: &FakeOpenAi, user: u32) {
    let chunks = ["one", " two", " three", " four", " five", " six"];
    model.push(Reply::slow(chunks, Duration::from_millis(400)));
    let window = Duration::from_secs(2);
    driver.rate_limit_next_edit(window);
    driver.user_says(user, "count");
    wait_for_text(driver, user, "the answer after a 429", &chunks.concat()).await;
    let edits = driver.edit_times(user);
    let limited_at = *edits.first().expect("an edit was attempted");
    let inside = driver
        .request_times(user)
        .into_iter()
        .filter(|at| *at > limited_at && *at < limited_at + window.mul_f64(0.95))
        .count();
    assert_eq!(inside, 0, "nothing is sent to the chat inside the window");
}

/// A stranger gets nothing; in a group only a mention is answered, not a look-alike of one nor
/// one inside code.
async fn access_policy(driver: &dyn ChannelDriver, model: &FakeOpenAi, user: u32) {
    driver.user_says(STRANGER, "let me in");
    driver.user_says_in_group(GROUP, user, "talking among ourselves", false);
    driver.user_near_misses_in_group(GROUP, user, "not for the bot");
    model.push(Reply::text("group answer"));
    driver.user_says_in_group(GROUP, user, "what do you think?", true);
    wait_until(
        "the group answer",
        || {
            driver
                .group_texts(GROUP)
                .iter()
                .any(|t| t == "group answer")
        },
        || driver.group_texts(GROUP),
    )
    .await;
    assert!(
        driver.bot_texts(STRANGER).is_empty(),
        "strangers get nothing"
    );
    // Where the platform lets the bot read history, they come as the quoted context only.
    let asked = outside_quotes(&model.requests().pop().expect("request"));
    assert!(
        !asked.contains("among ourselves") && !asked.contains("not for the bot"),
        "unaddressed messages are nobody's turn: {asked}"
    );
}

/// A message whose turn was cut short by a stop is answered once by the next start.
async fn restart_answers_a_journalled_message_once(
    driver: &dyn ChannelDriver,
    model: &FakeOpenAi,
    bot: Bot,
    yaml: &str,
    user: u32,
) -> Bot {
    let asked = model.requests().len();
    model.push(Reply::slow(["never", " finished"], Duration::from_secs(30)));
    driver.user_says(user, "long job");
    wait_until(
        "the model call",
        || model.requests().len() > asked,
        || driver.bot_texts(user),
    )
    .await;
    bot.stop().await;
    model.push(Reply::text("done after restart"));
    let bot = Bot::start(yaml).await;
    driver.daemon_started(bot.addr);
    wait_for_text(driver, user, "the recovered answer", "done after restart").await;
    // A chat's messages are handled in order: once a later one is answered, a second recovery
    // of the journalled message would have been answered before it.
    model.push(Reply::text("and the next one"));
    driver.user_says(user, "next");
    wait_for_text(driver, user, "the next answer", "and the next one").await;
    let texts = driver.bot_texts(user);
    assert_eq!(
        texts.iter().filter(|t| *t == "done after restart").count(),
        1,
        "answered once: {texts:?}"
    );
    assert!(!texts.iter().any(|t| t.contains("never")));
    assert_eq!(
        model.requests().len(),
        asked + 3,
        "the cut-short call, its recovery and the next message"
    );
    bot
}
