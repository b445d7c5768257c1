//! A chat turn's voice step: the voice notes and audio files of a message (what the adapter
//! marked `InboundFile::audio`), already stored in the thread's uploads, are transcribed before
//! the run (`voice.transcription`), so the model reads the person's words as their message, and
//! only the transcription call is added to the turn. A note that is refused (too long, too
//! large, the service failing) is still kept, and the reason (naming its key) is told: as the
//! reply when the message had nothing else to answer, else as a note in the message. With
//! `voice.echo_transcript` the chat sees the transcript too, as its own message before the
//! status message.

use antler_channel::{AudioKind, ChatKey, InboundMessage};

use crate::channels::deps::TurnDeps;
use crate::channels::files::Received;
use crate::channels::journal::JournalEntry;
use crate::channels::outbound::reply;
use crate::channels::outbox::OutboxStep;
use crate::channels::runtime::ChannelRuntime;
use crate::config::AppConfig;
use crate::paths::ThreadPaths;
use crate::usage::{UsageStore, today};
use crate::voice::{AudioInput, TranscribeError};

/// What the turn heard in a message's audio.
#[derive(Debug, Default)]
pub(super) struct Heard {
    /// The transcripts, in the message's order.
    pub(super) transcripts: Vec<Transcribed>,
    /// The notes that were not transcribed, with why (each names its config key).
    pub(super) refusals: Vec<(AudioKind, String)>,
    /// Every received file was audio: without a transcript there is nothing else to answer.
    only_audio: bool,
}

#[derive(Debug)]
pub(super) struct Transcribed {
    kind: AudioKind,
    seconds: Option<u32>,
    text: String,
}

/// Whether this message's turn transcribes: then it does so before its status message, so an
/// echoed transcript comes first and a refused note gets a reply instead of a status message.
pub(super) fn expected(config: &AppConfig, message: &InboundMessage) -> bool {
    config.voice.transcription.enabled && message.files.iter().any(|file| file.audio.is_some())
}

/// Transcribes the received audio of a message, one note at a time, counting each in the
/// metrics and the seconds heard in `user_id`'s usage.
pub(super) async fn transcribe(
    deps: &TurnDeps,
    config: &AppConfig,
    user_id: &str,
    paths: &ThreadPaths,
    received: &Received,
) -> Heard {
    let mut heard = Heard {
        only_audio: !received.audio.is_empty() && received.audio.len() == received.files.len(),
        ..Heard::default()
    };
    let settings = &config.voice.transcription;
    if !settings.enabled {
        return heard;
    }
    for (idx, audio, mime_type) in &received.audio {
        let Some(filename) = received.files[*idx]["filename"].as_str() else {
            continue;
        };
        let bytes = match tokio::fs::read(paths.uploads().join(filename)).await {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::warn!(%error, filename, "Could not read a stored voice note");
                heard
                    .refusals
                    .push((audio.kind, format!("{filename} could not be read back")));
                continue;
            }
        };
        let input = AudioInput {
            bytes: bytes.into(),
            filename: filename.to_string(),
            mime_type: mime_type.clone(),
            duration_seconds: audio.duration_seconds,
        };
        match deps.harness.voice().transcribe(settings, input).await {
            Ok(transcript) => {
                let seconds = transcript.duration_seconds.unwrap_or(0);
                crate::metrics::transcription("ok", u64::from(seconds));
                record_seconds(deps, user_id, &settings.model, seconds);
                heard.transcripts.push(Transcribed {
                    kind: audio.kind,
                    seconds: transcript.duration_seconds,
                    text: transcript.text,
                });
            }
            Err(error) => {
                let outcome = match &error {
                    TranscribeError::TooLong { .. } => "too_long",
                    TranscribeError::TooLarge { .. } => "too_large",
                    _ => "failed",
                };
                crate::metrics::transcription(outcome, 0);
                if outcome == "failed" {
                    tracing::warn!(%error, filename, "Could not transcribe a voice note");
                }
                heard.refusals.push((audio.kind, error.to_string()));
            }
        }
    }
    heard
}

impl Heard {
    /// The reply that answers the message instead of a run: a note was refused and the message
    /// had nothing else (no typed text, no other file, no other transcript).
    pub(super) fn refusal_reply(&self, typed: &str) -> Option<String> {
        let (kind, reason) = self.refusals.first()?;
        let nothing_else =
            self.transcripts.is_empty() && self.only_audio && typed.trim().is_empty();
        nothing_else.then(|| {
            format!(
                "🎙 Sorry, I could not listen to your {}: {reason}. It is kept in this \
                 conversation's files.",
                label(*kind)
            )
        })
    }

    /// The human message's text: each transcript marked as one, with its length, then the
    /// notes that were refused, then what the person typed.
    pub(super) fn content(&self, typed: &str) -> String {
        let mut parts: Vec<String> = self
            .transcripts
            .iter()
            .map(|heard| match heard.seconds {
                Some(seconds) => format!(
                    "[{}, {}, transcribed]\n{}",
                    label(heard.kind),
                    clock(seconds),
                    heard.text
                ),
                None => format!("[{}, transcribed]\n{}", label(heard.kind), heard.text),
            })
            .collect();
        for (kind, reason) in &self.refusals {
            parts.push(format!("[{} not transcribed: {reason}]", label(*kind)));
        }
        if !typed.trim().is_empty() || parts.is_empty() {
            parts.push(typed.to_string());
        }
        parts.join("\n\n")
    }

    /// The transcripts as the chat shows them (`🎙 “…”`); `None` without any.
    fn echo(&self) -> Option<String> {
        let shown: Vec<String> = self
            .transcripts
            .iter()
            .map(|heard| format!("🎙 “{}”", heard.text))
            .collect();
        (!shown.is_empty()).then(|| shown.join("\n\n"))
    }
}

/// Posts the transcripts in the chat, once per message (the outbox's `Transcript` records),
/// when `voice.echo_transcript` is on.
pub(super) async fn echo(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    config: &AppConfig,
    heard: &Heard,
) {
    if !config.voice.echo_transcript {
        return;
    }
    if let Some(text) = heard.echo() {
        reply(deps, runtime, key, entry, OutboxStep::Transcript, &text).await;
    }
}

fn record_seconds(deps: &TurnDeps, user_id: &str, model: &str, seconds: u32) {
    if seconds == 0 {
        return;
    }
    let usage = UsageStore::new(deps.harness.threads().store().clone());
    if let Err(error) = usage.record_audio(user_id, today(), model, u64::from(seconds)) {
        tracing::warn!(%error, user_id, "Could not record the seconds transcribed");
    }
}

fn label(kind: AudioKind) -> &'static str {
    match kind {
        AudioKind::Voice => "voice note",
        AudioKind::Audio => "audio",
        AudioKind::VideoNote => "video note",
    }
}

/// `0:42`, `12:05`, `1:02:03`.
fn clock(seconds: u32) -> String {
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if hours > 0 {
        format!("{hours}:{minutes:02}:{seconds:02}")
    } else {
        format!("{minutes}:{seconds:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heard(transcripts: Vec<Transcribed>, refusals: Vec<(AudioKind, String)>) -> Heard {
        Heard {
            transcripts,
            refusals,
            only_audio: true,
        }
    }

    fn note(seconds: Option<u32>, text: &str) -> Transcribed {
        Transcribed {
            kind: AudioKind::Voice,
            seconds,
            text: text.into(),
        }
    }

    #[test]
    fn the_transcript_is_the_message_marked_with_its_length_and_typed_text_after_it() {
        let one = heard(vec![note(Some(42), "deploy the fix")], Vec::new());
        assert_eq!(
            one.content(""),
            "[voice note, 0:42, transcribed]\ndeploy the fix"
        );
        assert_eq!(
            one.content("and tell Bob"),
            "[voice note, 0:42, transcribed]\ndeploy the fix\n\nand tell Bob"
        );
        let long = heard(
            vec![
                note(Some(3723), "a lecture"),
                Transcribed {
                    kind: AudioKind::VideoNote,
                    seconds: None,
                    text: "hi".into(),
                },
            ],
            Vec::new(),
        );
        assert_eq!(
            long.content(""),
            "[voice note, 1:02:03, transcribed]\na lecture\n\n[video note, transcribed]\nhi"
        );
        assert_eq!(
            one.echo().as_deref(),
            Some("🎙 “deploy the fix”"),
            "quoted as the chat shows it"
        );
        assert_eq!(Heard::default().content("plain text"), "plain text");
    }

    #[test]
    fn a_refusal_is_the_reply_only_when_nothing_else_was_said() {
        let reason = "the voice note is 2400 s long (`voice.transcription.max_seconds`)";
        let refused = heard(Vec::new(), vec![(AudioKind::Voice, reason.into())]);
        let reply = refused.refusal_reply("").expect("a reply");
        assert!(reply.contains(reason), "{reply}");
        assert!(reply.contains("voice note"), "{reply}");
        assert_eq!(refused.refusal_reply("what about this?"), None);
        assert_eq!(
            refused.content("what about this?"),
            format!("[voice note not transcribed: {reason}]\n\nwhat about this?")
        );
        let with_file = Heard {
            only_audio: false,
            ..heard(Vec::new(), vec![(AudioKind::Audio, reason.into())])
        };
        assert_eq!(with_file.refusal_reply(""), None);
        let one_heard = heard(
            vec![note(Some(3), "hello")],
            vec![(AudioKind::Voice, reason.into())],
        );
        assert_eq!(one_heard.refusal_reply(""), None);
        assert_eq!(Heard::default().refusal_reply(""), None);
    }
}
