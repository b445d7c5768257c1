//! Voice through OpenAI-compatible audio endpoints: a voice note's words before its turn
//! (`transcribe`, `voice.transcription`) and an answer spoken after it (`speech`,
//! `voice.speech`). One HTTP client for both; the settings are read per call, so a reload
//! applies at the next note.

mod ogg;
pub mod speakable;
pub mod speech;
pub mod transcribe;

pub use speech::{Speech, SpeechError};
pub use transcribe::{AudioInput, TranscribeError, Transcript};

/// The audio endpoints' client (cheap to clone). Lives in the harness (`Harness::voice`).
#[derive(Clone, Default)]
pub struct Voice {
    http: reqwest::Client,
}

impl Voice {
    pub fn new() -> Self {
        Self {
            http: reqwest::Client::new(),
        }
    }

    fn http(&self) -> &reqwest::Client {
        &self.http
    }
}
