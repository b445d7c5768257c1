//! Spoken answers in Telegram (`voice.speech`): `/voice on` in a chat → the fake speech server
//! is asked for the answer's words and `sendVoice` carries exactly its bytes, after the text,
//! replying to the question; a long answer is spoken up to `max_chars` with the note; a speech
//! service that fails leaves the text answer alone; `reply_with_voice: auto` answers a voice
//! note with voice and a typed message with text only.

use std::path::Path;

use antler_test_support::{BotFailure, FakeOpenAi, FakeSpeech, FakeTelegram, Reply, private_chat};
use serde_json::json;

use super::telegram::has_text;
use super::{Bot, WAIT, config_yaml};

const ON: &str =
    "Spoken answers on: my answers in this conversation come as text, then as a voice message.";

/// A daemon on `fake` with speech through `speech`; `telegram_extra` and `speech_extra` add
/// keys to `channels.telegram` (4-space indented) and `voice.speech` (4-space indented).
async fn start(
    fake: &FakeTelegram,
    model: &FakeOpenAi,
    speech: &FakeSpeech,
    dir: &Path,
    telegram_extra: &str,
    speech_extra: &str,
) -> Bot {
    Bot::start(&yaml(
        fake,
        model,
        speech,
        dir,
        telegram_extra,
        speech_extra,
    ))
    .await
}

fn yaml(
    fake: &FakeTelegram,
    model: &FakeOpenAi,
    speech: &FakeSpeech,
    dir: &Path,
    telegram_extra: &str,
    speech_extra: &str,
) -> String {
    format!(
        "{}voice:\n  speech:\n    enabled: true\n    base_url: {}\n{speech_extra}",
        config_yaml(dir, fake, model, telegram_extra),
        speech.base_url()
    )
}

/// `/voice on` in `chat`, confirmed.
async fn voice_on(fake: &FakeTelegram, chat: i64) {
    fake.send_text(private_chat(chat), chat, "/voice on");
    fake.wait_for(WAIT, "/voice on confirmed", |f| has_text(f, chat, ON))
        .await;
}

/// Index of the first call of `method` whose text holds `text` (or any, with `None`).
fn position(fake: &FakeTelegram, method: &str, text: Option<&str>) -> Option<usize> {
    fake.calls().iter().position(|call| {
        call.method == method
            && text.is_none_or(|text| {
                call.body["text"]
                    .as_str()
                    .is_some_and(|sent| sent.contains(text))
            })
    })
}

/// A series of `/metrics`. The recorder is the process's, shared by the tests running beside
/// this one, so tests compare it before and after rather than with a number.
async fn metric(bot: &Bot, series: &str) -> u64 {
    let text = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
        .get(format!("http://{}/metrics", bot.addr))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{series} ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{series} missing from {text}"))
}

/// The platform, the model and the speech service, each a fake on 127.0.0.1.
async fn fakes() -> (FakeTelegram, FakeOpenAi, FakeSpeech) {
    (
        FakeTelegram::start().await,
        FakeOpenAi::start().await,
        FakeSpeech::start().await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voice_on_sends_the_spoken_answer_with_send_voice_after_the_text() {
    let (fake, model, speech) = fakes().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, &speech, dir.path(), "", "").await;
    let spoken_before = metric(&bot, "antler_speech_total{outcome=\"ok\"}").await;
    fake.send_text(private_chat(51), 51, "/voice");
    fake.wait_for(WAIT, "the state", |f| {
        has_text(f, 51, "Spoken answers are off: this channel's setting (channels.telegram.reply_with_voice: off). /voice on turns them on in this conversation.")
    })
    .await;
    voice_on(&fake, 51).await;

    model.push(Reply::text(
        "The **answer** is 42. See [the proof](https://x.example/p).",
    ));
    let question = fake.send_text(private_chat(51), 51, "what is the answer?");
    fake.wait_for(WAIT, "the voice message", |f| {
        !f.calls_of("sendVoice").is_empty()
    })
    .await;

    assert_eq!(speech.inputs(), ["The answer is 42. See the proof."]);
    let asked = &speech.requests()[0].body;
    assert_eq!(
        (&asked["model"], &asked["voice"], &asked["response_format"]),
        (&json!("tts-1"), &json!("alloy"), &json!("opus"))
    );
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1, "one voice message: {uploads:?}");
    assert_eq!(
        (uploads[0].method.as_str(), uploads[0].field.as_str()),
        ("sendvoice", "voice")
    );
    assert_eq!(
        uploads[0].bytes,
        speech.audio(),
        "exactly the service's bytes"
    );
    let voice = &fake.calls_of("sendVoice")[0];
    assert_eq!(voice.body["reply_parameters"]["message_id"], question);
    let text = "is 42. See";
    let answered = position(&fake, "editmessagetext", Some(text))
        .or_else(|| position(&fake, "sendmessage", Some(text)))
        .expect("the text answer");
    assert!(
        answered < position(&fake, "sendvoice", None).expect("sendVoice"),
        "the voice follows the text"
    );
    // Kept in the thread's directory, outside what the sandbox sees, never among the outputs.
    let thread_dir = std::fs::read_dir(dir.path().join("data/users/telegram-51/threads"))
        .expect("threads")
        .next()
        .expect("a thread")
        .expect("entry")
        .path();
    let user_data = thread_dir.join("user-data");
    assert!(
        !user_data.join("voice").exists(),
        "not in the sandbox's view"
    );
    let kept: Vec<_> = std::fs::read_dir(thread_dir.join("voice"))
        .expect("voice dir")
        .map(|entry| std::fs::read(entry.expect("entry").path()).expect("read"))
        .collect();
    assert_eq!(kept, [speech.audio().to_vec()]);
    let outputs = std::fs::read_dir(user_data.join("outputs")).map_or(0, |dir| dir.count());
    assert_eq!(outputs, 0, "no output file");
    assert!(metric(&bot, "antler_speech_total{outcome=\"ok\"}").await > spoken_before);

    // `/voice off`: the next answer is text only (its answer proves the turn is over).
    fake.send_text(private_chat(51), 51, "/voice off");
    model.push(Reply::text("Quiet now."));
    fake.send_text(private_chat(51), 51, "and now?");
    fake.wait_for(WAIT, "the quiet answer", |f| has_text(f, 51, "Quiet now."))
        .await;
    assert_eq!(speech.requests().len(), 1);
    assert_eq!(fake.calls_of("sendVoice").len(), 1);
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_is_spoken_up_to_max_chars_and_a_failing_service_leaves_the_text() {
    let (fake, model, speech) = fakes().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(
        &fake,
        &model,
        &speech,
        dir.path(),
        "",
        "    max_chars: 120\n",
    )
    .await;
    voice_on(&fake, 52).await;

    let long = "Every sentence here is spoken aloud. ".repeat(10);
    let long = long.trim_end();
    model.push(Reply::text(long));
    fake.send_text(private_chat(52), 52, "tell me a lot");
    fake.wait_for(WAIT, "the voice message", |f| {
        !f.calls_of("sendVoice").is_empty()
    })
    .await;
    assert!(has_text(&fake, 52, long), "the text answer is whole");
    let spoken = &speech.inputs()[0];
    assert!(spoken.chars().count() <= 120, "{spoken}");
    assert!(
        spoken.ends_with("spoken aloud. The rest is in the text."),
        "{spoken}"
    );

    let failed_before = metric(&bot, "antler_speech_total{outcome=\"failed\"}").await;
    speech.fail_with(503, "the voice model is overloaded");
    model.push(Reply::text("Still here, in text."));
    fake.send_text(private_chat(52), 52, "and again?");
    fake.wait_for(WAIT, "the text answer", |f| {
        has_text(f, 52, "Still here, in text.")
    })
    .await;
    // The failed synthesis happens after the text: a later command's answer in the same chat
    // proves it is over.
    fake.send_text(private_chat(52), 52, "/voice");
    fake.wait_for(WAIT, "the state", |f| {
        has_text(
            f,
            52,
            "Spoken answers are on in this conversation (/voice on); /voice off turns them off.",
        )
    })
    .await;
    assert_eq!(speech.requests().len(), 2, "asked, and refused");
    assert_eq!(
        fake.calls_of("sendVoice").len(),
        1,
        "no voice without audio"
    );
    assert!(
        !fake
            .chat_texts(52)
            .iter()
            .any(|text| text.contains("could not deliver")),
        "{:?}",
        fake.chat_texts(52)
    );
    assert!(metric(&bot, "antler_speech_total{outcome=\"failed\"}").await > failed_before);
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_with_voice_auto_answers_a_voice_note_with_voice_and_typing_with_text() {
    let (fake, model, speech) = fakes().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(
        &fake,
        &model,
        &speech,
        dir.path(),
        "    reply_with_voice: auto\n",
        "",
    )
    .await;
    model.push(Reply::text("Typed, so text."));
    fake.send_text(private_chat(53), 53, "a typed question");
    fake.wait_for(WAIT, "the typed answer", |f| {
        has_text(f, 53, "Typed, so text.")
    })
    .await;

    let file_id = fake.add_file("voice/file_7.oga", speech.audio().to_vec());
    model.push(Reply::text("Heard you."));
    fake.send_message(
        private_chat(53),
        53,
        json!({"voice": {"file_id": file_id, "file_unique_id": "UV7", "duration": 2,
            "mime_type": "audio/ogg", "file_size": speech.audio().len()}}),
    );
    fake.wait_for(WAIT, "the spoken answer", |f| {
        !f.calls_of("sendVoice").is_empty()
    })
    .await;
    assert!(has_text(&fake, 53, "Heard you."));
    assert_eq!(
        speech.inputs(),
        ["Heard you."],
        "the typed answer was not spoken"
    );
    assert_eq!(fake.calls_of("sendVoice").len(), 1);
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_message_cut_short_by_shutdown_is_sent_after_restart_without_speaking_again() {
    let (fake, model, speech) = fakes().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, &speech, dir.path(), "", "").await;
    voice_on(&fake, 54).await;
    // Telegram holds the voice message back; the daemon stops meanwhile.
    fake.fail_next("sendVoice", BotFailure::RetryAfter(1));
    model.push(Reply::text("Said once."));
    fake.send_text(private_chat(54), 54, "say it once");
    fake.wait_for(WAIT, "the held-back voice message", |f| {
        !f.calls_of("sendVoice").is_empty()
    })
    .await;
    bot.stop().await;
    assert_eq!(speech.requests().len(), 1);

    // The stopped daemon's send, waiting out the pause, holds the store a moment longer.
    let deadline = tokio::time::Instant::now() + WAIT;
    let bot = loop {
        let yaml = yaml(&fake, &model, &speech, dir.path(), "", "");
        let started = tokio::spawn(async move { Bot::start(&yaml).await }).await;
        match started {
            Ok(bot) => break bot,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(error) => panic!("no restart: {error}"),
        }
    };
    fake.wait_for(WAIT, "the voice message sent once more", |f| {
        f.calls_of("sendVoice").len() == 2
    })
    .await;
    // A later command's answer in the same chat: anything still planned has run.
    fake.send_text(private_chat(54), 54, "/voice");
    fake.wait_for(WAIT, "the state", |f| {
        has_text(
            f,
            54,
            "Spoken answers are on in this conversation (/voice on); /voice off turns them off.",
        )
    })
    .await;
    assert_eq!(fake.calls_of("sendVoice").len(), 2, "one refused, one sent");
    assert_eq!(
        speech.requests().len(),
        1,
        "the planned audio, not a new one"
    );
    let uploads = fake.uploads();
    assert_eq!(
        uploads.last().map(|u| u.bytes.as_slice()),
        Some(speech.audio())
    );
    let answers = fake
        .chat_texts(54)
        .into_iter()
        .filter(|text| text.contains("Said once."))
        .count();
    assert_eq!(answers, 1, "the text is not sent again");
    bot.stop().await;
}
