//! Text to speech: `POST {base_url}/audio/speech` (`model`, `input`, `voice`,
//! `response_format`), the audio bytes back.

use std::time::Duration;

use bytes::Bytes;
use serde_json::json;

use crate::config::voice::SpeechConfig;
use crate::voice::Voice;
use crate::voice::speakable::speakable;

pub use crate::config::voice::{SPEECH_FORMATS as FORMATS, speech_format as format_of};

/// How much of a failing service's answer a log line or reply carries.
const MESSAGE_CHARS: usize = 300;

/// A spoken answer.
#[derive(Clone, Debug)]
pub struct Speech {
    pub bytes: Bytes,
    /// `audio/ogg` for `opus`, `audio/mpeg` for `mp3`, …
    pub mime_type: String,
    /// `ogg`, `mp3`, …: the file name's extension.
    pub extension: String,
    /// The answer was longer than `voice.speech.max_chars` and was spoken up to there.
    pub truncated: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SpeechError {
    #[error(
        "the speech service at `voice.speech.base_url` could not be reached ({0}); the answer stays text"
    )]
    Unreachable(String),
    #[error(
        "the speech service answered {status}: {message} (check `voice.speech.model`, `voice.speech.voice` and `voice.speech.api_key`)"
    )]
    Service { status: u16, message: String },
    #[error("the speech service took longer than {0} s (`voice.speech.timeout_seconds`)")]
    Timeout(u64),
    /// Nothing of the answer can be said (it is empty once Markdown is dropped).
    #[error("the answer has nothing to speak")]
    Empty,
}

impl Voice {
    /// Speaks `text` (Markdown as the model wrote it) with `config`, up to `max_chars`.
    pub async fn speak(&self, config: &SpeechConfig, text: &str) -> Result<Speech, SpeechError> {
        let (input, truncated) = speakable(text, config.max_chars);
        if input.trim().is_empty() {
            return Err(SpeechError::Empty);
        }
        let base_url = config
            .base_url
            .as_deref()
            .ok_or_else(|| SpeechError::Unreachable("no URL is set".into()))?;
        let url = format!("{}/audio/speech", base_url.trim_end_matches('/'));
        // `problems()` refuses other formats; a caller with an unchecked config gets Opus.
        let (format, (mime_type, extension)) = match format_of(&config.format) {
            Some(known) => (config.format.to_ascii_lowercase(), known),
            None => ("opus".to_string(), ("audio/ogg", "ogg")),
        };
        let body = json!({
            "model": config.model,
            "input": input,
            "voice": config.voice,
            "response_format": format,
        });
        let mut request = self
            .http()
            .post(&url)
            .timeout(Duration::from_secs(config.timeout_seconds))
            .json(&body);
        if let Some(key) = &config.api_key {
            request = request.bearer_auth(key.expose());
        }
        let failed = |error: reqwest::Error| {
            if error.is_timeout() {
                SpeechError::Timeout(config.timeout_seconds)
            } else {
                SpeechError::Unreachable(without_url(&error))
            }
        };
        let response = request.send().await.map_err(failed)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(failed)?;
        if !status.is_success() {
            return Err(SpeechError::Service {
                status: status.as_u16(),
                message: service_message(&bytes),
            });
        }
        if bytes.is_empty() {
            return Err(SpeechError::Service {
                status: status.as_u16(),
                message: "no audio in the answer".into(),
            });
        }
        Ok(Speech {
            bytes,
            mime_type: mime_type.into(),
            extension: extension.into(),
            truncated,
        })
    }
}

/// The error's text without the URL (it may carry a key in its query).
fn without_url(error: &reqwest::Error) -> String {
    let mut error_text = error.to_string();
    if let Some(url) = error.url() {
        error_text = error_text.replace(url.as_str(), "the service");
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        error_text = format!("{error_text}: {cause}");
        source = cause.source();
    }
    error_text
}

/// The service's own explanation: OpenAI's `{"error": {"message"}}`, a `detail` or `message`,
/// else the body's first characters.
fn service_message(body: &[u8]) -> String {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let named = json.as_ref().and_then(|json| {
        [
            json.pointer("/error/message"),
            json.get("error"),
            json.get("detail"),
            json.get("message"),
        ]
        .into_iter()
        .flatten()
        .find_map(|value| value.as_str().map(str::to_string))
    });
    let text = named.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    let text = if text.is_empty() {
        "no explanation".to_string()
    } else {
        text
    };
    text.chars().take(MESSAGE_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use antler_channel::Secret;
    use antler_test_support::{FAKE_SPEECH_AUDIO, FakeSpeech};

    use super::*;
    use crate::voice::speakable::REST_IN_TEXT;

    fn config(base_url: String) -> SpeechConfig {
        SpeechConfig {
            enabled: true,
            base_url: Some(base_url),
            api_key: Some(Secret::new("sk-speech")),
            ..SpeechConfig::default()
        }
    }

    #[tokio::test]
    async fn the_answer_is_spoken_without_markdown_and_comes_back_as_ogg() {
        let fake = FakeSpeech::start().await;
        let speech = Voice::new()
            .speak(
                &config(fake.base_url()),
                "**Done.** See [the log](https://x.example).",
            )
            .await
            .expect("spoken");
        assert_eq!(speech.bytes.as_ref(), FAKE_SPEECH_AUDIO);
        assert_eq!(
            (speech.mime_type.as_str(), speech.extension.as_str()),
            ("audio/ogg", "ogg")
        );
        assert!(!speech.truncated);
        let requests = fake.requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(
            requests[0].body,
            json!({"model": "tts-1", "input": "Done. See the log.", "voice": "alloy", "response_format": "opus"})
        );
        assert_eq!(
            requests[0].header("authorization"),
            Some("Bearer sk-speech")
        );
    }

    #[tokio::test]
    async fn a_long_answer_is_cut_at_max_chars_with_the_note() {
        let fake = FakeSpeech::start().await;
        let mut config = config(fake.base_url());
        config.max_chars = 100;
        config.format = "mp3".into();
        config.api_key = None;
        let text = "This sentence is spoken. ".repeat(20);
        let speech = Voice::new().speak(&config, &text).await.expect("spoken");
        assert!(speech.truncated);
        assert_eq!(
            (speech.mime_type.as_str(), speech.extension.as_str()),
            ("audio/mpeg", "mp3")
        );
        let input = &fake.inputs()[0];
        assert!(input.chars().count() <= 100, "{input}");
        assert!(
            input.ends_with(&format!("spoken. {REST_IN_TEXT}")),
            "{input}"
        );
        let request = &fake.requests()[0];
        assert_eq!(request.body["response_format"], "mp3");
        assert_eq!(request.header("authorization"), None);
    }

    #[tokio::test]
    async fn a_failing_service_is_named_with_its_message() {
        let fake = FakeSpeech::start().await;
        fake.fail_with(503, "model overloaded");
        let error = Voice::new()
            .speak(&config(fake.base_url()), "Hello.")
            .await
            .expect_err("failed");
        assert!(
            matches!(&error, SpeechError::Service { status: 503, message } if message == "model overloaded"),
            "{error:?}"
        );
        assert!(error.to_string().contains("voice.speech.model"), "{error}");
    }

    #[tokio::test]
    async fn an_unreachable_service_and_an_empty_answer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        let error = Voice::new()
            .speak(&config(format!("http://{addr}/v1")), "Hello.")
            .await
            .expect_err("unreachable");
        assert!(matches!(error, SpeechError::Unreachable(_)), "{error:?}");
        assert!(
            error.to_string().contains("voice.speech.base_url"),
            "{error}"
        );
        let error = Voice::new()
            .speak(&config(format!("http://{addr}/v1")), "  \n**  **")
            .await
            .expect_err("empty");
        assert!(matches!(error, SpeechError::Empty), "{error:?}");
    }

    #[tokio::test]
    async fn a_slow_service_times_out() {
        // A listener that accepts and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                open.push(socket);
            }
        });
        let mut config = config(format!("http://{addr}/v1"));
        config.timeout_seconds = 1;
        let error = Voice::new()
            .speak(&config, "Hello.")
            .await
            .expect_err("timeout");
        assert!(matches!(error, SpeechError::Timeout(1)), "{error:?}");
        held.abort();
    }

    #[test]
    fn formats_have_their_types() {
        assert_eq!(format_of("opus"), Some(("audio/ogg", "ogg")));
        assert_eq!(format_of("MP3"), Some(("audio/mpeg", "mp3")));
        assert_eq!(format_of("ogg"), None);
    }
}
