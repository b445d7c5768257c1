//! Telegram voice notes heard before the turn: the fake Bot API serves a real OGG/Opus note,
//! the fake transcription service receives it as OpenAI's multipart request, and the scripted
//! model reads the transcript as the user's message; refusals (too long, the service down) are
//! answered with the config key to change, and the note is kept in the thread's uploads.

use std::path::{Path, PathBuf};

use antler_test_support::{
    FakeOpenAi, FakeTelegram, FakeTranscription, Reply, TranscriptionReply, VOICE_NOTE_OGG,
    private_chat,
};

use super::{Bot, WAIT, config_yaml};

const USER: i64 = 42;
const HEARD: &str = "please summarise yesterday's incident report";

struct Voice {
    fake: FakeTelegram,
    model: FakeOpenAi,
    dir: tempfile::TempDir,
    bot: Bot,
}

/// A daemon with Telegram and transcription at `base_url`; `voice_extra` adds keys under
/// `voice:` (2-space indented).
async fn start(base_url: &str, voice_extra: &str) -> Voice {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = format!(
        "{}voice:\n  transcription:\n    enabled: true\n    base_url: {base_url}\n    model: whisper-large-v3\n    timeout_seconds: 20\n{voice_extra}",
        config_yaml(dir.path(), &fake, &model, ""),
    );
    let bot = Bot::start(&yaml).await;
    Voice {
        fake,
        model,
        dir,
        bot,
    }
}

/// The bot's message in the chat that contains `part`, once there is one.
async fn bot_says(fake: &FakeTelegram, part: &str) -> String {
    fake.wait_for(WAIT, part, |f| {
        f.chat_texts(USER).iter().any(|text| text.contains(part))
    })
    .await;
    fake.chat_texts(USER)
        .into_iter()
        .find(|text| text.contains(part))
        .unwrap_or_default()
}

/// The files in the uploads of the user's one thread.
fn uploads(data: &Path) -> Vec<String> {
    let threads: PathBuf = data.join(format!("data/users/telegram-{USER}/threads"));
    let Some(thread) = std::fs::read_dir(&threads)
        .ok()
        .and_then(|mut entries| entries.next())
        .and_then(Result::ok)
    else {
        return Vec::new();
    };
    let mut names: Vec<String> = std::fs::read_dir(thread.path().join("user-data/uploads"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_transcribed_once_and_the_model_reads_it_as_the_message() {
    let transcription = FakeTranscription::start().await;
    transcription.push(TranscriptionReply::text(HEARD));
    let voice = start(&transcription.base_url(), "").await;
    voice.model.push(Reply::text("Here is the summary."));
    let note = voice
        .fake
        .send_voice(private_chat(USER), USER, VOICE_NOTE_OGG.to_vec(), 42);
    bot_says(&voice.fake, "Here is the summary.").await;

    let requests = transcription.requests();
    assert_eq!(requests.len(), 1, "one transcription call");
    let request = &requests[0];
    assert_eq!(request.malformed, None);
    assert_eq!(
        request.file_name.as_deref(),
        Some(format!("voice_{note}.ogg").as_str())
    );
    assert_eq!(request.content_type.as_deref(), Some("audio/ogg"));
    assert!(request.is_ogg(), "the file part is the note's OGG");
    assert_eq!(request.file.as_deref(), Some(VOICE_NOTE_OGG));
    assert_eq!(request.field("model"), Some("whisper-large-v3"));
    assert_eq!(request.field("response_format"), Some("json"));

    let model_requests = voice.model.requests();
    assert_eq!(model_requests.len(), 1, "no model call but the turn's");
    let last_user = model_requests[0]["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .map(|message| message["content"].to_string())
        .unwrap_or_default();
    assert!(
        last_user.contains(&format!("[voice note, 0:42, transcribed]\\n{HEARD}")),
        "{last_user}"
    );
    // Echo is off: the chat shows only the answer; the note stays in the thread's uploads.
    assert!(
        voice
            .fake
            .chat_texts(USER)
            .iter()
            .all(|text| !text.contains(HEARD)),
        "{:?}",
        voice.fake.chat_texts(USER)
    );
    assert_eq!(uploads(voice.dir.path()), [format!("voice_{note}.ogg")]);

    // `/usage` counts the seconds under the transcription model.
    voice.fake.send_text(private_chat(USER), USER, "/usage");
    let usage = bot_says(&voice.fake, "whisper-large-v3").await;
    assert!(
        usage.contains("whisper-large-v3 (transcription): 42 s of audio transcribed"),
        "{usage}"
    );
    voice.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_shows_the_transcript_before_the_answer() {
    let transcription = FakeTranscription::start().await;
    transcription.push(TranscriptionReply::text(HEARD));
    let voice = start(&transcription.base_url(), "  echo_transcript: true\n").await;
    voice.model.push(Reply::text("Here is the summary."));
    voice
        .fake
        .send_voice(private_chat(USER), USER, VOICE_NOTE_OGG.to_vec(), 3);
    bot_says(&voice.fake, "Here is the summary.").await;
    let texts = voice.fake.chat_texts(USER);
    assert_eq!(
        texts,
        [format!("🎙 “{HEARD}”"), "Here is the summary.".to_string()],
        "the transcript, then the status message the answer replaced"
    );
    voice.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forty_minute_note_is_refused_with_the_key_and_kept() {
    let transcription = FakeTranscription::start().await;
    let voice = start(&transcription.base_url(), "").await;
    let note = voice
        .fake
        .send_voice(private_chat(USER), USER, VOICE_NOTE_OGG.to_vec(), 2400);
    let reply = bot_says(&voice.fake, "voice.transcription.max_seconds").await;
    assert!(reply.contains("2400 s"), "{reply}");
    assert!(transcription.requests().is_empty(), "nothing was sent");
    assert!(voice.model.requests().is_empty(), "no run");
    assert_eq!(uploads(voice.dir.path()), [format!("voice_{note}.ogg")]);
    assert_eq!(voice.fake.chat_texts(USER), [reply], "no status message");
    // The recorder is the process's: other tests' daemons count into it too.
    let metrics = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
        .get(format!("http://{}/metrics", voice.bot.addr))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let value = |series: &str| -> u64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in /metrics"))
    };
    assert!(value(r#"antler_transcriptions_total{outcome="too_long"}"#) >= 1);
    for outcome in ["ok", "too_large", "failed"] {
        value(&format!(
            r#"antler_transcriptions_total{{outcome="{outcome}"}}"#
        ));
    }
    value("antler_transcribed_seconds_total");
    voice.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_down_is_answered_with_the_key_to_check() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let down = format!("http://{}/v1", listener.local_addr().expect("addr"));
    drop(listener);
    let voice = start(&down, "").await;
    voice
        .fake
        .send_voice(private_chat(USER), USER, VOICE_NOTE_OGG.to_vec(), 5);
    let reply = bot_says(&voice.fake, "voice.transcription.base_url").await;
    assert!(reply.contains("could not be reached"), "{reply}");
    assert!(voice.model.requests().is_empty(), "no run");

    // With typed words the run goes on, the model told why the note is missing.
    voice
        .model
        .push(Reply::text("I could not hear it, but: yes."));
    voice.fake.send_message(
        private_chat(USER),
        USER,
        serde_json::json!({"caption": "is this right?", "voice": {
            "file_id": voice.fake.add_file("v.oga", VOICE_NOTE_OGG.to_vec()),
            "file_unique_id": "UV2", "duration": 5, "mime_type": "audio/ogg",
            "file_size": VOICE_NOTE_OGG.len()}}),
    );
    bot_says(&voice.fake, "I could not hear it, but: yes.").await;
    let asked = voice.model.requests()[0].to_string();
    assert!(asked.contains("[voice note not transcribed: "), "{asked}");
    assert!(asked.contains("is this right?"), "{asked}");
    voice.bot.stop().await;
}
