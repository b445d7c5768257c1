//! Speech to text: `POST {base_url}/audio/transcriptions` (multipart `file`, `model`,
//! `response_format: json`, optional `language`), as OpenAI, Groq and local Whisper servers
//! speak it.

use bytes::Bytes;

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
}

impl Voice {
    /// Transcribes `audio` with `config`: limits first, then one request.
    pub async fn transcribe(
        &self,
        config: &TranscriptionConfig,
        audio: AudioInput,
    ) -> Result<Transcript, TranscribeError> {
        let _ = (self.http(), config, audio);
        todo!("lane voicein")
    }
}
