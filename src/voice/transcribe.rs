//! Speech to text: `POST {base_url}/audio/transcriptions` (multipart `file`, `model`,
//! `response_format: json`, optional `language`), as OpenAI, Groq and local Whisper servers
//! speak it.

use std::time::Duration;

use bytes::Bytes;
use reqwest::multipart::{Form, Part};

use crate::config::voice::TranscriptionConfig;
use crate::voice::Voice;

/// One audio file to transcribe.
#[derive(Clone, Debug)]
pub struct AudioInput {
    pub bytes: Bytes,
    pub filename: String,
    pub mime_type: Option<String>,
    /// As the platform reported it; checked against `voice.transcription.max_seconds` before
    /// anything is sent.
    pub duration_seconds: Option<u32>,
}

/// What the service heard.
#[derive(Clone, Debug, PartialEq)]
pub struct Transcript {
    pub text: String,
    /// The platform's duration, else the service's (`duration` when it sends one).
    pub duration_seconds: Option<u32>,
}

/// Why a note was not transcribed; each says what to do (and names the config key).
#[derive(Debug, thiserror::Error)]
pub enum TranscribeError {
    #[error(
        "voice notes are not transcribed here; an admin can turn it on with `voice.transcription.enabled`"
    )]
    Disabled,
    #[error(
        "the voice note is {seconds} s long; at most {max} s are transcribed (`voice.transcription.max_seconds`). Please send a shorter one"
    )]
    TooLong { seconds: u32, max: u32 },
    #[error(
        "the audio file is {mb:.1} MB; at most {max_mb} MB are transcribed (`voice.transcription.max_mb`)"
    )]
    TooLarge { mb: f64, max_mb: u32 },
    #[error(
        "the transcription service at `voice.transcription.base_url` could not be reached ({0}); check that it runs and the URL is right"
    )]
    Unreachable(String),
    #[error(
        "the transcription service answered {status}: {message} (check `voice.transcription.model` and `voice.transcription.api_key`)"
    )]
    Service { status: u16, message: String },
    #[error(
        "the transcription service took longer than {0} s (`voice.transcription.timeout_seconds`)"
    )]
    Timeout(u64),
    #[error(
        "the transcription service heard no words in the voice note; please say it again or type it"
    )]
    Empty,
}

impl Voice {
    /// Transcribes `audio` with `config`: limits first (nothing is sent past them), then one
    /// request.
    pub async fn transcribe(
        &self,
        config: &TranscriptionConfig,
        audio: AudioInput,
    ) -> Result<Transcript, TranscribeError> {
        if !config.enabled {
            return Err(TranscribeError::Disabled);
        }
        let duration = audio
            .duration_seconds
            .or_else(|| crate::voice::ogg::duration_seconds(&audio.bytes));
        if let Some(seconds) = duration.filter(|seconds| *seconds > config.max_seconds) {
            return Err(TranscribeError::TooLong {
                seconds,
                max: config.max_seconds,
            });
        }
        let max_bytes = u64::from(config.max_mb) * 1024 * 1024;
        if audio.bytes.len() as u64 > max_bytes {
            return Err(TranscribeError::TooLarge {
                mb: audio.bytes.len() as f64 / (1024.0 * 1024.0),
                max_mb: config.max_mb,
            });
        }
        let base_url = config
            .base_url
            .as_deref()
            .filter(|url| !url.trim().is_empty())
            .ok_or_else(|| TranscribeError::Unreachable("no URL is set".into()))?;
        let url = format!("{}/audio/transcriptions", base_url.trim_end_matches('/'));
        let form = form(config, audio)?;
        let mut request = self
            .http()
            .post(&url)
            .timeout(Duration::from_secs(config.timeout_seconds))
            .multipart(form);
        if let Some(key) = config.api_key.as_ref().filter(|key| !key.is_empty()) {
            request = request.bearer_auth(key.expose());
        }
        let timeout = config.timeout_seconds;
        let response = request
            .send()
            .await
            .map_err(|error| transport_error(&error, timeout))?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|error| transport_error(&error, timeout))?;
        if !status.is_success() {
            let said = crate::model::provider_error::read(&body).message;
            return Err(TranscribeError::Service {
                status: status.as_u16(),
                message: said.unwrap_or_else(|| {
                    status
                        .canonical_reason()
                        .unwrap_or("no message")
                        .to_string()
                }),
            });
        }
        let answer: Answer = serde_json::from_str(&body).map_err(|_| TranscribeError::Service {
            status: status.as_u16(),
            message: "the answer was not `{\"text\": …}` JSON".into(),
        })?;
        let text = answer.text.trim().to_string();
        if text.is_empty() {
            return Err(TranscribeError::Empty);
        }
        Ok(Transcript {
            text,
            duration_seconds: duration.or(answer
                .duration
                .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
                .map(|seconds| seconds.ceil() as u32)),
        })
    }
}

/// `{"text": …}`, and `duration` where the service tells it (Groq, `verbose_json` servers).
#[derive(serde::Deserialize)]
struct Answer {
    text: String,
    #[serde(default)]
    duration: Option<f64>,
}

fn form(config: &TranscriptionConfig, audio: AudioInput) -> Result<Form, TranscribeError> {
    let filename = service_filename(&audio.filename);
    // A type the platform gave that is not a MIME type (reqwest would refuse it) is guessed
    // from the name instead.
    let mime_type = audio
        .mime_type
        .filter(|mime| mime.parse::<mime_guess::mime::Mime>().is_ok())
        .unwrap_or_else(|| {
            mime_guess::from_path(&filename)
                .first_or_octet_stream()
                .to_string()
        });
    let length = audio.bytes.len() as u64;
    let part = Part::stream_with_length(reqwest::Body::from(audio.bytes), length)
        .file_name(filename)
        .mime_str(&mime_type)
        .map_err(|error| {
            TranscribeError::Unreachable(format!("cannot build the request: {error}"))
        })?;
    let mut form = Form::new()
        .part("file", part)
        .text("model", config.model.clone())
        .text("response_format", "json");
    if let Some(language) = config
        .language
        .as_ref()
        .filter(|language| !language.trim().is_empty())
    {
        form = form.text("language", language.trim().to_string());
    }
    Ok(form)
}

/// The services tell formats by the file name's extension and know `.ogg` and `.oga` but not
/// `.opus` (Feishu's audio, Opus in OGG): such a file is sent as `.ogg`.
fn service_filename(filename: &str) -> String {
    let name = std::path::Path::new(filename)
        .file_name()
        .and_then(|name| name.to_str())
        .filter(|name| !name.is_empty())
        .unwrap_or("audio.ogg");
    match name.rsplit_once('.') {
        Some((stem, extension)) if extension.eq_ignore_ascii_case("opus") => format!("{stem}.ogg"),
        _ => name.to_string(),
    }
}

fn transport_error(error: &reqwest::Error, timeout_seconds: u64) -> TranscribeError {
    if error.is_timeout() {
        return TranscribeError::Timeout(timeout_seconds);
    }
    // The innermost cause says what happened ("Connection refused", "failed to lookup
    // address"); reqwest's own text only repeats the URL.
    let mut cause: &dyn std::error::Error = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    TranscribeError::Unreachable(cause.to_string())
}

#[cfg(test)]
#[path = "transcribe_tests.rs"]
mod tests;
