//! Spoken answers in Slack, Discord and Feishu: each gets the answer as text, then the fake
//! speech server's audio as a file through its own upload path (Slack's external upload, a
//! Discord attachment, a Feishu `opus` upload sent as an `audio` message).

use antler_test_support::{
    FakeDiscord, FakeFeishu, FakeOpenAi, FakeSlack, FakeSpeech, Reply, dm_channel, p2p_chat,
};

use super::discord_driver::discord_section;
use super::feishu_driver::{feishu_section, webhook_url};
use super::slack_driver::slack_section;
use super::{Bot, WAIT, daemon_yaml};

/// `voice.speech` on, through `speech`.
fn with_speech(yaml: String, speech: &FakeSpeech) -> String {
    format!(
        "{yaml}voice:\n  speech:\n    enabled: true\n    base_url: {}\n",
        speech.base_url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_with_reply_with_voice_always_gets_an_audio_file_after_the_text() {
    let (fake, model, speech) = (
        FakeSlack::start().await,
        FakeOpenAi::start().await,
        FakeSpeech::start().await,
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let section = slack_section(&fake, "    reply_with_voice: always\n");
    let bot = Bot::start(&with_speech(
        daemon_yaml(dir.path(), &model, &section),
        &speech,
    ))
    .await;
    model.push(Reply::text("Spoken in Slack."));
    fake.user_says_dm("U7", "say it");
    fake.wait_for(WAIT, "the audio file", |f| !f.shared_files().is_empty())
        .await;

    let dm = dm_channel("U7");
    assert!(
        fake.messages()
            .iter()
            .any(|m| m.channel == dm && m.text == "Spoken in Slack."),
        "the text answer came first"
    );
    let files = fake.shared_files();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].title, "answer.ogg");
    assert_eq!(files[0].channel.as_deref(), Some(dm.as_str()));
    assert_eq!(files[0].bytes, speech.audio());
    assert_eq!(speech.inputs(), ["Spoken in Slack."]);
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_with_voice_on_gets_an_audio_attachment() {
    let (fake, model, speech) = (
        FakeDiscord::start().await,
        FakeOpenAi::start().await,
        FakeSpeech::start().await,
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let section = discord_section(&fake, "");
    let bot = Bot::start(&with_speech(
        daemon_yaml(dir.path(), &model, &section),
        &speech,
    ))
    .await;
    let user = "300000000000000042";
    fake.user_says_dm(user, "/voice on");
    fake.wait_for(WAIT, "/voice on confirmed", |f| {
        f.messages()
            .iter()
            .any(|m| m.content.starts_with("Spoken answers on"))
    })
    .await;
    model.push(Reply::text("Spoken in Discord."));
    fake.user_says_dm(user, "say it");
    fake.wait_for(WAIT, "the audio attachment", |f| {
        f.messages().iter().any(|m| !m.files.is_empty())
    })
    .await;

    let messages = fake.messages();
    let text = messages
        .iter()
        .position(|m| m.content == "Spoken in Discord.")
        .expect("the text answer");
    let audio = messages
        .iter()
        .position(|m| !m.files.is_empty())
        .expect("the audio");
    assert!(text < audio, "the audio follows the text");
    assert_eq!(
        messages[audio].files,
        [("answer.ogg".to_string(), speech.audio().to_vec())]
    );
    assert_eq!(messages[audio].channel, messages[text].channel, "in the DM");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feishu_with_reply_with_voice_always_gets_an_opus_audio_message() {
    let (fake, model, speech) = (
        FakeFeishu::start().await,
        FakeOpenAi::start().await,
        FakeSpeech::start().await,
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let section = feishu_section(&fake, "    reply_with_voice: always\n");
    let yaml = with_speech(daemon_yaml(dir.path(), &model, &section), &speech);
    let bot = start_feishu(&fake, &yaml).await;
    model.push(Reply::text("Spoken in Feishu."));
    let alice = "ou_alice0042";
    fake.user_says_p2p(alice, "say it");
    let chat = p2p_chat(alice);
    fake.wait_for(WAIT, "the audio message", |f| {
        f.bot_messages(&chat).iter().any(|m| m.msg_type == "audio")
    })
    .await;

    let sent = fake.bot_messages(&chat);
    let audio = sent
        .iter()
        .position(|m| m.msg_type == "audio")
        .expect("audio");
    assert!(
        sent[..audio]
            .iter()
            .any(|m| m.text() == "Spoken in Feishu."),
        "the text answer came first: {:?}",
        fake.chat_texts(&chat)
    );
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(
        (uploads[0].kind.as_str(), uploads[0].name.as_str()),
        ("opus", "answer.opus")
    );
    assert_eq!(uploads[0].bytes, speech.audio());
    assert_eq!(sent[audio].content["file_key"], uploads[0].key.as_str());
    bot.stop().await;
}

/// A daemon behind the fake Feishu's webhook; waits until the channel runs.
async fn start_feishu(fake: &FakeFeishu, yaml: &str) -> Bot {
    let bot = Bot::start(yaml).await;
    fake.set_webhook(webhook_url(bot.addr));
    bot.readyz_until("feishu running", |r| {
        r["channels"]["feishu"]["state"] == "running"
    })
    .await;
    bot
}
