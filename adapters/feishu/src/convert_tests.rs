//! Table-driven tests of the event converter, on payloads shaped like Feishu's documentation.

use serde_json::{Value, json};

use super::*;

fn bot() -> BotIdentity {
    BotIdentity {
        open_id: "ou_bot".into(),
        name: "Antler".into(),
    }
}

fn mention(key: &str, open_id: &str, name: &str) -> Value {
    json!({"key": key, "id": {"open_id": open_id, "union_id": format!("on_{open_id}"), "user_id": null},
        "name": name, "tenant_key": "tk1"})
}

/// An `event` object of `im.message.receive_v1`.
fn event(chat_type: &str, message_type: &str, content: Value, extra: Value) -> Value {
    let mut message = json!({"message_id": "om_1", "root_id": "", "parent_id": "",
        "create_time": "1700000000000", "chat_id": "oc_chat", "chat_type": chat_type,
        "message_type": message_type, "content": content.to_string(), "mentions": []});
    if let (Some(target), Some(fields)) = (message.as_object_mut(), extra.as_object()) {
        for (key, value) in fields {
            target.insert(key.clone(), value.clone());
        }
    }
    json!({"sender": {"sender_id": {"open_id": "ou_alice", "union_id": "on_alice", "user_id": "u1"},
        "sender_type": "user", "tenant_key": "tk1"}, "message": message})
}

#[test]
fn text_mentions_are_resolved_and_the_bots_removed() {
    let cases = [
        (
            "@_user_1 hello",
            vec![mention("@_user_1", "ou_bot", "Antler")],
            "hello",
            true,
        ),
        (
            "hi @_user_1, ask @_user_2 and @_user_10",
            vec![
                mention("@_user_1", "ou_bot", "Antler"),
                mention("@_user_2", "ou_bob", "Bob"),
                mention("@_user_10", "ou_eve", "Eve"),
            ],
            "hi , ask @Bob and @Eve",
            true,
        ),
        ("@_all meeting now", vec![], "@all meeting now", false),
        ("/help", vec![], "/help", false),
        (
            "@_user_1 /new",
            vec![mention("@_user_1", "ou_bot", "Antler")],
            "/new",
            true,
        ),
    ];
    for (text, mentions, expected, mentions_bot) in cases {
        let parsed = parse_content("text", &json!({"text": text}), "om_1", &mentions, &bot())
            .expect("parsed");
        assert_eq!(parsed.text, expected, "{text:?}");
        assert_eq!(parsed.mentions_bot, mentions_bot, "{text:?}");
    }
}

/// A post with a title, a link, an @mention of the bot and of a person, an image and a code
/// block, as the receive event carries it (no language wrapper).
#[test]
fn post_rich_text_snapshot() {
    let content = json!({
        "title": "Weekly report",
        "content": [
            [{"tag": "at", "user_id": "@_user_1", "user_name": "Antler"},
             {"tag": "text", "text": " please summarise, see "},
             {"tag": "a", "href": "https://example.com/r", "text": "the report"},
             {"tag": "text", "text": " by "},
             {"tag": "at", "user_id": "@_user_2", "user_name": "Bob"}],
            [{"tag": "img", "image_key": "img_v2_abc", "width": 300, "height": 300}],
            [{"tag": "text", "text": "thanks "}, {"tag": "emotion", "emoji_type": "SMILE"}],
            [{"tag": "code_block", "language": "PYTHON", "text": "print(1)\n"}]
        ]
    });
    let mentions = [
        mention("@_user_1", "ou_bot", "Antler"),
        mention("@_user_2", "ou_bob", "Bob"),
    ];
    let parsed = parse_content("post", &content, "om_9", &mentions, &bot()).expect("post");
    let expected = "**Weekly report**\n\
                    please summarise, see [the report](https://example.com/r) by @Bob\n\
                    [image]\n\
                    thanks :SMILE:\n\
                    ```python\nprint(1)\n```";
    assert_eq!(parsed.text, expected);
    assert!(parsed.mentions_bot);
    assert_eq!(
        parsed.files,
        [InboundFile {
            handle: "image:om_9:img_v2_abc".into(),
            filename: None,
            mime_type: None,
            size: None,
            is_image: true,
            audio: None,
        }]
    );
}

#[test]
fn posts_with_a_language_wrapper_and_files_parse() {
    let content = json!({"zh_cn": {"title": "", "content": [
        [{"tag": "text", "text": "summarise this"}],
        [{"tag": "file", "file_key": "file_v2_1", "file_name": "notes.txt"}]
    ]}});
    let parsed = parse_content("post", &content, "om_2", &[], &bot()).expect("post");
    assert_eq!(parsed.text, "summarise this\n[file: notes.txt]");
    assert_eq!(parsed.files[0].handle, "file:om_2:file_v2_1");
    assert_eq!(parsed.files[0].filename.as_deref(), Some("notes.txt"));
}

#[test]
fn resources_become_files() {
    let cases = [
        (
            "image",
            json!({"image_key": "img_1"}),
            "image:om_1:img_1",
            None,
            true,
        ),
        (
            "file",
            json!({"file_key": "file_1", "file_name": "a.pdf"}),
            "file:om_1:file_1",
            Some("a.pdf"),
            false,
        ),
        (
            "audio",
            json!({"file_key": "file_2", "duration": 2000}),
            "file:om_1:file_2",
            Some("file_2.opus"),
            false,
        ),
        (
            "media",
            json!({"file_key": "file_3", "image_key": "img_3", "file_name": "v.mp4", "duration": 10}),
            "file:om_1:file_3",
            Some("v.mp4"),
            false,
        ),
    ];
    for (kind, content, handle, name, is_image) in cases {
        let message = event_message(&event("p2p", kind, content, json!({})), None, &bot())
            .unwrap_or_else(|why| panic!("{kind}: {why}"));
        assert_eq!(message.text, "");
        assert_eq!(message.files.len(), 1, "{kind}");
        assert_eq!(message.files[0].handle, handle);
        assert_eq!(message.files[0].filename.as_deref(), name);
        assert_eq!(message.files[0].is_image, is_image);
        assert_eq!(parse_handle(handle).map(|(_, m, _)| m), Some("om_1"));
        let expected_audio = (kind == "audio").then_some(AudioInfo {
            kind: AudioKind::Voice,
            duration_seconds: Some(2),
        });
        assert_eq!(message.files[0].audio, expected_audio, "{kind}");
    }
    assert_eq!(parse_handle("file:../x:y"), None);
    assert_eq!(parse_handle("other:om_1:y"), None);
}

#[test]
fn direct_and_group_messages_get_their_topics() {
    let text = json!({"text": "@_user_1 hi"});
    let at_bot = json!({"mentions": [mention("@_user_1", "ou_bot", "Antler")]});
    let direct = event_message(
        &event("p2p", "text", json!({"text": "hi"}), json!({})),
        Some("tk1"),
        &bot(),
    )
    .expect("direct");
    assert!(direct.is_direct);
    assert_eq!(direct.topic_id, None);
    assert_eq!(direct.user_id, "ou_alice");
    assert_eq!(direct.workspace_id.as_deref(), Some("tk1"));
    assert_eq!(direct.chat_id, "oc_chat");

    let top_level = event_message(
        &event("group", "text", text.clone(), at_bot.clone()),
        None,
        &bot(),
    )
    .expect("group");
    assert_eq!(
        top_level.topic_id.as_deref(),
        Some("om_1"),
        "a top-level message starts a topic"
    );
    assert!(top_level.mentions_bot && !top_level.thread_reply);
    assert_eq!(top_level.text, "hi");

    let reply = json!({"root_id": "om_root", "parent_id": "om_card", "thread_id": "omt_1"});
    let follow_up = event_message(
        &event("group", "text", json!({"text": "and then?"}), reply),
        None,
        &bot(),
    )
    .expect("reply");
    assert_eq!(
        follow_up.topic_id.as_deref(),
        Some("om_root"),
        "a reply continues its root's topic"
    );
    assert_eq!(follow_up.reply_to.as_deref(), Some("om_card"));
    assert!(follow_up.thread_reply && !follow_up.mentions_bot);

    let chatter = event_message(
        &event("group", "text", json!({"text": "lunch?"}), json!({})),
        None,
        &bot(),
    )
    .expect("chatter");
    assert!(!chatter.mentions_bot && !chatter.thread_reply);
}

#[test]
fn what_is_skipped_says_why() {
    let mut from_system = event("p2p", "text", json!({"text": "hi"}), json!({}));
    from_system["sender"]["sender_type"] = json!("system");
    let mut from_itself = event("p2p", "text", json!({"text": "hi"}), json!({}));
    from_itself["sender"]["sender_type"] = json!("app");
    from_itself["sender"]["sender_id"] = json!({"open_id": "ou_bot"});
    let mut bad_content = event("p2p", "text", json!({}), json!({}));
    bad_content["message"]["content"] = json!("{not json");
    let cases = [
        (from_system, "system sender"),
        (from_itself, "own message"),
        (bad_content, "unreadable text content"),
        (
            event("p2p", "sticker", json!({"file_key": "f"}), json!({})),
            "not supported",
        ),
        (
            event("p2p", "text", json!({"text": "  "}), json!({})),
            "empty",
        ),
    ];
    for (event, why) in cases {
        let error = event_message(&event, None, &bot()).expect_err(why);
        assert!(error.contains(why), "{error:?} should say {why:?}");
    }
}

#[test]
fn another_apps_bot_passes_marked_with_its_ids() {
    let mut from_app = event("group", "text", json!({"text": "build failed"}), json!({}));
    from_app["sender"]["sender_type"] = json!("app");
    from_app["sender"]["sender_id"] = json!({"open_id": "ou_ci", "app_id": "cli_ci"});
    let message = event_message(&from_app, Some("tk1"), &bot()).expect("another bot");
    assert!(message.is_bot);
    assert_eq!(message.user_id, "ou_ci");
    assert_eq!(message.bot_id.as_deref(), Some("cli_ci"));
    let person = event_message(
        &event("group", "text", json!({"text": "hi"}), json!({})),
        Some("tk1"),
        &bot(),
    )
    .expect("a person");
    assert!(!person.is_bot && person.bot_id.is_none());
}
