//! Normalized inbound messages and the local files sent with replies.

use serde::{Deserialize, Serialize};

use crate::key::ChatKey;

/// A message a person sent on some platform, normalized. This is what the daemon journals, so
/// it carries only what answering needs, never the whole platform payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboundMessage {
    pub channel: String,
    /// Team / guild / tenant; part of the deduplication key.
    pub workspace_id: Option<String>,
    pub chat_id: String,
    pub topic_id: Option<String>,
    pub user_id: String,
    pub display_name: Option<String>,
    /// The platform's id for this message: redeliveries carry the same one.
    pub platform_message_id: String,
    pub text: String,
    pub files: Vec<InboundFile>,
    pub is_direct: bool,
    pub mentions_bot: bool,
    /// The platform message id this one replies to.
    pub reply_to: Option<String>,
    /// A reply inside a platform thread (a Slack thread) that does not mention the bot. Where
    /// only mentions are answered, the daemon still answers it when the bot already takes part
    /// in that thread's conversation (it has a thread for the message's chat key), so people
    /// can follow up without mentioning the bot every time.
    #[serde(default)]
    pub thread_reply: bool,
    /// Sent by another bot or app (never this bot: adapters drop its own messages). The daemon
    /// answers it only when the sender is in the channel's `allowed_bots`, and stops answering
    /// bots in a conversation after `bot_turn_limit` bot turns without a person in between.
    #[serde(default)]
    pub is_bot: bool,
    /// The platform's own id of the sending bot where it differs from `user_id` (Slack's
    /// `bot_id`, `B…`); `allowed_bots` may name either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot_id: Option<String>,
    /// Earlier messages the platform delivered with this one (Telegram's replied-to message,
    /// or the part of it the person quoted): shown to the model like fetched history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<crate::history::HistoryMessage>,
    /// A click on one of the bot's buttons ([`crate::SendButtons`]); `text` is then empty and
    /// `platform_message_id` is the click's own id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub click: Option<crate::buttons::ButtonClick>,
}

impl InboundMessage {
    pub fn chat_key(&self) -> ChatKey {
        ChatKey::new(&self.channel, &self.chat_id, self.topic_id.clone())
    }
}

/// A file attached to an inbound message, fetched later through [`crate::DownloadFile`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboundFile {
    /// Adapter-specific handle (Telegram `file_id`, Slack URL, …).
    pub handle: String,
    pub filename: Option<String>,
    pub mime_type: Option<String>,
    pub size: Option<u64>,
    pub is_image: bool,
    /// A voice note or audio message the daemon transcribes before the turn
    /// (`voice.transcription`); `None` for every other file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<AudioInfo>,
}

/// What an audio attachment is, as the platform said.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioInfo {
    pub kind: AudioKind,
    /// The length the platform reported (Telegram `duration`, Discord `duration_secs`, Feishu's
    /// `duration` in ms rounded up, Slack's `duration_ms`); `None` when it gave none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<u32>,
}

/// The kinds of audio people send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AudioKind {
    /// Recorded in the app to be heard (Telegram `voice`, a Slack clip, a Discord voice
    /// message, a Feishu `audio` message): what `reply_with_voice: auto` answers with voice.
    Voice,
    /// An audio file (Telegram `audio`, an `audio/*` attachment).
    Audio,
    /// Telegram's round video note: its sound track is transcribed.
    VideoNote,
}

/// A local file to upload with a reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    pub filename: String,
    pub mime_type: String,
    pub path: std::path::PathBuf,
    pub size: u64,
    pub is_image: bool,
    /// A spoken answer (`voice.speech`): Telegram sends it with `sendVoice` (OGG/Opus), the
    /// other platforms as an audio file.
    #[serde(default)]
    pub voice: bool,
}
