//! Slack events and slash commands → `InboundMessage`: which conversation, who, what, files.
//!
//! Dedupe key: the daemon journals by (channel, workspace, chat, message id), filled here with
//! (`slack`, team id, channel id, the message's `ts`). A `ts` is unique within a channel, and
//! every copy of one message carries it: a redelivered envelope, an Events API retry
//! (`X-Slack-Retry-Num`, same `event_id`) and the `app_mention` + `message` pair Slack sends for
//! one mention (two `event_id`s) all land on one journal entry, so exactly one answer is sent.
//! The `event_id` alone would answer a mention twice.
//!
//! Topics: in channels one conversation per Slack thread (`thread_ts`, or the message's own
//! `ts` when it starts one), so replies always go into that thread; in DMs see
//! [`DmThreading`].

use std::sync::OnceLock;

use antler_channel::{AudioInfo, AudioKind, InboundFile, InboundMessage};
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use crate::CHANNEL_NAME;
use crate::config::DmThreading;
use crate::mentions::{mentions_user, strip_mentions};

/// Message ids of slash commands start with this; their answers are ephemeral.
pub(crate) const SLASH_PREFIX: &str = "cmd:";

/// Who the bot is, from `auth.test`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotIdentity {
    pub user_id: String,
    pub bot_id: Option<String>,
    pub team_id: String,
    pub name: String,
}

#[derive(Debug, Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    subtype: Option<String>,
    user: Option<String>,
    bot_id: Option<String>,
    #[serde(default)]
    text: String,
    ts: Option<String>,
    thread_ts: Option<String>,
    channel: Option<String>,
    channel_type: Option<String>,
    team: Option<String>,
    #[serde(default)]
    files: Vec<SlackFile>,
    /// The rich text of a person's message, where mentions are structured.
    blocks: Option<Value>,
    /// The name a bot's message is shown under (legacy `bot_message`s).
    username: Option<String>,
    /// The app that posted a bot's message.
    bot_profile: Option<BotProfile>,
}

#[derive(Debug, Deserialize)]
struct BotProfile {
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct SlackFile {
    id: Option<String>,
    name: Option<String>,
    mimetype: Option<String>,
    size: Option<u64>,
    url_private_download: Option<String>,
    url_private: Option<String>,
    /// `tombstone` (deleted), `hidden_by_limit` (free plans), `external`: nothing to fetch.
    mode: Option<String>,
    /// `slack_audio` for a clip recorded in Slack (a voice note), `slack_video` for a video one.
    subtype: Option<String>,
    /// `audio` on a recorded audio clip, whatever container its `mimetype` names.
    media_display_type: Option<String>,
    /// A clip's length.
    duration_ms: Option<u64>,
}

/// The message of an `event_callback` (the Events API body, or a Socket Mode envelope's
/// payload); `None` for events the bot does not answer.
pub fn event_message(
    callback: &Value,
    bot: &BotIdentity,
    dm_threading: DmThreading,
) -> Option<InboundMessage> {
    if callback["type"] != "event_callback" {
        return None;
    }
    let event: Event = serde_json::from_value(callback["event"].clone()).ok()?;
    if !matches!(event.kind.as_str(), "message" | "app_mention") {
        return None;
    }
    // Edits, deletions and joins are not questions; shared files, thread replies also sent to
    // the channel and other bots' posts (answered only from `allowed_bots`) may be.
    if !matches!(
        event.subtype.as_deref(),
        None | Some("file_share") | Some("thread_broadcast") | Some("bot_message")
    ) {
        return None;
    }
    let own_bot = event.bot_id.is_some() && event.bot_id == bot.bot_id;
    let user = event.user.clone().or_else(|| event.bot_id.clone())?;
    if own_bot || user == bot.user_id {
        return None;
    }
    let is_bot = event.bot_id.is_some();
    let bot_name = is_bot
        .then(|| {
            let profile = event.bot_profile.as_ref().and_then(|p| p.name.clone());
            profile.or(event.username.clone())
        })
        .flatten();
    let (channel, ts) = (event.channel.clone()?, event.ts.clone()?);
    let is_direct = event.channel_type.as_deref() == Some("im")
        || (event.channel_type.is_none() && channel.starts_with('D'));
    let mentions_bot = event.kind == "app_mention"
        || mentions_user(&event.text, event.blocks.as_ref(), &bot.user_id);
    let text = plain_text(&strip_mentions(&event.text, &bot.user_id));
    let files: Vec<InboundFile> = event.files.iter().filter_map(inbound_file).collect();
    if text.is_empty() && files.is_empty() {
        return None;
    }
    let in_thread = event
        .thread_ts
        .as_ref()
        .filter(|root| **root != ts)
        .cloned();
    let topic_id = match (is_direct, dm_threading) {
        (true, DmThreading::PerDm) => in_thread.clone(),
        _ => Some(event.thread_ts.clone().unwrap_or_else(|| ts.clone())),
    };
    let workspace = callback["team_id"]
        .as_str()
        .map(String::from)
        .or(event.team)
        .unwrap_or_else(|| bot.team_id.clone());
    Some(InboundMessage {
        channel: CHANNEL_NAME.into(),
        workspace_id: Some(workspace),
        chat_id: channel,
        topic_id,
        user_id: user,
        display_name: bot_name,
        platform_message_id: ts,
        text,
        files,
        is_direct,
        mentions_bot,
        reply_to: None,
        thread_reply: !is_direct && in_thread.is_some() && !mentions_bot,
        is_bot,
        bot_id: event.bot_id,
        context: Vec::new(),
        click: None,
    })
}

/// A slash command (`/antler new`) as the chat command it stands for (`/new`); the command
/// alone is `/help`. Its answers are ephemeral (see [`SLASH_PREFIX`]).
pub fn command_message(fields: &Value, bot: &BotIdentity) -> Option<InboundMessage> {
    let field = |name: &str| fields[name].as_str().filter(|v| !v.is_empty());
    let (user, channel, trigger) = (
        field("user_id")?,
        field("channel_id")?,
        field("trigger_id")?,
    );
    let argument = field("text").unwrap_or("").trim();
    let text = match argument {
        "" => "/help".to_string(),
        slashed if slashed.starts_with('/') => slashed.to_string(),
        plain => format!("/{plain}"),
    };
    let is_direct = channel.starts_with('D') || field("channel_name") == Some("directmessage");
    Some(InboundMessage {
        channel: CHANNEL_NAME.into(),
        workspace_id: Some(field("team_id").unwrap_or(&bot.team_id).to_string()),
        chat_id: channel.to_string(),
        topic_id: None,
        user_id: user.to_string(),
        display_name: field("user_name").map(String::from),
        platform_message_id: format!("{SLASH_PREFIX}{user}:{trigger}"),
        text,
        files: Vec::new(),
        is_direct,
        mentions_bot: true,
        reply_to: None,
        thread_reply: false,
        is_bot: false,
        bot_id: None,
        context: Vec::new(),
        click: None,
    })
}

/// The user a slash command's answers go to, from its message id.
pub(crate) fn slash_user(message_id: &str) -> Option<&str> {
    let rest = message_id.strip_prefix(SLASH_PREFIX)?;
    rest.split_once(':').map(|(user, _)| user)
}

fn inbound_file(file: &SlackFile) -> Option<InboundFile> {
    if matches!(
        file.mode.as_deref(),
        Some("tombstone" | "hidden_by_limit" | "external")
    ) {
        return None;
    }
    let handle = file
        .url_private_download
        .clone()
        .or(file.url_private.clone())?;
    let mime_type = file.mimetype.clone();
    Some(InboundFile {
        handle,
        filename: file.name.clone().or(file.id.clone()),
        is_image: mime_type
            .as_deref()
            .is_some_and(|m| m.starts_with("image/")),
        audio: audio_of(file, mime_type.as_deref()),
        mime_type,
        size: file.size,
    })
}

/// A clip recorded in Slack is a voice note; another `audio/*` file an audio file. Slack stores
/// some audio clips as `video/mp4`, so the clip's own fields decide before the MIME type.
fn audio_of(file: &SlackFile, mime_type: Option<&str>) -> Option<AudioInfo> {
    let clip = file.subtype.as_deref() == Some("slack_audio")
        || file.media_display_type.as_deref() == Some("audio");
    let kind = if clip {
        AudioKind::Voice
    } else if mime_type.is_some_and(|mime| mime.starts_with("audio/")) {
        AudioKind::Audio
    } else {
        return None;
    };
    Some(AudioInfo {
        kind,
        duration_seconds: file
            .duration_ms
            .map(|ms| u32::try_from(ms.div_ceil(1000)).unwrap_or(u32::MAX)),
    })
}

/// Slack's markup in a person's message → the plain text the agent reads: links, channel and
/// broadcast mentions, and the three escaped characters. User mentions stay (`<@U…>`), so the
/// agent can mention people back.
fn plain_text(text: &str) -> String {
    static RULES: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    let rules = RULES.get_or_init(|| {
        [
            (r"<((?:https?|mailto):[^|>]+)\|([^>]+)>", "$2 ($1)"),
            (r"<((?:https?|mailto):[^|>]+)>", "$1"),
            (r"<#[A-Z0-9]+\|([^>]*)>", "#$1"),
            (r"<!(here|channel|everyone)(\|[^>]*)?>", "@$1"),
        ]
        .into_iter()
        .filter_map(|(pattern, replacement)| Some((Regex::new(pattern).ok()?, replacement)))
        .collect()
    });
    let mut out = text.to_string();
    for (regex, replacement) in rules {
        out = regex.replace_all(&out, *replacement).into_owned();
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
