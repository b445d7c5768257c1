//! Discord messages → `InboundMessage`: which conversation, who, what, files.
//!
//! Mentions: the bot is mentioned when Discord lists it in the message's `mentions` and its
//! `<@id>` is in the text outside code; a `<@id>` typed in code, or text Discord did not
//! resolve to a mention (an empty `mentions`), is not one. A reply to the bot counts too.
//!
//! Dedupe key: the daemon journals by (channel, workspace, chat, message id), filled here with
//! (`discord`, guild id, channel id, the message's snowflake). A MESSAGE_CREATE that the gateway
//! replays after a RESUME carries the same snowflake, so it lands on the same journal entry and
//! is answered once (serenity itself does no de-duplication).
//!
//! Conversations (chat keys): a DM is one conversation (`discord:{dm channel}`). In a guild,
//! the chat is always the text channel, so `allowed_channels` and `free_channels` name the
//! channels people know; a Discord thread is the topic (`discord:{channel}:{thread}`). With
//! `thread_mode` a top-level message in a text channel has its own id as the topic: Discord
//! gives a thread started on a message the message's id, so the conversation's key is known
//! before the thread exists, and the adapter creates the thread on its first reply (only for
//! messages the daemon answers). Without `thread_mode` a text channel is one conversation.

use antler_channel::{AudioInfo, AudioKind, InboundFile, InboundMessage, any_prose, map_prose};
use serenity::model::channel::{Attachment, Message, MessageFlags, MessageType};

use crate::CHANNEL_NAME;

/// Who the bot is, from `GET /users/@me`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotIdentity {
    pub user_id: String,
    pub name: String,
}

/// Where a guild message was posted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// A text (or voice, announcement) channel.
    Channel,
    /// A thread (or forum post) inside `parent`.
    Thread { parent: String },
}

/// Whether a message could be for the bot at all: someone else's post or reply (a person's,
/// or another bot's or webhook's, which the daemon answers only from `allowed_bots`). The
/// bot's own posts and edits come back as events too, as do joins, pins and boosts.
pub fn from_someone_else(message: &Message, bot: &BotIdentity) -> bool {
    message.author.id.to_string() != bot.user_id
        && matches!(
            message.kind,
            MessageType::Regular | MessageType::InlineReply
        )
}

/// A voice message (the message's IS_VOICE_MESSAGE flag, or an attachment with the
/// `duration_secs`/`waveform` only voice messages carry) is a voice note; another `audio/*`
/// attachment an audio file.
fn audio_of(attachment: &Attachment, voice_message: bool) -> Option<AudioInfo> {
    let recorded =
        voice_message || attachment.duration_secs.is_some() || attachment.waveform.is_some();
    let kind = if recorded {
        AudioKind::Voice
    } else if attachment
        .content_type
        .as_deref()
        .is_some_and(|mime| mime.starts_with("audio/"))
    {
        AudioKind::Audio
    } else {
        return None;
    };
    Some(AudioInfo {
        kind,
        // Saturating float-to-int: a negative or absurd value cannot wrap.
        duration_seconds: attachment
            .duration_secs
            .map(|seconds| seconds.ceil().max(0.0) as u32),
    })
}

/// The name Discord shows for the author here: their nickname in the guild, else their
/// display name, else their username.
pub(crate) fn shown_name(message: &Message) -> String {
    message
        .member
        .as_ref()
        .and_then(|member| member.nick.clone())
        .or_else(|| message.author.global_name.clone())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| message.author.name.clone())
}

/// The message as the daemon journals it; `place` is `None` in DMs. `None` when there is
/// nothing to answer (no text, no files).
pub fn inbound_message(
    message: &Message,
    bot: &BotIdentity,
    place: Option<&Place>,
    thread_mode: bool,
) -> Option<InboundMessage> {
    if !from_someone_else(message, bot) {
        return None;
    }
    let message_id = message.id.to_string();
    let channel_id = message.channel_id.to_string();
    let replied_to_bot = message
        .referenced_message
        .as_ref()
        .is_some_and(|replied| replied.author.id.to_string() == bot.user_id);
    let mentioned = message
        .mentions
        .iter()
        .any(|user| user.id.to_string() == bot.user_id)
        && any_prose(&message.content, |prose| has_mention(prose, &bot.user_id));
    let text = strip_mentions(&message.content, &bot.user_id);
    let voice_message = message
        .flags
        .is_some_and(|flags| flags.contains(MessageFlags::IS_VOICE_MESSAGE));
    let files: Vec<InboundFile> = message
        .attachments
        .iter()
        .map(|attachment| InboundFile {
            handle: attachment.url.clone(),
            filename: Some(attachment.filename.clone()),
            is_image: attachment
                .content_type
                .as_deref()
                .is_some_and(|m| m.starts_with("image/")),
            audio: audio_of(attachment, voice_message),
            mime_type: attachment.content_type.clone(),
            size: Some(u64::from(attachment.size)),
        })
        .collect();
    if text.is_empty() && files.is_empty() {
        return None;
    }
    let (chat_id, topic_id, in_thread) = match place {
        None => (channel_id, None, false),
        Some(Place::Thread { parent }) => (parent.clone(), Some(channel_id), true),
        Some(Place::Channel) if thread_mode => (channel_id, Some(message_id.clone()), false),
        Some(Place::Channel) => (channel_id, None, false),
    };
    let mentions_bot = mentioned || replied_to_bot;
    Some(InboundMessage {
        channel: CHANNEL_NAME.into(),
        workspace_id: message.guild_id.map(|guild| guild.to_string()),
        chat_id,
        topic_id,
        user_id: message.author.id.to_string(),
        display_name: Some(shown_name(message)),
        platform_message_id: message_id,
        text,
        files,
        is_direct: place.is_none(),
        mentions_bot,
        reply_to: message
            .message_reference
            .as_ref()
            .and_then(|reference| reference.message_id)
            .map(|id| id.to_string()),
        // Inside a Discord thread the bot already talks in, no mention is needed.
        thread_reply: in_thread && !mentions_bot,
        is_bot: message.author.bot || message.webhook_id.is_some(),
        bot_id: None,
        context: Vec::new(),
        click: None,
    })
}

/// Whether `text` holds `<@id>` or `<@!id>` (the closing `>` makes the id whole).
fn has_mention(text: &str, bot_user: &str) -> bool {
    text.contains(&format!("<@{bot_user}>")) || text.contains(&format!("<@!{bot_user}>"))
}

/// Removes every mention of the bot (`<@id>`, `<@!id>`) outside code; the rest keeps its
/// whitespace (people paste indented code).
fn strip_mentions(text: &str, bot_user: &str) -> String {
    let stripped = map_prose(text, |prose| {
        let mut out = prose.to_string();
        for mention in [format!("<@{bot_user}>"), format!("<@!{bot_user}>")] {
            out = out
                .replace(&format!("{mention} "), "")
                .replace(&mention, "");
        }
        out
    });
    stripped.trim().to_string()
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
