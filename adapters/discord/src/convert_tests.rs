use serde_json::{Value, json};

use super::*;

const BOT: &str = "100";

fn bot() -> BotIdentity {
    BotIdentity {
        user_id: BOT.into(),
        name: "antler".into(),
    }
}

/// A MESSAGE_CREATE payload as Discord sends it.
fn payload(id: &str, channel: &str, guild: Option<&str>, author: Value, content: &str) -> Value {
    let mut message = json!({
        "id": id, "channel_id": channel, "author": author, "content": content,
        "timestamp": "2024-01-01T00:00:00.000000+00:00", "edited_timestamp": null,
        "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
        "attachments": [], "embeds": [], "pinned": false, "type": 0
    });
    if let Some(guild) = guild {
        message["guild_id"] = json!(guild);
    }
    message
}

fn person(id: &str) -> Value {
    json!({"id": id, "username": format!("user{id}"), "discriminator": "0", "avatar": null, "global_name": "Person"})
}

/// (payload, place, thread mode, chat, topic, direct, mentions, thread_reply, text)
type Case<'a> = (
    Value,
    Option<&'a Place>,
    bool,
    &'a str,
    Option<&'a str>,
    bool,
    bool,
    bool,
    &'a str,
);

fn parse(value: Value) -> Message {
    serde_json::from_value(value).expect("a message")
}

#[test]
fn table_of_messages() {
    let thread = Place::Thread {
        parent: "300".into(),
    };
    let mention = |value: &mut Value| value["mentions"] = json!([{"id": BOT, "username": "antler", "discriminator": "0", "avatar": null, "bot": true}]);
    let mut mentioned = payload("201", "300", Some("9"), person("7"), "<@100> hello there");
    mention(&mut mentioned);
    let mut replied = payload("202", "300", Some("9"), person("7"), "and this?");
    replied["type"] = json!(19);
    replied["message_reference"] =
        json!({"message_id": "150", "channel_id": "300", "guild_id": "9"});
    replied["referenced_message"] = payload(
        "150",
        "300",
        Some("9"),
        json!({"id": BOT, "username": "antler", "discriminator": "0", "avatar": null, "bot": true}),
        "earlier answer",
    );
    let cases: Vec<Case<'_>> = vec![
        (
            payload("200", "55", None, person("7"), "hi"),
            None,
            true,
            "55",
            None,
            true,
            false,
            false,
            "hi",
        ),
        (
            mentioned.clone(),
            Some(&Place::Channel),
            true,
            "300",
            Some("201"),
            false,
            true,
            false,
            "hello there",
        ),
        (
            mentioned,
            Some(&Place::Channel),
            false,
            "300",
            None,
            false,
            true,
            false,
            "hello there",
        ),
        (
            payload("203", "300", Some("9"), person("7"), "just chatting"),
            Some(&Place::Channel),
            true,
            "300",
            Some("203"),
            false,
            false,
            false,
            "just chatting",
        ),
        (
            payload("204", "201", Some("9"), person("7"), "follow-up"),
            Some(&thread),
            true,
            "300",
            Some("201"),
            false,
            false,
            true,
            "follow-up",
        ),
        (
            {
                let mut nick = payload(
                    "205",
                    "201",
                    Some("9"),
                    person("7"),
                    "<@!100>   keep   spacing",
                );
                mention(&mut nick);
                nick
            },
            Some(&thread),
            true,
            "300",
            Some("201"),
            false,
            true,
            false,
            "keep   spacing",
        ),
        (
            replied,
            Some(&Place::Channel),
            false,
            "300",
            None,
            false,
            true,
            false,
            "and this?",
        ),
    ];
    for (idx, (value, place, mode, chat, topic, direct, mentions, thread_reply, text)) in
        cases.into_iter().enumerate()
    {
        let message = inbound_message(&parse(value), &bot(), place, mode)
            .unwrap_or_else(|| panic!("case {idx} gives a message"));
        assert_eq!(message.chat_id, chat, "case {idx}");
        assert_eq!(message.topic_id.as_deref(), topic, "case {idx}");
        assert_eq!(message.is_direct, direct, "case {idx}");
        assert_eq!(message.mentions_bot, mentions, "case {idx}");
        assert_eq!(message.thread_reply, thread_reply, "case {idx}");
        assert_eq!(message.text, text, "case {idx}");
        assert_eq!(message.channel, "discord");
        assert_eq!(message.display_name.as_deref(), Some("Person"));
    }
}

#[test]
fn a_mention_is_one_discord_resolved_and_typed_outside_code() {
    let user = |id: &str| json!({"id": id, "username": "u", "discriminator": "0", "avatar": null});
    // (content, ids in `mentions`, mentions the bot, text)
    let cases = [
        ("<@100> hi", vec![BOT], true, "hi"),
        ("<@!100> hi", vec![BOT], true, "hi"),
        ("<@100> hi", vec![], false, "hi"),
        ("<@1000> hi", vec!["1000"], false, "<@1000> hi"),
        (
            "```\n<@100> in code\n```",
            vec![BOT],
            false,
            "```\n<@100> in code\n```",
        ),
        ("run `<@100>` now", vec![BOT], false, "run `<@100>` now"),
        ("<@100> run `<@100>`", vec![BOT], true, "run `<@100>`"),
    ];
    for (content, ids, expected, text) in cases {
        let mut value = payload("210", "300", Some("9"), person("7"), content);
        value["mentions"] = json!(ids.iter().map(|id| user(id)).collect::<Vec<_>>());
        let message = inbound_message(&parse(value), &bot(), Some(&Place::Channel), false)
            .expect("a message");
        assert_eq!(message.mentions_bot, expected, "{content:?} {ids:?}");
        assert_eq!(message.text, text, "{content:?}");
    }
}

#[test]
fn own_posts_and_system_messages_are_not_for_the_bot() {
    let itself =
        json!({"id": BOT, "username": "antler", "discriminator": "0", "avatar": null, "bot": true});
    let mut joined = payload("4", "55", None, person("7"), "");
    joined["type"] = json!(7);
    let empty = payload("5", "55", None, person("7"), "<@100>");
    for value in [
        payload("2", "55", None, itself, "my own answer"),
        joined,
        empty,
    ] {
        assert_eq!(inbound_message(&parse(value), &bot(), None, true), None);
    }
}

#[test]
fn voice_messages_are_voice_notes_and_audio_attachments_audio() {
    let attachment = |id: &str, name: &str, mime: &str| {
        json!({"id": id, "filename": name, "size": 9000, "content_type": mime,
            "url": format!("https://cdn.discordapp.com/attachments/55/{id}/{name}"),
            "proxy_url": format!("https://media.discordapp.net/attachments/55/{id}/{name}")})
    };
    let mut voice = payload("6", "55", None, person("7"), "");
    let mut note = attachment("80", "voice-message.ogg", "audio/ogg");
    note["duration_secs"] = json!(41.3);
    note["waveform"] = json!("AAAA");
    voice["attachments"] = json!([note]);
    voice["flags"] = json!(1 << 13);
    let mut files = payload("7", "55", None, person("7"), "listen");
    files["attachments"] = json!([
        attachment("81", "talk.mp3", "audio/mpeg"),
        attachment("82", "notes.txt", "text/plain")
    ]);
    let audio = |value: Value| -> Vec<Option<AudioInfo>> {
        inbound_message(&parse(value), &bot(), None, true)
            .expect("a message")
            .files
            .into_iter()
            .map(|file| file.audio)
            .collect()
    };
    assert_eq!(
        audio(voice),
        [Some(AudioInfo {
            kind: AudioKind::Voice,
            duration_seconds: Some(42)
        })]
    );
    assert_eq!(
        audio(files),
        [
            Some(AudioInfo {
                kind: AudioKind::Audio,
                duration_seconds: None
            }),
            None
        ]
    );
}

#[test]
fn other_bots_and_webhooks_pass_marked_as_bots() {
    let other_bot = json!({"id": "8", "username": "otherbot", "discriminator": "0", "avatar": null, "bot": true});
    let mut webhook = payload("3", "55", None, person("7"), "from a webhook");
    webhook["webhook_id"] = json!("77");
    for value in [payload("1", "55", None, other_bot, "beep"), webhook] {
        let message = inbound_message(&parse(value), &bot(), None, true).expect("passed on");
        assert!(message.is_bot, "{message:?}");
    }
    let person = inbound_message(
        &parse(payload("6", "55", None, person("7"), "hi")),
        &bot(),
        None,
        true,
    )
    .expect("a person");
    assert!(!person.is_bot);
}

#[test]
fn the_guild_nickname_wins_then_the_display_name_then_the_username() {
    let author = |global: Value| json!({"id": "7", "username": "ann.lee", "discriminator": "0", "avatar": null, "global_name": global});
    let cases = [
        (
            author(json!("Ann Lee")),
            Some(
                json!({"nick": "Annie", "roles": [], "joined_at": "2024-01-01T00:00:00.000000+00:00", "deaf": false, "mute": false}),
            ),
            "Annie",
        ),
        (
            author(json!("Ann Lee")),
            Some(
                json!({"nick": null, "roles": [], "joined_at": "2024-01-01T00:00:00.000000+00:00", "deaf": false, "mute": false}),
            ),
            "Ann Lee",
        ),
        (author(json!("Ann Lee")), None, "Ann Lee"),
        (author(Value::Null), None, "ann.lee"),
    ];
    for (author, member, expected) in cases {
        let mut value = payload("8", "300", Some("9"), author, "hello");
        if let Some(member) = member {
            value["member"] = member;
        }
        let message = inbound_message(&parse(value), &bot(), Some(&Place::Channel), false)
            .expect("a message");
        assert_eq!(message.display_name.as_deref(), Some(expected));
    }
}

#[test]
fn attachments_become_files() {
    let mut value = payload("9", "55", None, person("7"), "");
    value["attachments"] = json!([{"id": "1", "filename": "notes.txt", "size": 15,
        "url": "https://cdn.discordapp.com/attachments/55/1/notes.txt",
        "proxy_url": "https://media.discordapp.net/attachments/55/1/notes.txt",
        "content_type": "text/plain; charset=utf-8"}]);
    let message = inbound_message(&parse(value), &bot(), None, true).expect("a file message");
    assert_eq!(message.files.len(), 1);
    let file = &message.files[0];
    assert_eq!(file.filename.as_deref(), Some("notes.txt"));
    assert_eq!(file.size, Some(15));
    assert!(!file.is_image);
    assert!(file.handle.starts_with("https://cdn.discordapp.com/"));
}
