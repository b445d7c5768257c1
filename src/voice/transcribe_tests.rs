//! `Voice::transcribe` against the fake transcription service: the request as OpenAI reads it,
//! and one test per way it refuses.

use std::time::Duration;

use antler_channel::Secret;
use antler_test_support::{FakeTranscription, TranscriptionReply, VOICE_NOTE_OGG};
use bytes::Bytes;

use super::*;

fn config(fake: &FakeTranscription) -> TranscriptionConfig {
    TranscriptionConfig {
        enabled: true,
        base_url: Some(fake.base_url()),
        ..TranscriptionConfig::default()
    }
}

fn note(duration_seconds: Option<u32>) -> AudioInput {
    AudioInput {
        bytes: Bytes::from_static(VOICE_NOTE_OGG),
        filename: "voice_10.ogg".into(),
        mime_type: Some("audio/ogg".into()),
        duration_seconds,
    }
}

#[tokio::test]
async fn a_note_is_one_multipart_request_and_its_text_comes_back() {
    let fake = FakeTranscription::start().await;
    fake.push(TranscriptionReply::text("  deploy the fix today \n"));
    let mut config = config(&fake);
    config.api_key = Some(Secret::new("sk-test"));
    config.language = Some("en".into());
    config.model = "whisper-large-v3".into();
    let transcript = Voice::new()
        .transcribe(&config, note(Some(42)))
        .await
        .expect("transcript");
    assert_eq!(
        transcript,
        Transcript {
            text: "deploy the fix today".into(),
            duration_seconds: Some(42)
        }
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.malformed, None);
    assert_eq!(request.file_name.as_deref(), Some("voice_10.ogg"));
    assert_eq!(request.content_type.as_deref(), Some("audio/ogg"));
    assert_eq!(request.file.as_deref(), Some(VOICE_NOTE_OGG));
    assert!(request.is_ogg());
    assert_eq!(request.field("model"), Some("whisper-large-v3"));
    assert_eq!(request.field("response_format"), Some("json"));
    assert_eq!(request.field("language"), Some("en"));
    assert_eq!(request.authorization.as_deref(), Some("Bearer sk-test"));
}

#[tokio::test]
async fn without_a_platform_duration_the_ogg_or_the_service_tells_it() {
    let fake = FakeTranscription::start().await;
    fake.push(TranscriptionReply::text("hello"));
    fake.push(TranscriptionReply::Text {
        text: "a song".into(),
        duration: Some(61.2),
    });
    let voice = Voice::new();
    let from_ogg = voice
        .transcribe(&config(&fake), note(None))
        .await
        .expect("ogg");
    assert_eq!(from_ogg.duration_seconds, Some(2));
    let mp3 = AudioInput {
        bytes: Bytes::from_static(b"ID3\x03 not really an mp3"),
        filename: "talk.opus".into(),
        mime_type: None,
        duration_seconds: None,
    };
    let from_service = voice.transcribe(&config(&fake), mp3).await.expect("mp3");
    assert_eq!(from_service.duration_seconds, Some(62));
    let requests = fake.requests();
    // No key, no language: neither is sent; `.opus` goes as `.ogg`, which the services know.
    assert_eq!(requests[0].authorization, None);
    assert_eq!(requests[0].field("language"), None);
    assert_eq!(requests[1].file_name.as_deref(), Some("talk.ogg"));
    assert_eq!(requests[1].content_type.as_deref(), Some("audio/ogg"));
}

#[tokio::test]
async fn a_long_or_large_note_is_refused_before_anything_is_sent() {
    let fake = FakeTranscription::start().await;
    let mut config = config(&fake);
    let voice = Voice::new();
    let long = voice.transcribe(&config, note(Some(2400))).await;
    assert!(
        matches!(
            long,
            Err(TranscribeError::TooLong {
                seconds: 2400,
                max: 300
            })
        ),
        "{long:?}"
    );
    config.max_seconds = 1;
    let measured = voice.transcribe(&config, note(None)).await;
    assert!(
        matches!(measured, Err(TranscribeError::TooLong { seconds: 2, .. })),
        "{measured:?}"
    );
    config.max_seconds = 300;
    config.max_mb = 1;
    let large = AudioInput {
        bytes: Bytes::from(vec![0_u8; 1024 * 1024 + 1]),
        ..note(Some(10))
    };
    let error = voice.transcribe(&config, large).await.expect_err("large");
    assert!(matches!(error, TranscribeError::TooLarge { max_mb: 1, .. }));
    assert!(
        error.to_string().contains("`voice.transcription.max_mb`"),
        "{error}"
    );
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn a_service_error_is_told_with_the_services_own_message() {
    let fake = FakeTranscription::start().await;
    fake.push(TranscriptionReply::error(401, "Incorrect API key provided"));
    let error = Voice::new()
        .transcribe(&config(&fake), note(Some(2)))
        .await
        .expect_err("401");
    assert!(
        matches!(&error, TranscribeError::Service { status: 401, message } if message == "Incorrect API key provided"),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("`voice.transcription.api_key`"),
        "{error}"
    );
}

#[tokio::test]
async fn an_empty_transcript_is_an_error_of_its_own() {
    let fake = FakeTranscription::start().await;
    fake.push(TranscriptionReply::text("   "));
    let error = Voice::new()
        .transcribe(&config(&fake), note(Some(2)))
        .await
        .expect_err("empty");
    assert!(matches!(error, TranscribeError::Empty), "{error:?}");
}

#[tokio::test]
async fn a_service_that_is_not_there_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let config = TranscriptionConfig {
        enabled: true,
        base_url: Some(format!("http://127.0.0.1:{port}/v1")),
        ..TranscriptionConfig::default()
    };
    let error = Voice::new()
        .transcribe(&config, note(Some(2)))
        .await
        .expect_err("down");
    assert!(
        matches!(error, TranscribeError::Unreachable(_)),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("`voice.transcription.base_url`"),
        "{error}"
    );
}

#[tokio::test]
async fn a_slow_service_times_out_at_the_configured_seconds() {
    let fake = FakeTranscription::start().await;
    fake.push(TranscriptionReply::Slow(
        Duration::from_secs(30),
        Box::new(TranscriptionReply::text("too late")),
    ));
    let config = TranscriptionConfig {
        timeout_seconds: 1,
        ..config(&fake)
    };
    let error = Voice::new()
        .transcribe(&config, note(Some(2)))
        .await
        .expect_err("slow");
    assert!(matches!(error, TranscribeError::Timeout(1)), "{error:?}");
}

#[tokio::test]
async fn transcription_turned_off_sends_nothing() {
    let fake = FakeTranscription::start().await;
    let config = TranscriptionConfig {
        enabled: false,
        ..config(&fake)
    };
    let error = Voice::new()
        .transcribe(&config, note(Some(2)))
        .await
        .expect_err("off");
    assert!(matches!(error, TranscribeError::Disabled));
    assert!(fake.requests().is_empty());
}
