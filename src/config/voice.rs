//! `voice.*`: voice notes in (speech to text before the turn) and spoken answers out (text to
//! speech after it), through any OpenAI-compatible audio endpoint (OpenAI, Groq, a local
//! Whisper or TTS server).

use antler_channel::Secret;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::ConfigProblem;

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct VoiceConfig {
    /// Voice notes and audio messages become the user's message, transcribed before the turn.
    pub transcription: TranscriptionConfig,
    /// Show the transcript in the chat before the answer (off: only the model reads it).
    pub echo_transcript: bool,
    /// Answers spoken as a voice note after the text (`/voice on`, `reply_with_voice`).
    pub speech: SpeechConfig,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TranscriptionConfig {
    /// Transcribe voice notes and audio messages from every channel.
    pub enabled: bool,
    /// The OpenAI-compatible API root; `POST {base_url}/audio/transcriptions` is called
    /// (`https://api.openai.com/v1`, `https://api.groq.com/openai/v1`, a local Whisper server).
    /// Required when enabled.
    pub base_url: Option<String>,
    /// The transcription model (`whisper-1`, `whisper-large-v3`, `gpt-4o-mini-transcribe`).
    pub model: String,
    /// Sent as `Authorization: Bearer …`, e.g. `$OPENAI_API_KEY`; unset for a local server.
    pub api_key: Option<Secret>,
    /// The spoken language as ISO-639-1 (`en`, `de`); unset = the service detects it.
    pub language: Option<String>,
    /// Longer notes are refused with a reply (and kept in the thread's uploads).
    pub max_seconds: u32,
    /// Larger files are refused with a reply (and kept, within `uploads.max_file_size`).
    pub max_mb: u32,
    /// Seconds one transcription may take before the turn answers that the service timed out.
    pub timeout_seconds: u64,
}

impl Default for TranscriptionConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            base_url: None,
            model: "whisper-1".into(),
            api_key: None,
            language: None,
            max_seconds: 300,
            max_mb: 25,
            timeout_seconds: 120,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SpeechConfig {
    /// Speak answers where a conversation asked for it (`/voice on`) or the channel's
    /// `reply_with_voice` says so.
    pub enabled: bool,
    /// The OpenAI-compatible API root; `POST {base_url}/audio/speech` is called. Required when
    /// enabled.
    pub base_url: Option<String>,
    /// The speech model (`tts-1`, `gpt-4o-mini-tts`).
    pub model: String,
    /// The voice (`alloy`, `nova`, …, as the service names them).
    pub voice: String,
    /// Sent as `Authorization: Bearer …`, e.g. `$OPENAI_API_KEY`; unset for a local server.
    pub api_key: Option<Secret>,
    /// `response_format` asked for: `opus` (OGG/Opus, what Telegram plays as a voice note),
    /// `mp3`, `aac`, `flac`, `wav`.
    pub format: String,
    /// Answers longer than this many characters are spoken up to here, with a note that the
    /// rest is in the text.
    pub max_chars: usize,
    /// Seconds one synthesis may take; past it the text answer stands alone.
    pub timeout_seconds: u64,
}

impl Default for SpeechConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            base_url: None,
            model: "tts-1".into(),
            voice: "alloy".into(),
            api_key: None,
            format: "opus".into(),
            max_chars: 2000,
            timeout_seconds: 60,
        }
    }
}

impl VoiceConfig {
    /// Problems, each naming its key (`voice.transcription.base_url`, …).
    pub fn problems(&self) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        problems.extend(self.transcription.problems());
        problems.extend(self.speech.problems());
        problems
    }
}

impl TranscriptionConfig {
    fn problems(&self) -> Vec<ConfigProblem> {
        let key = |name: &str| format!("voice.transcription.{name}");
        let mut problems = Vec::new();
        let base_url = self.base_url.as_deref().map(str::trim).unwrap_or("");
        if self.enabled && base_url.is_empty() {
            problems.push(ConfigProblem::new(
                key("base_url"),
                "transcription is enabled but no service is set: give the OpenAI-compatible API \
                 root, e.g. https://api.openai.com/v1, https://api.groq.com/openai/v1 or a local \
                 Whisper server's http://127.0.0.1:8000/v1",
            ));
        } else if !(base_url.is_empty()
            || base_url.starts_with("http://")
            || base_url.starts_with("https://"))
        {
            problems.push(ConfigProblem::new(
                key("base_url"),
                format!("`{base_url}` is not an http:// or https:// URL"),
            ));
        }
        if self.enabled && self.model.trim().is_empty() {
            problems.push(ConfigProblem::new(
                key("model"),
                "name the transcription model, e.g. whisper-1",
            ));
        }
        for (name, value) in [
            ("max_seconds", u64::from(self.max_seconds)),
            ("max_mb", u64::from(self.max_mb)),
            ("timeout_seconds", self.timeout_seconds),
        ] {
            if value == 0 {
                problems.push(ConfigProblem::new(key(name), "must be at least 1"));
            }
        }
        problems
    }
}

/// The `response_format`s OpenAI-compatible speech endpoints know, with the MIME type and file
/// extension of what they answer.
pub const SPEECH_FORMATS: [(&str, &str, &str); 6] = [
    ("opus", "audio/ogg", "ogg"),
    ("mp3", "audio/mpeg", "mp3"),
    ("aac", "audio/aac", "aac"),
    ("flac", "audio/flac", "flac"),
    ("wav", "audio/wav", "wav"),
    ("pcm", "audio/pcm", "pcm"),
];

/// The MIME type and extension of `format`'s audio; `None` for a format no service speaks.
pub fn speech_format(format: &str) -> Option<(&'static str, &'static str)> {
    SPEECH_FORMATS
        .iter()
        .find(|(name, _, _)| name.eq_ignore_ascii_case(format))
        .map(|(_, mime, extension)| (*mime, *extension))
}

impl SpeechConfig {
    /// `voice.speech.*` problems: checked even while off, so turning it on cannot fail later.
    fn problems(&self) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        let blank = self
            .base_url
            .as_deref()
            .is_none_or(|url| url.trim().is_empty());
        if self.enabled && blank {
            problems.push(ConfigProblem::new(
                "voice.speech.base_url",
                "required while voice.speech.enabled is true: the OpenAI-compatible API root, e.g. https://api.openai.com/v1",
            ));
        }
        if let Some(url) = self
            .base_url
            .as_deref()
            .filter(|url| !url.trim().is_empty())
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            problems.push(ConfigProblem::new(
                "voice.speech.base_url",
                format!("{url:?} is not an http:// or https:// URL"),
            ));
        }
        if self.max_chars == 0 {
            problems.push(ConfigProblem::new(
                "voice.speech.max_chars",
                "must be at least 1 (2000 speaks about two minutes)",
            ));
        }
        if self.timeout_seconds == 0 {
            problems.push(ConfigProblem::new(
                "voice.speech.timeout_seconds",
                "must be at least 1",
            ));
        }
        if speech_format(&self.format).is_none() {
            let known: Vec<&str> = SPEECH_FORMATS.iter().map(|(name, _, _)| *name).collect();
            problems.push(ConfigProblem::new(
                "voice.speech.format",
                format!(
                    "unknown format {:?}; use one of {} (opus is what Telegram plays as a voice note)",
                    self.format,
                    known.join(", ")
                ),
            ));
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcription_enabled_needs_a_service_and_sane_limits() {
        let paths = |config: TranscriptionConfig| -> Vec<String> {
            VoiceConfig {
                transcription: config,
                ..VoiceConfig::default()
            }
            .problems()
            .into_iter()
            .map(|problem| problem.path)
            .collect()
        };
        assert!(paths(TranscriptionConfig::default()).is_empty());
        let enabled = TranscriptionConfig {
            enabled: true,
            ..TranscriptionConfig::default()
        };
        assert_eq!(paths(enabled.clone()), ["voice.transcription.base_url"]);
        let odd = TranscriptionConfig {
            base_url: Some("api.openai.com/v1".into()),
            max_seconds: 0,
            ..enabled.clone()
        };
        assert_eq!(
            paths(odd),
            [
                "voice.transcription.base_url",
                "voice.transcription.max_seconds"
            ]
        );
        let good = TranscriptionConfig {
            base_url: Some("https://api.groq.com/openai/v1".into()),
            ..enabled
        };
        assert!(paths(good).is_empty());
    }
}

#[cfg(test)]
mod speech_tests {
    use super::*;

    fn paths(config: &SpeechConfig) -> Vec<String> {
        config.problems().into_iter().map(|p| p.path).collect()
    }

    #[test]
    fn speech_settings_are_checked_with_their_keys() {
        assert!(paths(&SpeechConfig::default()).is_empty());
        let enabled = SpeechConfig {
            enabled: true,
            ..SpeechConfig::default()
        };
        assert_eq!(paths(&enabled), ["voice.speech.base_url"]);
        let broken = SpeechConfig {
            base_url: Some("api.openai.com/v1".into()),
            max_chars: 0,
            format: "ogg".into(),
            ..SpeechConfig::default()
        };
        assert_eq!(
            paths(&broken),
            [
                "voice.speech.base_url",
                "voice.speech.max_chars",
                "voice.speech.format"
            ]
        );
        let message = broken.problems()[2].message.clone();
        assert!(
            message.contains("opus, mp3, aac, flac, wav, pcm"),
            "{message}"
        );
        let fine = SpeechConfig {
            enabled: true,
            base_url: Some("http://127.0.0.1:8000/v1".into()),
            format: "MP3".into(),
            ..SpeechConfig::default()
        };
        assert!(paths(&fine).is_empty());
    }
}
