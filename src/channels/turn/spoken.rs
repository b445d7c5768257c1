//! The spoken answer: after a chat turn's answer reached the chat, the same answer as a voice
//! message (`voice.speech`), when the conversation asked for it (`/voice on`) or else the
//! channel's `reply_with_voice` says so (`auto`: the question was a voice note).
//!
//! It is synthesized once and written under the thread's `voice/` directory (beside `user-data`,
//! so it is never taken for a file the agent made), then planned in the outbox as
//! [`OutboxStep::Voice`] and sent after the text and files, replying to the question. A restart
//! finds the planned record and sends it without synthesizing again; a failing speech service
//! leaves the text answer alone (one warning, `antler_speech_total{outcome="failed"}`).

use antler_channel::{Attachment, AudioKind, ChatKey, InboundMessage, ReplyWithVoice};
use sha2::{Digest, Sha256};

use crate::channels::deps::TurnDeps;
use crate::channels::journal::JournalEntry;
use crate::channels::outbound::send_all;
use crate::channels::outbox::{OutboxAction, OutboxRecord, OutboxStep};
use crate::channels::runtime::ChannelRuntime;
use crate::config::AppConfig;
use crate::paths::ThreadPaths;
use crate::voice::SpeechError;

/// Whether an answer to `message` is also spoken: `voice.speech.enabled`, then the
/// conversation's `/voice on|off` (`chosen`), else the channel's `reply_with_voice`.
pub(crate) fn wanted(config: &AppConfig, chosen: Option<bool>, message: &InboundMessage) -> bool {
    if !config.voice.speech.enabled {
        return false;
    }
    if let Some(on) = chosen {
        return on;
    }
    let channel = config
        .channels
        .section(&message.channel)
        .map(|section| section.reply_with_voice())
        .unwrap_or_default();
    match channel {
        ReplyWithVoice::Off => false,
        ReplyWithVoice::Always => true,
        ReplyWithVoice::Auto => message.files.iter().any(|file| {
            file.audio
                .as_ref()
                .is_some_and(|audio| matches!(audio.kind, AudioKind::Voice | AudioKind::VideoNote))
        }),
    }
}

/// Speaks `text` (the answer as the chat shows it) and sends it after the answer, once.
pub(super) async fn speak_answer(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    paths: &ThreadPaths,
    text: &str,
) {
    if runtime.parts.upload.is_none() {
        return;
    }
    let is_group = !entry.message.is_direct;
    let step = OutboxStep::Voice.key(&entry.key);
    // Planned by an attempt that was cut short: sent as it is.
    if let Ok(Some(planned)) = deps.outbox.get(&step) {
        send_all(deps, runtime, key, is_group, vec![planned]).await;
        return;
    }
    let config = deps.config.current();
    let speech = match deps.harness.voice().speak(&config.voice.speech, text).await {
        Ok(speech) => speech,
        Err(SpeechError::Empty) => return,
        Err(error) => {
            crate::metrics::speech("failed");
            tracing::warn!(%error, chat = %key, "Could not speak the answer; it was sent as text only");
            return;
        }
    };
    crate::metrics::speech("ok");
    let dir = paths.voice();
    let path = dir.join(format!("{}.{}", file_stem(&entry.key), speech.extension));
    let written = async {
        tokio::fs::create_dir_all(&dir).await?;
        tokio::fs::write(&path, &speech.bytes).await
    };
    if let Err(error) = written.await {
        tracing::warn!(%error, chat = %key, "Could not keep the spoken answer; it was sent as text only");
        return;
    }
    let attachment = Attachment {
        filename: format!("answer.{}", speech.extension),
        mime_type: speech.mime_type,
        path,
        size: speech.bytes.len() as u64,
        is_image: false,
        voice: true,
    };
    let reply_to = Some(entry.message.platform_message_id.clone()).filter(|id| !id.is_empty());
    let action = OutboxAction::Upload {
        attachment,
        reply_to,
    };
    let record = OutboxRecord::new(step, key.clone(), is_group, action);
    send_all(deps, runtime, key, is_group, vec![record]).await;
}

/// The audio file's name: the journal entry it answers, as a digest (a key holds platform ids
/// and separators no file name should).
fn file_stem(journal_key: &str) -> String {
    let digest = Sha256::digest(journal_key.as_bytes());
    format!("answer-{}", hex::encode(&digest[..12]))
}

#[cfg(test)]
mod tests {
    use antler_channel::{AudioInfo, InboundFile};

    use super::*;

    fn message(audio: Option<AudioKind>) -> InboundMessage {
        let files = audio
            .map(|kind| InboundFile {
                handle: "f1".into(),
                filename: Some("voice.ogg".into()),
                mime_type: Some("audio/ogg".into()),
                size: Some(10),
                is_image: false,
                audio: Some(AudioInfo {
                    kind,
                    duration_seconds: Some(3),
                }),
            })
            .into_iter()
            .collect();
        InboundMessage {
            workspace_id: None,
            text: String::new(),
            files,
            ..crate::channels::journal::tests::message("7")
        }
    }

    #[test]
    fn the_conversation_wins_then_the_channel_decides() {
        let mut config = AppConfig::default();
        let typed = message(None);
        let voice_note = message(Some(AudioKind::Voice));
        let audio_file = message(Some(AudioKind::Audio));
        // Speech off: never, whatever was chosen.
        assert!(!wanted(&config, Some(true), &voice_note));
        config.voice.speech.enabled = true;
        assert!(!wanted(&config, None, &voice_note), "reply_with_voice: off");
        assert!(wanted(&config, Some(true), &typed));
        config.channels.telegram.reply_with_voice = ReplyWithVoice::Auto;
        assert!(wanted(&config, None, &voice_note));
        assert!(wanted(&config, None, &message(Some(AudioKind::VideoNote))));
        assert!(!wanted(&config, None, &typed));
        assert!(
            !wanted(&config, None, &audio_file),
            "a music file is no voice note"
        );
        assert!(!wanted(&config, Some(false), &voice_note));
        config.channels.telegram.reply_with_voice = ReplyWithVoice::Always;
        assert!(wanted(&config, None, &typed));
    }

    #[test]
    fn the_file_is_named_by_its_entry() {
        let stem = file_stem("telegram\u{1f}42\u{1f}\u{1f}7");
        assert_eq!(stem.len(), "answer-".len() + 24);
        assert!(stem.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
        assert_ne!(stem, file_stem("telegram\u{1f}42\u{1f}\u{1f}8"));
    }
}
