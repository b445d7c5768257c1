//! Telegram `Message` → `InboundMessage`: chat/topic rules, mentions, captions and files.
//!
//! Topic ids are opaque to the manager but meaningful here: a forum topic is its numeric
//! `message_thread_id` (sends must carry it), while a reply chain in an ordinary group is
//! `m{root_message_id}` (one Antler thread per top-level group message, nothing to send back).

use antler_channel::{AudioInfo, AudioKind, HistoryMessage, InboundFile, InboundMessage};
use teloxide::types::{FileMeta, Message, Update, UpdateKind};

use crate::CHANNEL_NAME;
use crate::mentions::{Mentions, bot_mentions};

/// Who the bot is, from `getMe`: needed to recognise mentions and replies to the bot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotIdentity {
    pub id: u64,
    pub username: String,
}

/// Normalizes a message; `None` for messages the bot must not answer (its own, service
/// messages without text or files, messages without a sender). Other bots' messages pass
/// marked `is_bot` (answered only from `allowed_bots`).
pub fn inbound_message(message: &Message, bot: &BotIdentity) -> Option<InboundMessage> {
    let from = message.from.as_ref()?;
    if from.id.0 == bot.id {
        return None;
    }
    let raw_text = message.text().or(message.caption()).unwrap_or("");
    let files = files_of(message);
    if raw_text.trim().is_empty() && files.is_empty() {
        return None;
    }
    let is_direct = message.chat.is_private();
    let Mentions {
        mentions_bot: mentioned,
        text,
    } = bot_mentions(message, bot);
    let replied_to_bot = message
        .reply_to_message()
        .and_then(|reply| reply.from.as_ref())
        .is_some_and(|author| author.id.0 == bot.id);
    let topic_id = if is_direct {
        None
    } else if message.is_topic_message {
        message.thread_id.map(|thread| thread.0.0.to_string())
    } else {
        let root = message
            .thread_id
            .map(|thread| thread.0.0)
            .or(message.reply_to_message().map(|reply| reply.id.0))
            .unwrap_or(message.id.0);
        Some(format!("m{root}"))
    };
    let display_name = match &from.last_name {
        Some(last) => format!("{} {last}", from.first_name),
        None => from.first_name.clone(),
    };
    Some(InboundMessage {
        channel: CHANNEL_NAME.into(),
        // Telegram message ids are unique per chat, so the chat scopes deduplication.
        workspace_id: Some(message.chat.id.0.to_string()),
        chat_id: message.chat.id.0.to_string(),
        topic_id,
        user_id: from.id.0.to_string(),
        display_name: Some(display_name),
        platform_message_id: message.id.0.to_string(),
        text,
        files,
        is_direct,
        mentions_bot: mentioned || replied_to_bot,
        reply_to: message
            .reply_to_message()
            .map(|reply| reply.id.0.to_string()),
        thread_reply: false,
        is_bot: from.is_bot,
        bot_id: None,
        context: replied_to(message, bot).into_iter().collect(),
        click: None,
    })
}

/// The message this one replies to, as context: Telegram cannot fetch a chat's history, but a
/// reply carries the message it answers, and a quote the part of it the person selected (then
/// only that part). The bot's own messages are in the thread already; a forum topic's service
/// message (every topic message "replies" to it) has nothing to quote.
fn replied_to(message: &Message, bot: &BotIdentity) -> Option<HistoryMessage> {
    let reply = message.reply_to_message()?;
    let author = reply.from.as_ref()?;
    if author.id.0 == bot.id {
        return None;
    }
    let text = match message.quote() {
        Some(quote) => quote.text.clone(),
        None => reply.text().or(reply.caption()).unwrap_or("").to_string(),
    };
    let file_names: Vec<String> = files_of(reply)
        .into_iter()
        .map(|file| {
            file.filename
                .unwrap_or_else(|| if file.is_image { "photo" } else { "file" }.to_string())
        })
        .collect();
    if text.trim().is_empty() && file_names.is_empty() {
        return None;
    }
    let name = match &author.last_name {
        Some(last) => format!("{} {last}", author.first_name),
        None => author.first_name.clone(),
    };
    Some(HistoryMessage {
        platform_message_id: reply.id.0.to_string(),
        sent_at: Some(reply.date.timestamp()),
        user_id: author.id.0.to_string(),
        display_name: Some(name),
        is_bot: author.is_bot,
        text,
        file_names,
    })
}

/// The message of an update the bot answers (a click on its buttons is one too); `None` for
/// other kinds of update.
pub(crate) fn message_of(update: &Update, bot: &BotIdentity) -> Option<InboundMessage> {
    match &update.kind {
        UpdateKind::Message(message) => inbound_message(message, bot),
        UpdateKind::CallbackQuery(query) => crate::buttons::click_message(query),
        _ => None,
    }
}

fn files_of(message: &Message) -> Vec<InboundFile> {
    let mut files = Vec::new();
    if let Some(document) = message.document() {
        files.push(file(
            &document.file,
            document.file_name.clone(),
            document.mime_type.as_ref().map(ToString::to_string),
            false,
        ));
    }
    // Telegram sends several sizes of one photo; the last is the largest.
    if let Some(photo) = message.photo().and_then(|sizes| sizes.last()) {
        let name = format!("photo_{}.jpg", message.id.0);
        files.push(file(
            &photo.file,
            Some(name),
            Some("image/jpeg".into()),
            true,
        ));
    }
    if let Some(audio) = message.audio() {
        let mut inbound = file(
            &audio.file,
            audio.file_name.clone(),
            audio.mime_type.as_ref().map(ToString::to_string),
            false,
        );
        inbound.audio = Some(audio_info(AudioKind::Audio, audio.duration.seconds()));
        files.push(inbound);
    }
    if let Some(voice) = message.voice() {
        let name = format!("voice_{}.ogg", message.id.0);
        let mut inbound = file(
            &voice.file,
            Some(name),
            voice.mime_type.as_ref().map(ToString::to_string),
            false,
        );
        inbound.audio = Some(audio_info(AudioKind::Voice, voice.duration.seconds()));
        files.push(inbound);
    }
    // A round video message: its sound is what the person said, so it is heard like a voice
    // note (and kept as the video it is).
    if let Some(note) = message.video_note() {
        let name = format!("video_note_{}.mp4", message.id.0);
        let mut inbound = file(&note.file, Some(name), Some("video/mp4".into()), false);
        inbound.audio = Some(audio_info(AudioKind::VideoNote, note.duration.seconds()));
        files.push(inbound);
    }
    files
}

fn audio_info(kind: AudioKind, seconds: u32) -> AudioInfo {
    AudioInfo {
        kind,
        duration_seconds: Some(seconds),
    }
}

fn file(
    meta: &FileMeta,
    filename: Option<String>,
    mime_type: Option<String>,
    is_image: bool,
) -> InboundFile {
    InboundFile {
        handle: meta.id.0.clone(),
        filename,
        mime_type,
        size: Some(u64::from(meta.size)),
        is_image,
        audio: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bot() -> BotIdentity {
        BotIdentity {
            id: 999,
            username: "AntlerBot".into(),
        }
    }

    fn parse(value: serde_json::Value) -> Message {
        serde_json::from_value(value).expect("message json")
    }

    fn base(chat: serde_json::Value, text: &str) -> serde_json::Value {
        json!({
            "message_id": 10, "date": 1_700_000_000, "chat": chat,
            "from": {"id": 42, "is_bot": false, "first_name": "Ann", "last_name": "Lee"},
            "text": text
        })
    }

    #[test]
    fn a_reply_carries_the_message_it_answers_or_the_quoted_part_of_it() {
        let group = json!({"id": -100, "type": "supergroup", "title": "g"});
        let replied = |from: serde_json::Value, quote: Option<&str>| {
            let mut value = base(group.clone(), "@AntlerBot is this right?");
            value["entities"] = json!([{"type": "mention", "offset": 0, "length": 10}]);
            value["reply_to_message"] = json!({"message_id": 5, "date": 1_700_000_000,
                "chat": group, "from": from, "text": "deploy on friday, then freeze until monday"});
            if let Some(quote) = quote {
                value["quote"] = json!({"text": quote, "position": 0, "is_manual": true});
            }
            inbound_message(&parse(value), &bot())
                .expect("inbound")
                .context
        };
        let bob = json!({"id": 7, "is_bot": false, "first_name": "Bob"});
        let whole = replied(bob.clone(), None);
        assert_eq!(
            whole,
            [HistoryMessage {
                platform_message_id: "5".into(),
                sent_at: Some(1_700_000_000),
                user_id: "7".into(),
                display_name: Some("Bob".into()),
                is_bot: false,
                text: "deploy on friday, then freeze until monday".into(),
                file_names: vec![],
            }]
        );
        let quoted = replied(bob, Some("freeze until monday"));
        assert_eq!(quoted[0].text, "freeze until monday");
        let own = replied(
            json!({"id": 999, "is_bot": true, "first_name": "Antler"}),
            None,
        );
        assert!(
            own.is_empty(),
            "the bot's own message is in the thread already"
        );
    }

    #[test]
    fn private_chats_have_no_topic() {
        let message = parse(base(
            json!({"id": 42, "type": "private", "first_name": "Ann"}),
            "hello",
        ));
        let inbound = inbound_message(&message, &bot()).expect("inbound");
        assert!(inbound.is_direct);
        assert_eq!(inbound.topic_id, None);
        assert_eq!(inbound.chat_id, "42");
        assert_eq!(inbound.user_id, "42");
        assert_eq!(inbound.display_name.as_deref(), Some("Ann Lee"));
        assert_eq!(inbound.platform_message_id, "10");
    }

    #[test]
    fn group_rules_for_topics_and_mentions() {
        let group = json!({"id": -100, "type": "supergroup", "title": "g"});
        let cases = [
            // (extra fields, expected topic, mentions_bot, text)
            (json!({"text": "hi all"}), "m10", false, "hi all"),
            (
                json!({"text": "@antlerbot what now",
                    "entities": [{"type": "mention", "offset": 0, "length": 10}]}),
                "m10",
                true,
                "what now",
            ),
            (
                json!({"text": "/new@AntlerBot",
                    "entities": [{"type": "bot_command", "offset": 0, "length": 14}]}),
                "m10",
                true,
                "/new",
            ),
            (
                json!({"message_thread_id": 7, "is_topic_message": true, "text": "in topic"}),
                "7",
                false,
                "in topic",
            ),
            (
                json!({"reply_to_message": {"message_id": 5, "date": 1_700_000_000, "chat": group,
                    "from": {"id": 999, "is_bot": true, "first_name": "Antler"}, "text": "earlier"},
                    "text": "and then?"}),
                "m5",
                true,
                "and then?",
            ),
        ];
        for (extra, topic, mentioned, text) in cases {
            let mut value = base(group.clone(), "");
            for (key, field) in extra.as_object().expect("object") {
                value[key] = field.clone();
            }
            let inbound = inbound_message(&parse(value), &bot()).expect("inbound");
            assert_eq!(inbound.topic_id.as_deref(), Some(topic), "{text}");
            assert_eq!(inbound.mentions_bot, mentioned, "{text}");
            assert_eq!(inbound.text, text);
            assert!(!inbound.is_direct);
        }
    }

    #[test]
    fn documents_and_captions_become_files_and_text() {
        let mut value = base(
            json!({"id": 42, "type": "private", "first_name": "Ann"}),
            "",
        );
        value.as_object_mut().expect("object").remove("text");
        value["caption"] = json!("summarise this");
        value["document"] = json!({"file_id": "F1", "file_unique_id": "U1", "file_size": 1234,
            "file_name": "report.pdf", "mime_type": "application/pdf"});
        let inbound = inbound_message(&parse(value), &bot()).expect("inbound");
        assert_eq!(inbound.text, "summarise this");
        assert_eq!(inbound.files.len(), 1);
        assert_eq!(inbound.files[0].handle, "F1");
        assert_eq!(inbound.files[0].filename.as_deref(), Some("report.pdf"));
        assert_eq!(inbound.files[0].size, Some(1234));
    }

    #[test]
    fn voice_audio_and_video_notes_are_marked_audio_with_their_duration() {
        let private = json!({"id": 42, "type": "private", "first_name": "Ann"});
        let cases = [
            (
                "voice",
                json!({"file_id": "V1", "file_unique_id": "UV", "file_size": 4000,
                    "duration": 42, "mime_type": "audio/ogg"}),
                AudioKind::Voice,
                "voice_10.ogg",
                42,
            ),
            (
                "audio",
                json!({"file_id": "A1", "file_unique_id": "UA", "file_size": 90000,
                    "duration": 185, "file_name": "talk.mp3", "mime_type": "audio/mpeg"}),
                AudioKind::Audio,
                "talk.mp3",
                185,
            ),
            (
                "video_note",
                json!({"file_id": "N1", "file_unique_id": "UN", "file_size": 70000,
                    "duration": 9, "length": 240}),
                AudioKind::VideoNote,
                "video_note_10.mp4",
                9,
            ),
        ];
        for (field, body, kind, name, seconds) in cases {
            let mut value = base(private.clone(), "");
            value.as_object_mut().expect("object").remove("text");
            value[field] = body;
            let inbound = inbound_message(&parse(value), &bot()).expect(field);
            assert_eq!(inbound.files.len(), 1, "{field}");
            assert_eq!(inbound.files[0].filename.as_deref(), Some(name));
            assert_eq!(
                inbound.files[0].audio,
                Some(AudioInfo {
                    kind,
                    duration_seconds: Some(seconds)
                }),
                "{field}"
            );
        }
        let mut document = base(private, "");
        document["document"] = json!({"file_id": "F1", "file_unique_id": "U1",
            "file_name": "song.ogg", "mime_type": "audio/ogg"});
        let inbound = inbound_message(&parse(document), &bot()).expect("document");
        assert_eq!(inbound.files[0].audio, None, "a document stays a file");
    }

    #[test]
    fn own_and_empty_messages_are_skipped_and_other_bots_marked() {
        let mut value = base(json!({"id": 42, "type": "private", "first_name": "A"}), "x");
        value["from"]["is_bot"] = json!(true);
        let other = inbound_message(&parse(value.clone()), &bot()).expect("another bot");
        assert!(other.is_bot);
        value["from"]["id"] = json!(bot().id);
        assert!(inbound_message(&parse(value), &bot()).is_none(), "its own");
        let value = base(
            json!({"id": 42, "type": "private", "first_name": "A"}),
            "   ",
        );
        assert!(inbound_message(&parse(value), &bot()).is_none());
    }
}
