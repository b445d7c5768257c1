//! Feishu end to end: the daemon in-process behind its webhook, the fake Feishu open platform
//! (encrypted, signed pushes; cards; tokens; files) and the scripted model.

use std::time::Duration;

use antler_test_support::{
    FAKE_FEISHU_VERIFICATION_TOKEN, FakeFeishu, FakeOpenAi, FeishuFailure, FeishuSigning, Reply,
    p2p_chat, url_verification,
};
use serde_json::{Value, json};

use antler::channels::manager::QUEUED_NOTE;

use super::feishu_driver::{feishu_section, webhook_url};
use super::group_support::outside_quotes;
use super::{Bot, WAIT, daemon_yaml};

const GROUP: &str = "oc_group0777";
const ALICE: &str = "ou_alice0001";

/// A daemon with Feishu against `fake`, receiving its pushes; waits until the channel runs.
async fn start(fake: &FakeFeishu, model: &FakeOpenAi, dir: &std::path::Path) -> Bot {
    let extra = format!("    allowed_chats: [{GROUP}]\n");
    let bot = Bot::start(&daemon_yaml(dir, model, &feishu_section(fake, &extra))).await;
    fake.set_webhook(webhook_url(bot.addr));
    bot.readyz_until("feishu running", |r| {
        r["channels"]["feishu"]["state"] == "running"
    })
    .await;
    bot
}

/// The bot's messages in `chat` without the "queued" note, which a message sent right after
/// an answer gets when the previous turn is still finishing on a slow machine.
fn answers(fake: &FakeFeishu, chat: &str) -> Vec<String> {
    fake.chat_texts(chat)
        .into_iter()
        .filter(|text| text != QUEUED_NOTE)
        .collect()
}

/// The text of the card a send or patch call carried.
fn card_text(call_body: &Value) -> String {
    let card: Value =
        serde_json::from_str(call_body["content"].as_str().unwrap_or("{}")).expect("card json");
    card["elements"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Waits until the message carries DONE and no longer OnIt: the adapter adds the new reaction
/// before it removes the old one, so seeing DONE alone does not mean the swap is complete.
async fn answered(fake: &FakeFeishu, message_id: &str) {
    let done = (message_id.to_string(), "DONE".to_string());
    let working = (message_id.to_string(), "OnIt".to_string());
    fake.wait_for(WAIT, "the DONE reaction replacing OnIt", |f| {
        let reactions = f.reactions();
        reactions.contains(&done) && !reactions.contains(&working)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn challenges_are_answered_plain_and_encrypted_and_forgeries_change_nothing() {
    let model = FakeOpenAi::start().await;
    for fake in [
        FakeFeishu::start().await,
        FakeFeishu::start_with(None).await,
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let bot = start(&fake, &model, dir.path()).await;
        let sender = fake.sender();
        let challenge = url_verification("ajls384kdjx98XX", FAKE_FEISHU_VERIFICATION_TOKEN);
        // Feishu does not sign the URL verification. It wants the answer within 1 s, which the
        // handler meets by answering from the request alone; a loaded test machine cannot time
        // that, so the bound here only catches a handler that waits on something.
        let (status, answer) = tokio::time::timeout(
            WAIT,
            sender.post(&sender.body(&challenge, "c1"), FeishuSigning::Missing),
        )
        .await
        .expect("the challenge is answered, not left waiting");
        assert_eq!(status, 200, "{answer}");
        let answer: Value = serde_json::from_str(&answer).expect("json");
        assert_eq!(answer, json!({"challenge": "ajls384kdjx98XX"}));
        let forged = url_verification("x", "not-the-token");
        let (status, _) = sender
            .post(&sender.body(&forged, "c2"), FeishuSigning::Missing)
            .await;
        let refused = if fake.encrypt_key().is_some() {
            400
        } else {
            401
        };
        assert_eq!(
            status, refused,
            "a challenge with another token is not answered"
        );
        bot.stop().await;
    }
    assert!(model.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_stale_mistokened_or_tampered_pushes_are_rejected_and_nothing_is_processed() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path()).await;
    // A real message to copy: it is delivered once, then posted again in forged forms.
    model.push(Reply::text("genuine answer"));
    let genuine = fake.user_says_p2p(ALICE, "genuine");
    answered(&fake, &genuine).await;
    let (_, payload) = fake.push_of(&genuine).expect("the genuine push");
    let sender = fake.sender();
    let fresh = |id: &str| {
        let mut payload = payload.clone();
        payload["header"]["event_id"] = json!(format!("ev_forged_{id}"));
        payload["event"]["message"]["message_id"] = json!(format!("om_forged_{id}"));
        payload
    };
    let body = sender.body(&fresh("1"), "f1");
    let mut wrong_token = fresh("2");
    wrong_token["header"]["token"] = json!("not-the-token");
    let wrong_token = sender.body(&wrong_token, "f2");
    let mut tampered: Value = serde_json::from_str(&sender.body(&fresh("3"), "f3")).expect("json");
    let mut encrypted = tampered["encrypt"].as_str().expect("encrypted").to_string();
    encrypted.replace_range(30..34, "AAAA");
    tampered["encrypt"] = json!(encrypted);
    let tampered = tampered.to_string();
    for (case, body, signing, expected) in [
        ("forged signature", &body, FeishuSigning::Forged, 400),
        ("unsigned event", &body, FeishuSigning::Missing, 400),
        (
            "stale",
            &body,
            FeishuSigning::Stale(Duration::from_secs(600)),
            400,
        ),
        (
            "wrong verification token",
            &wrong_token,
            FeishuSigning::Valid,
            400,
        ),
        ("tampered ciphertext", &tampered, FeishuSigning::Valid, 400),
    ] {
        let (status, answer) = sender.post(body, signing).await;
        assert_eq!(status, expected, "{case}: {answer}");
    }
    // The chat's messages are handled in order: once a later genuine one is answered, a
    // forgery that got through would have been answered before it.
    model.push(Reply::text("second answer"));
    let second = fake.user_says_p2p(ALICE, "second");
    answered(&fake, &second).await;
    assert_eq!(
        model.requests().len(),
        2,
        "only the genuine messages reached the agent"
    );
    assert_eq!(
        answers(&fake, &p2p_chat(ALICE)),
        ["genuine answer", "second answer"]
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_p2p_message_gets_a_card_patched_in_place_to_the_final_answer() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path()).await;
    let chunks = ["# Plan", "\n\nFirst", " we", " think,", " then", " act."];
    model.push(Reply::slow(chunks, Duration::from_millis(400)));
    let asked = fake.user_says_p2p(ALICE, "make a plan");
    answered(&fake, &asked).await;

    let replies = fake.calls_of("im.message.reply");
    assert_eq!(replies.len(), 1, "one card for the whole answer");
    assert_eq!(replies[0].body["msg_type"], "interactive");
    assert_eq!(card_text(&replies[0].body), "Working on it…");
    let card_id = fake.bot_messages(&p2p_chat(ALICE))[0].message_id.clone();
    let patches = fake.calls_of("im.message.patch");
    assert!(patches.len() >= 2, "streamed, then final: {patches:?}");
    let last = patches.last().expect("final patch");
    assert_eq!(
        card_text(&last.body),
        "**Plan**\n\nFirst we think, then act."
    );
    let card = fake.message(&card_id).expect("card");
    assert_eq!(
        card.parent_id.as_deref(),
        Some(asked.as_str()),
        "a reply to the question"
    );
    assert_eq!(card.text(), "**Plan**\n\nFirst we think, then act.");
    assert_eq!(card.updates, patches.len());
    assert_eq!(
        fake.reactions(),
        [(asked.clone(), "DONE".to_string())],
        "OnIt while working, DONE after"
    );
    assert_eq!(
        fake.calls_of("im.message.reaction.create")[0].body["reaction_type"]["emoji_type"],
        "OnIt"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_need_a_mention_and_a_reply_in_the_topic_continues_its_thread() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path()).await;
    fake.user_says_in_group(GROUP, ALICE, "lunch anyone?", false, None);
    model.push(Reply::text("Noted: walnut."));
    let root = fake.user_says_in_group(GROUP, ALICE, "remember walnut", true, None);
    answered(&fake, &root).await;
    let card = fake.bot_messages(GROUP)[0].clone();
    assert_eq!(card.parent_id.as_deref(), Some(root.as_str()));

    // A reply to the bot's card, without a mention, in the same topic.
    model.push(Reply::text("It was walnut."));
    let follow_up = fake.user_says_in_group(
        GROUP,
        "ou_bob0002",
        "what was it?",
        false,
        Some(&card.message_id),
    );
    answered(&fake, &follow_up).await;
    assert_eq!(fake.chat_texts(GROUP), ["Noted: walnut.", "It was walnut."]);
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "the unaddressed chatter reached nobody");
    let second = requests[1].to_string();
    assert!(
        second.contains("remember walnut"),
        "the follow-up continues the topic's thread"
    );
    assert!(
        !outside_quotes(&requests[1]).contains("lunch anyone"),
        "chatter is quoted context at most"
    );
    let second_card = &fake.bot_messages(GROUP)[1];
    assert_eq!(
        second_card.root_id.as_deref(),
        Some(root.as_str()),
        "the answer stays in the topic"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_event_delivered_three_times_is_answered_once() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path()).await;
    model.push(Reply::text("pong"));
    let ping = fake.user_says_p2p(ALICE, "ping");
    fake.wait_for(WAIT, "the delivery", |f| f.push_of(&ping).is_some())
        .await;
    let (event_id, payload) = fake.push_of(&ping).expect("push");
    // Feishu retries (15 s, 5 min, 1 h, …) with the same event_id when it saw no 200 in time.
    let sender = fake.sender();
    for retry in 0..2 {
        let (status, answer) = sender
            .post(
                &sender.body(&payload, &format!("{event_id}-{retry}")),
                FeishuSigning::Valid,
            )
            .await;
        assert_eq!(status, 200, "{answer}");
    }
    answered(&fake, &ping).await;
    // The retries were refused as duplicates before their 200; a later message of the chat,
    // handled after anything they could have queued, shows nothing else was answered.
    model.push(Reply::text("pong again"));
    let again = fake.user_says_p2p(ALICE, "ping again");
    answered(&fake, &again).await;
    assert_eq!(answers(&fake, &p2p_chat(ALICE)), ["pong", "pong again"]);
    assert_eq!(model.requests().len(), 2);
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_refreshed_mid_conversation_without_a_visible_error() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path()).await;
    model.push(Reply::text("first"));
    let first = fake.user_says_p2p(ALICE, "one");
    answered(&fake, &first).await;
    let before = fake.token_requests();
    fake.expire_tokens();
    model.push(Reply::text("second"));
    let second = fake.user_says_p2p(ALICE, "two");
    answered(&fake, &second).await;
    assert_eq!(fake.chat_texts(&p2p_chat(ALICE)), ["first", "second"]);
    assert_eq!(
        fake.token_requests(),
        before + 1,
        "one refresh for the whole turn"
    );
    // The call refused with the stale token is made again right after the refresh.
    let methods: Vec<String> = fake.calls().into_iter().map(|c| c.method).collect();
    let refresh = methods
        .iter()
        .rposition(|m| m == "auth.tenant_access_token")
        .expect("the refresh");
    assert!(refresh > 0 && refresh + 1 < methods.len(), "{methods:?}");
    assert_eq!(methods[refresh - 1], methods[refresh + 1], "{methods:?}");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_with_a_mention_and_an_image_reaches_the_agent_and_artifacts_go_out() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path()).await;
    model.push(Reply::tool_call(
        "write_file",
        json!({"path": "/mnt/user-data/outputs/report.md", "content": "# Report"}),
    ));
    model.push(Reply::tool_call(
        "write_file",
        json!({"path": "/mnt/user-data/outputs/chart.png", "content": "not really a png"}),
    ));
    model.push(Reply::tool_call(
        "present_files",
        json!({"filepaths": ["/mnt/user-data/outputs/report.md", "/mnt/user-data/outputs/chart.png"]}),
    ));
    model.push(Reply::text("Here you go."));
    let post = fake.user_posts_image(GROUP, "group", ALICE, "describe this for", b"\x89PNG fake");
    answered(&fake, &post).await;

    // The post as the agent reads it (a snapshot): title, the bot's mention gone, Bob's kept,
    // the image a placeholder, and the image itself among the uploads.
    let request = model.requests()[0].to_string();
    let expected = "**Look**\\ndescribe this for @Bob\\n[image]";
    assert!(request.contains(expected), "{request}");
    assert!(
        request.contains(&format!("/mnt/user-data/uploads/{post}_0.png")),
        "{request}"
    );
    let resource = &fake.calls_of("im.message.resource")[0];
    assert_eq!(resource.body["type"], "image");

    assert_eq!(fake.chat_files(GROUP), ["report.md", "chart.png"]);
    let uploads = fake.uploads();
    let report = uploads
        .iter()
        .find(|u| u.name == "report.md")
        .expect("report");
    assert_eq!(
        (report.kind.as_str(), report.bytes.as_slice()),
        ("stream", &b"# Report"[..])
    );
    let chart = uploads
        .iter()
        .find(|u| u.name == "chart.png")
        .expect("chart");
    assert_eq!(
        chart.kind, "message",
        "an image goes through the images API"
    );
    let kinds: Vec<String> = fake
        .bot_messages(GROUP)
        .iter()
        .map(|m| m.msg_type.clone())
        .collect();
    assert_eq!(
        kinds,
        ["interactive", "file", "image"],
        "text first, then the files"
    );
    assert!(
        fake.bot_messages(GROUP)
            .iter()
            .all(|m| m.root_id.as_deref() == Some(post.as_str())),
        "everything stays in the topic"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_that_cannot_be_patched_is_followed_by_a_new_reply_and_long_answers_span_cards() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path()).await;
    // Every attempt to patch the status card fails (the message is too old to update).
    for _ in 0..6 {
        fake.fail_next(
            "im.message.patch",
            FeishuFailure::Code(230031, "The message has exceeded the update window.".into()),
        );
    }
    model.push(Reply::text("the final answer"));
    let asked = fake.user_says_p2p(ALICE, "hello");
    answered(&fake, &asked).await;
    let chat = p2p_chat(ALICE);
    assert_eq!(
        fake.chat_texts(&chat),
        ["Working on it…", "the final answer"]
    );

    let limit = antler_feishu::FEISHU_PROFILE.max_text_len;
    let paragraph = format!("{}\n\n", "word ".repeat(99).trim_end());
    let long = paragraph.repeat(limit * 2 / paragraph.len() + 1);
    model.push(Reply::text(&long));
    let asked = fake.user_says_p2p(ALICE, "tell me everything");
    answered(&fake, &asked).await;
    let cards: Vec<String> = fake.chat_texts(&chat).into_iter().skip(2).collect();
    assert!(cards.len() >= 3, "{} cards", cards.len());
    assert!(cards.iter().all(|c| c.chars().count() <= limit));
    let words = |text: &str| text.split_whitespace().count();
    assert_eq!(
        words(&cards.join(" ")),
        words(&long),
        "nothing lost between cards"
    );
    bot.stop().await;
}

#[test]
fn the_section_reports_problems_by_key_and_refuses_websocket() {
    use antler::config::{ConfigOrigin, MapEnv, load_from_str};
    let load = |section: &str| {
        let yaml = format!(
            "config_version: 1\nmodels:\n  - name: m\n    provider: openai\n    model: m\n    base_url: http://127.0.0.1:9/v1\nchannels:\n  feishu:\n{section}"
        );
        load_from_str(
            &yaml,
            ConfigOrigin::Embedded,
            &MapEnv::new(),
            std::path::Path::new("/"),
        )
    };
    let error = load("    enabled: true\n    mode: websocket\n    domain: not a url\n")
        .expect_err("problems");
    let found: Vec<String> = error.problems().iter().map(|p| p.to_string()).collect();
    for key in [
        "app_id",
        "app_secret",
        "verification_token",
        "domain",
        "mode",
    ] {
        assert!(
            found
                .iter()
                .any(|p| p.starts_with(&format!("channels.feishu.{key}:"))),
            "{key} missing from {found:?}"
        );
    }
    let config = load(
        "    enabled: true\n    app_id: cli_1\n    app_secret: sekrit-value\n    verification_token: v\n    encrypt_key: k\n    domain: lark\n    allowed_users: [ou_1]\n    allowed_chats: [oc_1]\n    admins: [ou_2]\n    group_policy: all\n",
    )
    .expect("valid")
    .config;
    let feishu = &config.channels.feishu;
    assert_eq!(feishu.allowed_chats, ["oc_1"]);
    assert!(
        !format!("{feishu:?}").contains("sekrit-value"),
        "secrets are redacted"
    );
    assert!(
        config
            .channels
            .section("feishu")
            .is_some_and(|s| s.enabled())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_app_secret_stops_only_the_channel_with_a_clear_reason() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let section = feishu_section(&fake, "").replace("fake-app-secret", "wrong-secret");
    let bot = Bot::start(&daemon_yaml(dir.path(), &model, &section)).await;
    let ready = bot
        .readyz_until("the channel marked unhealthy", |r| {
            r["channels"]["feishu"]["state"] == "unhealthy"
        })
        .await;
    let reason = ready["channels"]["feishu"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("app_secret") && reason.contains("10014"),
        "{reason}"
    );
    assert_eq!(ready["status"], "ready", "the daemon itself keeps serving");
    // Unhealthy is reported once the channel has given up: only a settings change starts it
    // again, so the count is final.
    assert_eq!(
        fake.token_requests(),
        1,
        "no retry loop on refused credentials"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_at_all_tag_the_model_writes_does_not_ping_the_group() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path()).await;
    model.push(Reply::text(
        "<at id=all></at> standup now, <at user_id=\"all\">all</at>",
    ));
    let asked = fake.user_says_in_group(GROUP, ALICE, "tell everyone", true, None);
    answered(&fake, &asked).await;
    assert_eq!(
        fake.chat_texts(GROUP),
        ["<\u{200B}at id=all></at> standup now, <\u{200B}at user_id=\"all\">all</at>"]
    );
    for call in fake.calls() {
        let sent = call.body.to_string();
        assert!(!sent.contains("<at "), "{}: {sent}", call.method);
    }
    bot.stop().await;
}
