//! `im.message.receive_v1` events → [`InboundMessage`]s.
//!
//! The message's `content` is a JSON string inside the event. Text mentions arrive as
//! placeholders (`@_user_1`) resolved from `mentions`: the bot's own is removed, others become
//! `@Name`. Rich text (`post`) keeps its paragraphs, links become Markdown links, and images and
//! files become `[image]`/`[file]` placeholders plus files to download. Topics follow DeerFlow:
//! a direct chat is one conversation; in a group the topic is the reply chain's root message
//! (`root_id`), or the message itself when it starts one, so a reply to the bot's card (whose
//! root is the question) continues the same thread.

use antler_channel::{AudioInfo, AudioKind, InboundFile, InboundMessage};
use serde_json::Value;

use crate::CHANNEL_NAME;

/// Who the bot is, learned at connect (`/open-apis/bot/v3/info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotIdentity {
    pub open_id: String,
    pub name: String,
}

/// What a message's content says: its text for the agent and the files to fetch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Content {
    pub text: String,
    pub files: Vec<InboundFile>,
    pub mentions_bot: bool,
}

/// The message of an `im.message.receive_v1` event (`event` object), or why it is skipped.
pub fn event_message(
    event: &Value,
    tenant_key: Option<&str>,
    bot: &BotIdentity,
) -> Result<InboundMessage, String> {
    let sender = &event["sender"];
    // Another app's bot is passed on marked (answered only from `allowed_bots`); system
    // senders are not.
    let is_bot = match sender["sender_type"].as_str() {
        Some("user") => false,
        Some("app") => true,
        other => {
            return Err(format!(
                "a message from a {} sender",
                other.unwrap_or("unknown")
            ));
        }
    };
    let app_id = text_field(&sender["sender_id"], "app_id");
    let user_id = text_field(&sender["sender_id"], "open_id")
        .or_else(|| app_id.clone().filter(|_| is_bot))
        .ok_or("a message without the sender's open_id")?;
    if user_id == bot.open_id {
        return Err("the bot's own message".into());
    }
    let message = &event["message"];
    let message_id = text_field(message, "message_id").ok_or("a message without message_id")?;
    let chat_id = text_field(message, "chat_id").ok_or("a message without chat_id")?;
    let message_type = message["message_type"].as_str().unwrap_or("");
    let raw_content = message["content"].as_str().unwrap_or("");
    let content_json: Value = serde_json::from_str(raw_content)
        .map_err(|e| format!("unreadable {message_type} content: {e}"))?;
    let mentions = message["mentions"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let content = parse_content(message_type, &content_json, &message_id, mentions, bot)?;
    if content.text.trim().is_empty() && content.files.is_empty() {
        return Err(format!("an empty {message_type} message"));
    }
    let is_direct = message["chat_type"].as_str() == Some("p2p");
    let root_id = text_field(message, "root_id");
    let parent_id = text_field(message, "parent_id");
    let topic_id = (!is_direct).then(|| root_id.clone().unwrap_or_else(|| message_id.clone()));
    let tenant = tenant_key
        .map(str::to_string)
        .or_else(|| text_field(sender, "tenant_key"));
    Ok(InboundMessage {
        channel: CHANNEL_NAME.into(),
        workspace_id: tenant,
        chat_id,
        topic_id,
        user_id: user_id.clone(),
        display_name: None,
        platform_message_id: message_id,
        text: content.text,
        files: content.files,
        is_direct,
        mentions_bot: content.mentions_bot,
        reply_to: parent_id,
        // A follow-up inside a reply chain: answered without a mention when the bot already
        // holds that chain's conversation.
        thread_reply: !is_direct && root_id.is_some() && !content.mentions_bot,
        is_bot,
        bot_id: app_id.filter(|id| is_bot && *id != user_id),
        context: Vec::new(),
        click: None,
    })
}

/// A message's content by `message_type`.
pub fn parse_content(
    message_type: &str,
    content: &Value,
    message_id: &str,
    mentions: &[Value],
    bot: &BotIdentity,
) -> Result<Content, String> {
    let mentions_bot = mentions.iter().any(|m| is_bot(m, bot));
    let mut parsed = match message_type {
        "text" => Content {
            text: resolve_mentions(content["text"].as_str().unwrap_or(""), mentions, bot),
            ..Content::default()
        },
        "post" => parse_post(content, message_id, mentions, bot),
        "image" => {
            let key = content["image_key"]
                .as_str()
                .ok_or("an image without image_key")?;
            Content {
                files: vec![resource(ResourceKind::Image, message_id, key, None)],
                ..Content::default()
            }
        }
        "file" | "audio" | "media" => {
            let key = content["file_key"]
                .as_str()
                .ok_or_else(|| format!("a {message_type} without file_key"))?;
            let name = content["file_name"]
                .as_str()
                .map(str::to_string)
                .or_else(|| (message_type == "audio").then(|| format!("{key}.opus")));
            let mut file = resource(ResourceKind::File, message_id, key, name);
            if message_type == "audio" {
                // Feishu's audio messages are recorded in the app (OGG/Opus), `duration` in ms.
                file.audio = Some(AudioInfo {
                    kind: AudioKind::Voice,
                    duration_seconds: content["duration"]
                        .as_u64()
                        .map(|ms| u32::try_from(ms.div_ceil(1000)).unwrap_or(u32::MAX)),
                });
            }
            Content {
                files: vec![file],
                ..Content::default()
            }
        }
        other => return Err(format!("a {other} message (not supported)")),
    };
    parsed.mentions_bot = mentions_bot;
    Ok(parsed)
}

/// Which `type` the resource download takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResourceKind {
    Image,
    File,
}

/// A file handle: `image|file:{message_id}:{key}`, what [`crate::files`] downloads.
fn resource(
    kind: ResourceKind,
    message_id: &str,
    key: &str,
    filename: Option<String>,
) -> InboundFile {
    let kind_name = match kind {
        ResourceKind::Image => "image",
        ResourceKind::File => "file",
    };
    InboundFile {
        handle: format!("{kind_name}:{message_id}:{key}"),
        filename,
        mime_type: None,
        size: None,
        is_image: kind == ResourceKind::Image,
        audio: None,
    }
}

/// The parts of a handle made by [`resource`].
pub(crate) fn parse_handle(handle: &str) -> Option<(ResourceKind, &str, &str)> {
    let (kind, rest) = handle.split_once(':')?;
    let (message_id, key) = rest.split_once(':')?;
    let kind = match kind {
        "image" => ResourceKind::Image,
        "file" => ResourceKind::File,
        _ => return None,
    };
    let safe = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    (safe(message_id) && safe(key)).then_some((kind, message_id, key))
}

fn is_bot(mention: &Value, bot: &BotIdentity) -> bool {
    mention["id"]["open_id"].as_str() == Some(bot.open_id.as_str())
}

/// `@_user_1` placeholders: the bot's removed, others as `@Name`; `@_all` as `@all`.
fn resolve_mentions(text: &str, mentions: &[Value], bot: &BotIdentity) -> String {
    let mut text = text.to_string();
    // Longest keys first, so `@_user_1` does not eat the start of `@_user_10`.
    let mut ordered: Vec<&Value> = mentions.iter().collect();
    ordered.sort_by_key(|m| std::cmp::Reverse(m["key"].as_str().map_or(0, str::len)));
    for mention in ordered {
        let Some(key) = mention["key"].as_str().filter(|k| !k.is_empty()) else {
            continue;
        };
        if is_bot(mention, bot) {
            text = text.replace(&format!("{key} "), "").replace(key, "");
        } else {
            let name = mention["name"].as_str().unwrap_or("someone");
            text = text.replace(key, &format!("@{name}"));
        }
    }
    text.replace("@_all", "@all").trim().to_string()
}

/// Rich text: `{"title", "content": [[element, …], …]}` (a language wrapper such as `zh_cn`
/// is accepted too).
fn parse_post(content: &Value, message_id: &str, mentions: &[Value], bot: &BotIdentity) -> Content {
    let post = if content.get("content").is_some() {
        content
    } else {
        content
            .as_object()
            .and_then(|languages| languages.values().find(|v| v.get("content").is_some()))
            .unwrap_or(content)
    };
    let mut files = Vec::new();
    let mut paragraphs = Vec::new();
    if let Some(title) = post["title"].as_str().filter(|t| !t.trim().is_empty()) {
        paragraphs.push(format!("**{}**", title.trim()));
    }
    for paragraph in post["content"].as_array().map_or(&[][..], Vec::as_slice) {
        let mut line = String::new();
        for element in paragraph.as_array().map_or(&[][..], Vec::as_slice) {
            line.push_str(&element_text(
                element, message_id, mentions, bot, &mut files,
            ));
        }
        paragraphs.push(line.trim().to_string());
    }
    let text = paragraphs.join("\n").trim().to_string();
    Content {
        text,
        files,
        mentions_bot: false,
    }
}

fn element_text(
    element: &Value,
    message_id: &str,
    mentions: &[Value],
    bot: &BotIdentity,
    files: &mut Vec<InboundFile>,
) -> String {
    let str_of = |key: &str| element[key].as_str().unwrap_or("").to_string();
    match element["tag"].as_str().unwrap_or("") {
        "text" | "md" => str_of("text"),
        "a" => {
            let (text, href) = (str_of("text"), str_of("href"));
            if text.is_empty() || text == href {
                href
            } else {
                format!("[{text}]({href})")
            }
        }
        "at" => {
            let id = str_of("user_id");
            let mention = mentions.iter().find(|m| {
                m["key"].as_str() == Some(id.as_str()) || m["id"]["open_id"].as_str() == Some(&id)
            });
            match mention {
                Some(m) if is_bot(m, bot) => String::new(),
                _ if id == bot.open_id => String::new(),
                Some(m) => format!("@{}", m["name"].as_str().unwrap_or("someone")),
                None if id == "@_all" || id == "all" => "@all".into(),
                None => format!("@{}", element["user_name"].as_str().unwrap_or("someone")),
            }
        }
        "img" => match element["image_key"].as_str() {
            Some(key) => {
                files.push(resource(ResourceKind::Image, message_id, key, None));
                "[image]".into()
            }
            None => String::new(),
        },
        "media" | "file" => match element["file_key"].as_str() {
            Some(key) => {
                let name = element["file_name"].as_str().map(str::to_string);
                let shown = name
                    .clone()
                    .map_or("[file]".into(), |n| format!("[file: {n}]"));
                files.push(resource(ResourceKind::File, message_id, key, name));
                shown
            }
            None => String::new(),
        },
        "emotion" => format!(":{}:", str_of("emoji_type")),
        "code_block" => format!(
            "\n```{}\n{}\n```\n",
            str_of("language").to_lowercase(),
            str_of("text").trim_end()
        ),
        "hr" => "\n---\n".into(),
        _ => str_of("text"),
    }
}

fn text_field(value: &Value, key: &str) -> Option<String> {
    value[key]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
