//! Text to speech: `POST {base_url}/audio/speech` (`model`, `input`, `voice`,
//! `response_format`), the audio bytes back.

use bytes::Bytes;

use crate::config::voice::SpeechConfig;
use crate::voice::Voice;

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
}

impl Voice {
    /// Speaks `text` (Markdown as the model wrote it) with `config`, up to `max_chars`.
    pub async fn speak(&self, config: &SpeechConfig, text: &str) -> Result<Speech, SpeechError> {
        let _ = (self.http(), config, text);
        todo!("lane voiceout")
    }
}
