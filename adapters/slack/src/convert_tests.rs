//! Real event payloads (shapes from Slack's Events API docs) through the converter.

use serde_json::json;

use super::*;

fn bot() -> BotIdentity {
    BotIdentity {
        user_id: "UBOT".into(),
        bot_id: Some("BBOT".into()),
        team_id: "T1".into(),
        name: "antler".into(),
    }
}

fn callback(event: Value) -> Value {
    json!({"token": "x", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
        "event_id": "Ev1", "event_time": 1_700_000_000, "event": event})
}

fn convert(event: Value, dm: DmThreading) -> Option<InboundMessage> {
    event_message(&callback(event), &bot(), dm)
}

#[test]
fn channels_dms_and_threads_map_to_topics() {
    // (event, dm threading, chat, topic, direct, mentions, thread_reply, text)
    let cases = [
        (
            json!({"type": "app_mention", "user": "U1", "text": "<@UBOT> what is up?",
                "ts": "100.1", "channel": "C1", "event_ts": "100.1"}),
            DmThreading::PerDm,
            "C1",
            Some("100.1"),
            false,
            true,
            false,
            "what is up?",
        ),
        (
            json!({"type": "message", "channel_type": "channel", "user": "U1",
                "text": "<@UBOT|antler> what is up?", "ts": "100.1", "channel": "C1"}),
            DmThreading::PerDm,
            "C1",
            Some("100.1"),
            false,
            true,
            false,
            "what is up?",
        ),
        (
            json!({"type": "message", "channel_type": "channel", "user": "U2", "text": "and then?",
                "ts": "100.5", "thread_ts": "100.1", "channel": "C1"}),
            DmThreading::PerDm,
            "C1",
            Some("100.1"),
            false,
            false,
            true,
            "and then?",
        ),
        (
            json!({"type": "message", "channel_type": "im", "user": "U1", "text": "hi",
                "ts": "200.1", "channel": "D1"}),
            DmThreading::PerDm,
            "D1",
            None,
            true,
            false,
            false,
            "hi",
        ),
        (
            json!({"type": "message", "channel_type": "im", "user": "U1", "text": "in a thread",
                "ts": "200.9", "thread_ts": "200.1", "channel": "D1"}),
            DmThreading::PerDm,
            "D1",
            Some("200.1"),
            true,
            false,
            false,
            "in a thread",
        ),
        (
            json!({"type": "message", "channel_type": "im", "user": "U1", "text": "hi",
                "ts": "200.1", "channel": "D1"}),
            DmThreading::PerThread,
            "D1",
            Some("200.1"),
            true,
            false,
            false,
            "hi",
        ),
        (
            json!({"type": "message", "channel_type": "channel", "user": "U1",
                "text": "see <https://x.test/a?b=1&amp;c=2|the docs> &lt;3 in <#C9|general> <!here>",
                "ts": "1.1", "channel": "C1"}),
            DmThreading::PerDm,
            "C1",
            Some("1.1"),
            false,
            false,
            false,
            "see the docs (https://x.test/a?b=1&c=2) <3 in #general @here",
        ),
    ];
    for (idx, (event, dm, chat, topic, direct, mentions, thread_reply, text)) in
        cases.into_iter().enumerate()
    {
        let message = convert(event, dm).unwrap_or_else(|| panic!("case {idx} is answered"));
        assert_eq!(message.chat_id, chat, "case {idx}");
        assert_eq!(message.topic_id.as_deref(), topic, "case {idx}");
        assert_eq!(message.is_direct, direct, "case {idx}");
        assert_eq!(message.mentions_bot, mentions, "case {idx}");
        assert_eq!(message.thread_reply, thread_reply, "case {idx}");
        assert_eq!(message.text, text, "case {idx}");
        assert_eq!(message.workspace_id.as_deref(), Some("T1"), "case {idx}");
    }
}

#[test]
fn a_mention_and_its_message_event_are_one_message() {
    let mention = convert(
        json!({"type": "app_mention", "user": "U1", "text": "<@UBOT> hi", "ts": "5.5",
            "channel": "C1"}),
        DmThreading::PerDm,
    )
    .expect("mention");
    let message = convert(
        json!({"type": "message", "channel_type": "channel", "user": "U1",
            "text": "<@UBOT> hi", "ts": "5.5", "channel": "C1"}),
        DmThreading::PerDm,
    )
    .expect("message");
    assert_eq!(mention, message, "the journal sees the same message twice");
}

#[test]
fn own_posts_edits_and_empty_messages_are_not_answered() {
    let ignored = [
        json!({"type": "message", "channel_type": "im", "user": "UBOT", "text": "my own answer",
            "ts": "1.1", "channel": "D1"}),
        json!({"type": "message", "channel_type": "im", "bot_id": "BBOT", "user": "U9",
            "text": "my own post, by bot id", "ts": "1.1", "channel": "D1"}),
        json!({"type": "message", "subtype": "message_changed", "channel_type": "im",
            "channel": "D1", "ts": "1.2", "message": {"text": "edited"}}),
        json!({"type": "message", "subtype": "channel_join", "user": "U1", "text": "joined",
            "ts": "1.3", "channel": "C1"}),
        json!({"type": "message", "channel_type": "im", "user": "U1", "text": "  ", "ts": "1.4",
            "channel": "D1"}),
        json!({"type": "reaction_added", "user": "U1", "reaction": "eyes"}),
    ];
    for (idx, event) in ignored.into_iter().enumerate() {
        assert_eq!(convert(event, DmThreading::PerDm), None, "case {idx}");
    }
    assert_eq!(
        event_message(
            &json!({"type": "url_verification", "challenge": "c"}),
            &bot(),
            DmThreading::PerDm
        ),
        None
    );
}

#[test]
fn shared_files_become_handles_to_download() {
    let message = convert(
        json!({"type": "message", "subtype": "file_share", "channel_type": "im", "user": "U1",
        "text": "summarise", "ts": "3.1", "channel": "D1", "files": [
            {"id": "F1", "name": "notes.txt", "mimetype": "text/plain", "size": 15,
             "mode": "hosted", "url_private": "https://files.slack.com/files-pri/T1-F1/notes.txt",
             "url_private_download": "https://files.slack.com/files-pri/T1-F1/download/notes.txt"},
            {"id": "F2", "mode": "tombstone"},
            {"id": "F3", "name": "shot.png", "mimetype": "image/png", "size": 9,
             "url_private": "https://files.slack.com/files-pri/T1-F3/shot.png"}
        ]}),
        DmThreading::PerDm,
    )
    .expect("file share");
    assert_eq!(message.files.len(), 2);
    assert_eq!(
        message.files[0].handle,
        "https://files.slack.com/files-pri/T1-F1/download/notes.txt"
    );
    assert_eq!(message.files[0].filename.as_deref(), Some("notes.txt"));
    assert!(!message.files[0].is_image);
    assert!(message.files[1].is_image);
}

#[test]
fn clips_are_voice_notes_and_audio_files_audio() {
    let message = convert(
        json!({"type": "message", "subtype": "file_share", "channel_type": "im", "user": "U1",
        "text": "", "ts": "3.2", "channel": "D1", "files": [
            {"id": "F1", "name": "audio_message.webm", "mimetype": "audio/webm",
             "subtype": "slack_audio", "media_display_type": "audio", "duration_ms": 41_200,
             "size": 30_000, "url_private_download": "https://files.slack.com/d/F1"},
            {"id": "F2", "name": "clip.mp4", "mimetype": "video/mp4",
             "media_display_type": "audio", "duration_ms": 5_000,
             "url_private_download": "https://files.slack.com/d/F2"},
            {"id": "F3", "name": "talk.mp3", "mimetype": "audio/mpeg",
             "url_private_download": "https://files.slack.com/d/F3"},
            {"id": "F4", "name": "notes.txt", "mimetype": "text/plain",
             "url_private_download": "https://files.slack.com/d/F4"}
        ]}),
        DmThreading::PerDm,
    )
    .expect("clip");
    let audio: Vec<_> = message
        .files
        .iter()
        .map(|file| file.audio.clone())
        .collect();
    let info = |kind, duration_seconds| {
        Some(AudioInfo {
            kind,
            duration_seconds,
        })
    };
    assert_eq!(
        audio,
        [
            info(AudioKind::Voice, Some(42)),
            info(AudioKind::Voice, Some(5)),
            info(AudioKind::Audio, None),
            None
        ]
    );
}

#[test]
fn slash_commands_are_chat_commands() {
    let fields = |text: &str, channel: &str| {
        json!({"command": "/antler", "text": text, "user_id": "U1", "user_name": "ann",
            "channel_id": channel, "channel_name": "general", "team_id": "T1",
            "trigger_id": "13345224609.738474920.8088930838d88f008e0"})
    };
    let new = command_message(&fields("new", "D1"), &bot()).expect("command");
    assert_eq!(new.text, "/new");
    assert!(new.is_direct);
    assert_eq!(slash_user(&new.platform_message_id), Some("U1"));
    let help = command_message(&fields(" ", "C1"), &bot()).expect("command");
    assert_eq!(help.text, "/help");
    assert!(!help.is_direct && help.mentions_bot);
    assert_eq!(
        command_message(&fields("/model fast", "C1"), &bot())
            .expect("command")
            .text,
        "/model fast"
    );
    assert_eq!(slash_user("1700.1"), None);
}

#[test]
fn other_bots_pass_marked_with_both_ids_and_their_name() {
    let app = convert(
        json!({"type": "message", "channel_type": "channel", "bot_id": "B7", "user": "U7",
            "text": "<@UBOT> build 42 failed", "ts": "1.5", "channel": "C1",
            "bot_profile": {"id": "B7", "name": "CI Bot"}}),
        DmThreading::PerDm,
    )
    .expect("another app's post");
    assert!(app.is_bot && app.mentions_bot);
    assert_eq!(
        (app.user_id.as_str(), app.bot_id.as_deref()),
        ("U7", Some("B7"))
    );
    assert_eq!(app.display_name.as_deref(), Some("CI Bot"));
    let legacy = convert(
        json!({"type": "message", "subtype": "bot_message", "bot_id": "B8", "username": "deploys",
            "text": "<@UBOT> deployed", "ts": "1.6", "channel": "C1", "channel_type": "channel"}),
        DmThreading::PerDm,
    )
    .expect("a legacy bot_message");
    assert!(legacy.is_bot);
    assert_eq!(legacy.user_id, "B8", "no bot user: the bot id stands in");
    assert_eq!(legacy.display_name.as_deref(), Some("deploys"));
    let person = convert(
        json!({"type": "message", "channel_type": "channel", "user": "U1", "text": "hi",
            "ts": "1.7", "channel": "C1"}),
        DmThreading::PerDm,
    )
    .expect("a person");
    assert!(!person.is_bot && person.bot_id.is_none());
}
