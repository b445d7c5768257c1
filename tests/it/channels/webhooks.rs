//! The webhook channel end to end (`POST /hooks/{endpoint}`): signed deliveries answered once
//! in the fake Slack channel, redeliveries, refusals, GitHub's signature, `per_key`
//! conversations, `thread_only` runs read over the API, and deliveries a stop left undone.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Instant;

use antler_test_support::{
    FakeOpenAi, FakeSlack, PostedMessage, Reply, antler_headers, github_signature,
};
use serde_json::{Value, json};

use super::slack_driver::slack_section;
use super::{Bot, WAIT, daemon_yaml};

const SECRET: &str = "s3cret-for-alerts";
const ALERTS_CHANNEL: &str = "C0000888";
const SLACK_THREAD: &str = "1765000000.000100";
const BOB_TOKEN: &str = "bob-token-0123456789abcdef";

fn config(dir: &Path, fake: &FakeSlack, model: &FakeOpenAi) -> String {
    let webhook = format!(
        "  webhook:\n    endpoints:\n\
         \x20     alerts:\n        secret: {SECRET}\n        user: alice\n\
         \x20       prompt: 'Alert {{{{body.alerts.0.labels.alertname}}}} fired: {{{{body}}}}'\n\
         \x20       deliver_to: {{channel: slack, chat: {ALERTS_CHANNEL}, thread: '{SLACK_THREAD}'}}\n\
         \x20       conversation: per_key\n        key: '{{{{body.alerts.0.fingerprint}}}}'\n\
         \x20       max_body_kb: 2\n\
         \x20     github:\n        secret: {SECRET}\n        signature: github\n        user: bob\n\
         \x20       prompt: 'Review pull request {{{{body.pull_request.title}}}}'\n"
    );
    let yaml = daemon_yaml(dir, model, &format!("{}{webhook}", slack_section(fake, "")));
    yaml.replace(
        "  shutdown_grace_seconds: 0\n",
        &format!(
            "  shutdown_grace_seconds: 0\n  api_tokens:\n    - token: {BOB_TOKEN}\n      user: bob\n"
        ),
    )
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn alert(fingerprint: &str, status: &str) -> Vec<u8> {
    json!({
        "status": status,
        "alerts": [{"labels": {"alertname": "DiskFull"}, "fingerprint": fingerprint}]
    })
    .to_string()
    .into_bytes()
}

async fn post(
    addr: SocketAddr,
    endpoint: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut request = client
        .post(format!("http://{addr}/hooks/{endpoint}"))
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.expect("webhook request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("webhook answer");
    let value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, value)
}

async fn deliver(addr: SocketAddr, delivery: &str, body: Vec<u8>) -> (u16, Value) {
    let headers = antler_headers(SECRET, now(), delivery, &body);
    post(addr, "alerts", &headers, body).await
}

fn in_alerts(fake: &FakeSlack) -> Vec<PostedMessage> {
    fake.messages()
        .into_iter()
        .filter(|m| m.channel == ALERTS_CHANNEL && m.ephemeral_to.is_none())
        .collect()
}

async fn answered(fake: &FakeSlack, what: &str) {
    fake.wait_for(WAIT, what, |f| {
        in_alerts(f).iter().any(|m| m.text.contains(what))
    })
    .await;
}

/// The thread's messages as `bob` reads them over the API, once its last is an answer.
async fn answered_thread(addr: SocketAddr, thread_id: &str) -> Vec<Value> {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + WAIT;
    loop {
        let response = client
            .get(format!("http://{addr}/api/threads/{thread_id}/state"))
            .bearer_auth(BOB_TOKEN)
            .send()
            .await
            .expect("state request");
        if response.status().is_success() {
            let state: Value = response.json().await.expect("state JSON");
            let messages = state["values"]["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let last_is_answer = messages
                .last()
                .is_some_and(|m| m["type"] == "ai" && m["content"] != "");
            if last_is_answer {
                return messages;
            }
        }
        assert!(Instant::now() < deadline, "no answer in thread {thread_id}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_delivery_is_answered_once_in_slack_and_its_key_continues_the_thread() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = Bot::start(&config(dir.path(), &fake, &model)).await;
    model.push(Reply::text("Disk is full on db1."));
    let body = alert("fp-1", "firing");
    let (status, first) = deliver(bot.addr, "d-1", body.clone()).await;
    assert_eq!(status, 202, "{first}");
    let (run_id, thread_id) = (first["run_id"].clone(), first["thread_id"].clone());
    assert!(run_id.is_string() && thread_id.is_string(), "{first}");
    answered(&fake, "Disk is full on db1.").await;
    // Redelivered (signed again, later): the same run.
    let (status, again) = deliver(bot.addr, "d-1", body).await;
    assert_eq!((status, &again), (202, &first));
    // The same fingerprint resolving: the same conversation, answered after the first.
    model.push(Reply::text("Resolved; it was the log volume."));
    let (status, second) = deliver(bot.addr, "d-2", alert("fp-1", "resolved")).await;
    assert_eq!(status, 202, "{second}");
    assert_eq!(
        second["thread_id"], thread_id,
        "per_key continues the thread"
    );
    assert_ne!(second["run_id"], run_id);
    answered(&fake, "Resolved; it was the log volume.").await;
    let posted = in_alerts(&fake);
    assert_eq!(posted.len(), 2, "one message per delivery: {posted:?}");
    assert!(posted[0].text.starts_with("🪝 alerts"), "{posted:?}");
    assert!(
        posted
            .iter()
            .all(|m| m.thread_ts.as_deref() == Some(SLACK_THREAD)),
        "answers go into the configured thread: {posted:?}"
    );
    let requests = model.requests();
    assert_eq!(
        requests.len(),
        2,
        "one model call per delivery, none for the redelivery"
    );
    let first_request = requests[0].to_string();
    let marker = "<untrusted source=\\\"webhook\\\"";
    assert!(first_request.contains(marker), "{first_request}");
    // Every payload value sits inside a marker: outside them only the prompt's own words.
    let outside: String = first_request
        .split(marker)
        .map(|part| part.split("</untrusted>").last().unwrap_or(""))
        .collect();
    assert!(
        !outside.contains("DiskFull") && !outside.contains("fp-1"),
        "{outside}"
    );
    let second_request = requests[1].to_string();
    assert!(
        second_request.contains("Disk is full on db1.") && second_request.contains("resolved"),
        "the follow-up holds the first exchange: {second_request}"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_stale_oversized_and_unknown_deliveries_are_refused_with_json_errors() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = Bot::start(&config(dir.path(), &fake, &model)).await;
    let body = alert("fp-9", "firing");
    let forged = antler_headers("wrong secret", now(), "x-1", &body);
    let stale = antler_headers(SECRET, now() - 600, "x-2", &body);
    let big = vec![b' '; 3 * 1024];
    let big_headers = antler_headers(SECRET, now(), "x-3", &big);
    let not_json = b"status=firing".to_vec();
    let not_json_headers = antler_headers(SECRET, now(), "x-4", &not_json);
    let unsigned = vec![("content-type", "application/json".to_string())];
    let cases = [
        ("alerts", forged, body.clone(), 401, "does not match"),
        ("alerts", stale, body.clone(), 401, "5 minutes"),
        ("alerts", unsigned, body.clone(), 401, "X-Antler-Signature"),
        ("alerts", big_headers, big, 413, "max_body_kb"),
        ("alerts", not_json_headers, not_json, 400, "not JSON"),
        (
            "nowhere",
            Vec::new(),
            body.clone(),
            404,
            "channels.webhook.endpoints",
        ),
    ];
    for (endpoint, headers, body, expected, says) in cases {
        let (status, error) = post(bot.addr, endpoint, &headers, body).await;
        assert_eq!(status, expected, "{endpoint}: {error}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(error["error"]["code"].is_string(), "{error}");
        assert!(message.contains(says), "{expected}: {message}");
        assert!(!message.contains(SECRET), "never the secret: {message}");
    }
    let metrics = reqwest::get(format!("http://{}/metrics", bot.addr))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    for outcome in ["unauthorized", "too_large", "invalid", "accepted"] {
        let series =
            format!("antler_webhook_deliveries_total{{endpoint=\"alerts\",outcome=\"{outcome}\"}}");
        assert!(metrics.contains(&series), "{series}");
    }
    assert!(model.requests().is_empty() && in_alerts(&fake).is_empty());
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_github_delivery_runs_in_its_thread_for_the_endpoints_user() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = Bot::start(&config(dir.path(), &fake, &model)).await;
    model.push(Reply::text("Looks good; one nit in main.rs."));
    let body = json!({"action": "opened", "pull_request": {"title": "Add webhooks"}})
        .to_string()
        .into_bytes();
    let headers = vec![
        ("content-type", "application/json".to_string()),
        ("x-github-event", "pull_request".to_string()),
        (
            "x-github-delivery",
            "72d3162e-cc78-11e3-81ab-4c9367dc0958".to_string(),
        ),
        ("x-hub-signature-256", github_signature(SECRET, &body)),
    ];
    let (status, accepted) = post(bot.addr, "github", &headers, body.clone()).await;
    assert_eq!(status, 202, "{accepted}");
    let thread_id = accepted["thread_id"]
        .as_str()
        .expect("thread id")
        .to_string();
    let messages = answered_thread(bot.addr, &thread_id).await;
    assert_eq!(
        messages.last().map(|m| m["content"].clone()),
        Some(json!("Looks good; one nit in main.rs."))
    );
    let (status, again) = post(bot.addr, "github", &headers, body.clone()).await;
    assert_eq!(
        (status, &again),
        (202, &accepted),
        "X-GitHub-Delivery names it"
    );
    // Signed the Antler way, a GitHub endpoint refuses it.
    let antler = antler_headers(SECRET, now(), "other", &body);
    assert_eq!(post(bot.addr, "github", &antler, body).await.0, 401);
    let threads: Value = reqwest::Client::new()
        .get(format!("http://{}/api/threads", bot.addr))
        .bearer_auth(BOB_TOKEN)
        .send()
        .await
        .expect("threads")
        .json()
        .await
        .expect("threads JSON");
    assert!(threads.to_string().contains(&thread_id), "{threads}");
    assert_eq!(model.requests().len(), 1);
    assert!(in_alerts(&fake).is_empty(), "thread_only posts nowhere");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_a_stop_left_undone_run_at_the_next_start() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = config(dir.path(), &fake, &model);
    // Recorded by a daemon that stopped before their runs started.
    {
        let loaded = antler::config::load_from_str(
            &yaml,
            antler::config::ConfigOrigin::Embedded,
            &antler::config::MapEnv::new(),
            Path::new("/"),
        )
        .expect("config");
        let store = antler::storage::open_store(&loaded.config).expect("store");
        let deliveries = antler::hooks::store::DeliveryStore::new(store.clone());
        let prompt =
            antler::hooks::request::render_prompt("alerts", "Look: {{body}}", &json!({"a": 1}));
        for (id, chat) in [
            (
                "left-chat",
                Some(antler::hooks::store::ChatTarget {
                    channel: "slack".into(),
                    chat: ALERTS_CHANNEL.into(),
                    thread: None,
                }),
            ),
            ("left-thread", None),
        ] {
            let endpoint = if chat.is_some() { "alerts" } else { "github" };
            let user = if chat.is_some() { "alice" } else { "bob" };
            let delivery = antler::hooks::store::Delivery {
                endpoint: endpoint.into(),
                delivery_id: id.into(),
                run_id: format!("run-{id}"),
                thread_id: format!("thread-{id}"),
                user: user.into(),
                agent: None,
                prompt: prompt.clone(),
                chat,
                status: antler::hooks::store::DeliveryStatus::Received,
                received_at: chrono::Utc::now(),
                detail: None,
            };
            deliveries.insert(&delivery).expect("recorded");
        }
        store.flush().expect("flush");
    }
    model.push(Reply::text("answer one"));
    model.push(Reply::text("answer two"));
    let bot = Bot::start(&yaml).await;
    answered(&fake, "🪝 alerts").await;
    let messages = answered_thread(bot.addr, "thread-left-thread").await;
    assert!(messages.last().is_some_and(|m| {
        m["content"]
            .as_str()
            .is_some_and(|t| t.starts_with("answer"))
    }));
    fake.wait_for(WAIT, "the chat answer", |f| {
        in_alerts(f)
            .iter()
            .any(|m| m.text.contains("answer") && !m.text.contains("Working"))
    })
    .await;
    assert_eq!(in_alerts(&fake).len(), 1);
    assert_eq!(model.requests().len(), 2);
    bot.stop().await;
}
