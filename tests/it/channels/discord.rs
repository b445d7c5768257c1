//! Discord end to end: threads from mentions, follow-ups, DMs, who is answered, mentions that
//! must not ping, long answers and files both ways.

use antler_test_support::{
    FAKE_DISCORD_BOT_ID, FAKE_DISCORD_GUILD, FakeDiscord, FakeOpenAi, Reply, discord_user,
};
use serde_json::json;

use super::discord_driver::discord_section;
use super::{Bot, WAIT, daemon_yaml};

pub(crate) const CHANNEL: &str = "400000000000000777";
pub(crate) const USER: &str = "300000000000000001";
const FREE: &str = "400000000000000778";
const ELSEWHERE: &str = "400000000000000779";

pub(crate) async fn start(
    fake: &FakeDiscord,
    model: &FakeOpenAi,
    dir: &std::path::Path,
    extra: &str,
) -> Bot {
    fake.add_text_channel(CHANNEL);
    let extra = format!("    allowed_channels: [{CHANNEL}]\n{extra}");
    Bot::start(&daemon_yaml(dir, model, &discord_section(fake, &extra))).await
}

/// The turn of `message` is over (its ✅ is on and its 👀, taken away right after, is gone), so
/// a next message is not queued behind it.
pub(crate) async fn wait_answered(fake: &FakeDiscord, channel: &str, message: &str) {
    let done = (channel.to_string(), message.to_string(), "✅".to_string());
    let seen = (channel.to_string(), message.to_string(), "👀".to_string());
    fake.wait_for(WAIT, "the answered reaction", |f| {
        let reactions = f.reactions();
        reactions.contains(&done) && !reactions.contains(&seen)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_starts_a_thread_follow_ups_continue_there_and_a_dm_keeps_one_thread() {
    let fake = FakeDiscord::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "").await;

    model.push(Reply::text("A walnut is a nut."));
    let asked = fake.user_says_in_channel(CHANNEL, USER, "what is a walnut?\nthanks", true);
    fake.wait_for(WAIT, "the answer in a thread", |f| {
        f.channel_texts(&asked)
            .contains(&"A walnut is a nut.".to_string())
    })
    .await;
    assert_eq!(
        fake.threads(),
        [(CHANNEL.into(), asked.clone(), "what is a walnut?".into())],
        "one thread, on the message, named from its first line"
    );
    assert!(
        fake.channel_texts(CHANNEL).is_empty(),
        "nothing is posted in the channel itself"
    );
    wait_answered(&fake, CHANNEL, &asked).await;
    let on_question: Vec<String> = fake
        .reactions()
        .into_iter()
        .filter(|(_, message, _)| *message == asked)
        .map(|(_, _, emoji)| emoji)
        .collect();
    assert_eq!(on_question, ["✅"], "👀 is taken away when answered");

    model.push(Reply::text("Its shell is hard."));
    let follow_up = fake.user_says_in_channel(&asked, USER, "and its shell?", false);
    fake.wait_for(WAIT, "the follow-up's answer", |f| {
        f.channel_texts(&asked)
            .contains(&"Its shell is hard.".to_string())
    })
    .await;
    let request = model.requests().pop().expect("request").to_string();
    assert!(request.contains("walnut"), "the conversation continues");
    assert_eq!(fake.threads().len(), 1, "no second thread");
    let reply = fake
        .messages()
        .into_iter()
        .find(|m| m.content == "Its shell is hard.")
        .expect("the follow-up's answer");
    assert_eq!(reply.reply_to.as_deref(), Some(follow_up.as_str()));
    wait_answered(&fake, &asked, &follow_up).await;

    model.push(Reply::text("Hello Ada."));
    let first = fake.user_says_dm(USER, "my name is Ada");
    let dm = FakeDiscord::dm_channel(USER);
    wait_answered(&fake, &dm, &first).await;
    model.push(Reply::text("You are Ada."));
    fake.user_says_dm(USER, "what is my name?");
    fake.wait_for(WAIT, "the second DM answer", |f| {
        f.channel_texts(&dm).contains(&"You are Ada.".to_string())
    })
    .await;
    let request = model.requests().pop().expect("request").to_string();
    assert!(request.contains("my name is Ada"), "a DM keeps one thread");
    assert!(
        !request.contains("walnut"),
        "the DM is not the guild thread"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unaddressed_and_bot_messages_are_ignored_and_everyone_does_not_ping() {
    let fake = FakeDiscord::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    fake.add_text_channel(FREE);
    fake.add_text_channel(ELSEWHERE);
    let extra = format!(
        "    allowed_guilds: [{FAKE_DISCORD_GUILD}]\n    free_channels: [{FREE}]\n    thread_mode: false\n"
    );
    let bot = start(&fake, &model, dir.path(), &extra).await;

    fake.user_says_in_channel(CHANNEL, USER, "just chatting among ourselves", false);
    let other_bot = discord_user("300000000000000099", true);
    fake.user_message(
        CHANNEL,
        other_bot,
        &format!("<@{FAKE_DISCORD_BOT_ID}> beep"),
        json!({"mentions": [discord_user(FAKE_DISCORD_BOT_ID, true)]}),
    );
    model.push(Reply::text("@everyone look at <@&55> and `@here`"));
    let free = fake.user_says_in_channel(FREE, USER, "no mention needed here", false);
    fake.wait_for(WAIT, "the free channel's answer", |f| {
        f.channel_texts(FREE).iter().any(|t| t.contains("look at"))
    })
    .await;
    wait_answered(&fake, FREE, &free).await;
    let answer = fake
        .messages()
        .into_iter()
        .find(|m| m.content.contains("look at"))
        .expect("the answer");
    assert_eq!(
        answer.content,
        "@\u{200B}everyone look at <@\u{200B}&55> and `@here`"
    );
    assert_eq!(
        answer.allowed_mentions,
        json!({"parse": [], "replied_user": false}),
        "nothing the bot posts can ping"
    );

    model.push(Reply::text("guild-wide"));
    fake.user_says_in_channel(ELSEWHERE, USER, "allowed through the guild", true);
    fake.wait_for(WAIT, "the answer in a channel of an allowed guild", |f| {
        f.channel_texts(ELSEWHERE)
            .contains(&"guild-wide".to_string())
    })
    .await;
    let asked: Vec<String> = model.requests().iter().map(|r| r.to_string()).collect();
    assert_eq!(asked.len(), 2, "only addressed messages reach the model");
    assert!(
        asked
            .iter()
            .all(|r| !r.contains("among ourselves") && !r.contains("beep"))
    );
    assert!(fake.channel_texts(CHANNEL).is_empty());
    assert!(
        fake.threads().is_empty(),
        "thread_mode: false answers in the channel"
    );
    bot.stop().await;
}

fn fences_balanced(text: &str) -> bool {
    text.lines()
        .filter(|line| line.trim_start().starts_with("```"))
        .count()
        % 2
        == 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_with_code_is_three_messages_with_fences_intact() {
    let fake = FakeDiscord::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "").await;
    let code: String = (0..150)
        .map(|i| format!("let value_{i:03} = {i};\n"))
        .collect();
    let answer = format!(
        "{}\n```rust\n{code}```\n{}",
        "intro line\n".repeat(60),
        "outro line\n".repeat(66)
    );
    assert!((4400..4600).contains(&answer.chars().count()));
    model.push(Reply::text(&answer));
    let asked = fake.user_says_dm(USER, "show me code");
    let dm = FakeDiscord::dm_channel(USER);
    wait_answered(&fake, &dm, &asked).await;
    let texts = fake.channel_texts(&dm);
    assert_eq!(texts.len(), 3, "{texts:#?}");
    for text in &texts {
        assert!(text.chars().count() <= 2000);
        assert!(fences_balanced(text), "unbalanced fence in {text:?}");
    }
    let joined = texts.concat();
    assert!(joined.contains("let value_000 = 0;") && joined.contains("let value_149 = 149;"));
    assert!(texts[1].starts_with("```rust\n") || texts[2].starts_with("```rust\n"));
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attachment_reaches_the_agent_and_artifacts_come_back_over_the_limit_named() {
    let fake = FakeDiscord::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "    max_upload_mb: 1\n").await;
    let dm = fake.open_dm(USER);
    let attachment = fake.add_attachment("data.csv", "text/csv", b"a,b\n1,2\n".to_vec());
    model.push(Reply::tool_call(
        "write_file",
        json!({"path": "/mnt/user-data/outputs/report.md", "content": "# Report"}),
    ));
    model.push(Reply::tool_call(
        // Appending is not capped per call like a whole write (sandbox.write_file_max_bytes).
        "write_file",
        json!({"path": "/mnt/user-data/outputs/big.txt", "content": "x".repeat(1_200_000), "append": true}),
    ));
    model.push(Reply::tool_call(
        "present_files",
        json!({"filepaths": ["/mnt/user-data/outputs/report.md", "/mnt/user-data/outputs/big.txt"]}),
    ));
    model.push(Reply::text("Here is the report."));
    let asked = fake.user_message(
        &dm,
        discord_user(USER, false),
        "summarise this",
        json!({"attachments": [attachment]}),
    );
    wait_answered(&fake, &dm, &asked).await;
    let first = model.requests()[0].to_string();
    assert!(
        first.contains("/mnt/user-data/uploads/data.csv"),
        "the agent is told where the upload is"
    );
    let messages = fake.messages();
    let files: Vec<&String> = messages
        .iter()
        .flat_map(|m| m.files.iter().map(|(name, _)| name))
        .collect();
    assert_eq!(
        files,
        ["report.md"],
        "only the file under the limit is attached"
    );
    let text = fake.channel_texts(&dm).join("\n");
    assert!(text.contains("Here is the report."));
    assert!(
        text.contains("Not attached") && text.contains("big.txt (1.1 MB)"),
        "the file over the limit is named with the reason: {text}"
    );
    let upload = fake
        .calls()
        .into_iter()
        .find(|c| c.body["attachments"][0]["filename"] == "report.md")
        .expect("the upload's payload_json");
    assert_eq!(upload.body["allowed_mentions"]["parse"], json!([]));
    bot.stop().await;
}
