//! Feishu with an Encrypt Key against a padding-oracle attacker: every refused push, signed or
//! not, gets one byte-identical answer, only the URL verification may go unsigned, and the
//! refusals are logged once a minute with a count instead of a line each.

use std::time::{Duration, Instant};

use antler_test_support::{
    FAKE_FEISHU_VERIFICATION_TOKEN, FakeFeishu, FakeOpenAi, FeishuEventSender, FeishuSigning,
    Reply, bad_padding_body, encrypt_feishu_event, p2p_chat, url_verification,
};
use serde_json::{Value, json};

use super::feishu_driver::{feishu_section, webhook_url};
use super::{Bot, WAIT, daemon_yaml};
use crate::daemon::Daemon;

/// A message push as Feishu makes it (schema 2.0), with `token`.
fn message_push(token: &str, id: &str) -> Value {
    json!({"schema": "2.0", "header": {"event_id": format!("ev_{id}"),
        "event_type": "im.message.receive_v1", "create_time": "1700000000000", "token": token,
        "app_id": "cli_x", "tenant_key": "tk"},
        "event": {"sender": {"sender_id": {"open_id": "ou_mallory"}, "sender_type": "user"},
            "message": {"message_id": format!("om_{id}"), "chat_id": "oc_p2p_mallory",
                "chat_type": "p2p", "message_type": "text", "content": "{\"text\":\"hi\"}"}}})
}

/// Every kind of refused push an attacker (or a broken proxy) could post: `(case, body, signing)`.
fn refused_pushes(
    sender: &FeishuEventSender,
    key: &str,
) -> Vec<(&'static str, String, FeishuSigning)> {
    let challenge = url_verification("c", FAKE_FEISHU_VERIFICATION_TOKEN).to_string();
    let bad_padding = bad_padding_body(key, &challenge);
    let bad_json =
        json!({"encrypt": encrypt_feishu_event(key, "not json, but padded well", "j")}).to_string();
    let event = sender.body(&message_push(FAKE_FEISHU_VERIFICATION_TOKEN, "1"), "e");
    let wrong_token_challenge = sender.body(&url_verification("c", "guess"), "w");
    let wrong_token_event = sender.body(&message_push("guess", "2"), "t");
    vec![
        (
            "unsigned, bad padding",
            bad_padding.clone(),
            FeishuSigning::Missing,
        ),
        (
            "unsigned, bad JSON",
            bad_json.clone(),
            FeishuSigning::Missing,
        ),
        (
            "unsigned, a valid event",
            event.clone(),
            FeishuSigning::Missing,
        ),
        (
            "unsigned, challenge with a wrong token",
            wrong_token_challenge,
            FeishuSigning::Missing,
        ),
        (
            "unsigned, not base64",
            json!({"encrypt": "%%"}).to_string(),
            FeishuSigning::Missing,
        ),
        (
            "unsigned, not JSON at all",
            "garbage".into(),
            FeishuSigning::Missing,
        ),
        ("signed, bad padding", bad_padding, FeishuSigning::Valid),
        ("signed, bad JSON", bad_json, FeishuSigning::Valid),
        (
            "signed, wrong token",
            wrong_token_event,
            FeishuSigning::Valid,
        ),
        ("signed, plain body", "{}".into(), FeishuSigning::Valid),
        ("forged signature", event.clone(), FeishuSigning::Forged),
        (
            "stale signature",
            event,
            FeishuSigning::Stale(Duration::from_secs(600)),
        ),
    ]
}

/// Waits until `/readyz` (as `readyz` fetches it) shows the Feishu channel running.
async fn wait_running(readyz: impl AsyncFn() -> Value) {
    let deadline = Instant::now() + WAIT;
    loop {
        let ready = readyz().await;
        if ready["channels"]["feishu"]["state"] == "running" {
            return;
        }
        assert!(Instant::now() < deadline, "feishu never ran: {ready}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_push_gets_one_identical_answer_and_the_unsigned_url_check_still_works() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let key = fake.encrypt_key().expect("an encrypt key");
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = Bot::start(&daemon_yaml(dir.path(), &model, &feishu_section(&fake, ""))).await;
    fake.set_webhook(webhook_url(bot.addr));
    wait_running(async || bot.readyz().await).await;
    let sender = fake.sender();

    let mut answers = Vec::new();
    for (case, body, signing) in refused_pushes(&sender, &key) {
        answers.push((case, sender.post(&body, signing).await));
    }
    let (first_case, first) = &answers[0];
    assert_eq!(first.0, 400, "{first_case}: {}", first.1);
    let error: Value = serde_json::from_str(&first.1).expect("a JSON error");
    assert_eq!(error["error"]["code"], "webhook_refused", "{error}");
    for (case, answer) in &answers {
        assert_eq!(answer, first, "{case} is answered like {first_case}");
    }

    let challenge = url_verification("ajls384kdjx98XX", FAKE_FEISHU_VERIFICATION_TOKEN);
    let (status, answer) = sender
        .post(&sender.body(&challenge, "ok"), FeishuSigning::Missing)
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        serde_json::from_str::<Value>(&answer).expect("json"),
        json!({"challenge": "ajls384kdjx98XX"})
    );
    // The refused events were for Mallory's chat, whose messages are handled in order: once
    // a genuine one is answered, a refused one that got through would have been answered first.
    model.push(Reply::text("hello, Mallory"));
    fake.user_says_p2p("ou_mallory", "hello");
    fake.wait_for(WAIT, "the genuine message's answer", |f| {
        f.chat_texts(&p2p_chat("ou_mallory"))
            .contains(&"hello, Mallory".to_string())
    })
    .await;
    assert_eq!(
        model.requests().len(),
        1,
        "nothing refused reached the agent"
    );
    bot.stop().await;
}

/// Lines of the daemon's log that report refused deliveries.
fn refusal_lines(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains("Refused webhook deliveries"))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_pushes_are_logged_once_a_minute_with_their_count() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    let key = fake.encrypt_key().expect("an encrypt key");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        daemon_yaml(dir.path(), &model, &feishu_section(&fake, "")),
    )
    .expect("config");
    let log = dir.path().join("daemon.log");
    let mut daemon = Daemon::spawn(&config, &[("RUST_LOG", "info")], Some(&log));
    fake.set_webhook(daemon.url("/channels/feishu/webhook"));
    let http = daemon.http.clone();
    let readyz = daemon.url("/readyz");
    wait_running(async || {
        let response = http.get(&readyz).send().await.expect("readyz");
        response.json().await.expect("readyz json")
    })
    .await;
    let sender = fake.sender();

    let pushes = refused_pushes(&sender, &key);
    let rounds = 4;
    for _ in 0..rounds {
        for (_, body, signing) in &pushes {
            let (status, _) = sender.post(body, *signing).await;
            assert_eq!(status, 400);
        }
    }
    let lines = refusal_lines(&log);
    assert_eq!(lines.len(), 1, "one line for the first refusal: {lines:#?}");
    assert!(lines[0].contains("refused=1"), "{}", lines[0]);
    assert!(
        !lines[0].contains(&key),
        "no secret in the log: {}",
        lines[0]
    );

    // The rest are counted, and the count is not lost when the daemon stops.
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)), Some(0));
    let lines = refusal_lines(&log);
    let rest = pushes.len() * rounds - 1;
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[1].contains(&format!("refused={rest}")),
        "{}",
        lines[1]
    );
}
