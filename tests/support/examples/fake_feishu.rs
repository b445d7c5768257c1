//! Runs the real daemon binary against the fake Feishu and a scripted model, the way a person
//! would try the Feishu adapter: `cargo run -p antler-test-support --example fake_feishu --
//! <path to antler> <work dir>`. Writes `<work dir>/config.yaml`, starts `antler run`, checks
//! the Request URL like Feishu does, sends a p2p message, a group mention with a reply in its
//! topic, a file, and a forged push, and prints what the bot did.

// A tool run by hand: it prints its figures, fails loudly on a broken set-up, and its tasks
// live as long as its runtime.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::time::Duration;

use antler_test_support::{
    FAKE_FEISHU_APP_ID, FAKE_FEISHU_APP_SECRET, FAKE_FEISHU_ENCRYPT_KEY,
    FAKE_FEISHU_VERIFICATION_TOKEN, FakeFeishu, FakeOpenAi, FeishuSigning, Reply, free_port,
    p2p_chat, start_example_daemon, url_verification,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(binary), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: fake_feishu <path to antler> <work dir>");
        std::process::exit(64);
    };
    let feishu = FakeFeishu::start().await;
    let model = FakeOpenAi::start().await;
    model.push(Reply::text(
        "# Hello!\nHere is a list:\n- one & two\n- `a < b`\n\nSee [the docs](https://example.com/a_b).",
    ));
    model.push(Reply::slow(
        ["Topics ", "work ", "too."],
        Duration::from_millis(700),
    ));
    model.push(Reply::text("Still the walnut topic."));
    model.push(Reply::text("Your notes say: meeting at noon."));
    let port = free_port();
    let dir = std::path::Path::new(&dir);
    let channels = format!(
        "  feishu:\n    enabled: true\n    app_id: {FAKE_FEISHU_APP_ID}\n    app_secret: \"{FAKE_FEISHU_APP_SECRET}\"\n    verification_token: \"{FAKE_FEISHU_VERIFICATION_TOKEN}\"\n    encrypt_key: \"{FAKE_FEISHU_ENCRYPT_KEY}\"\n    domain: {base}\n    allowed_chats: [oc_group0042]\n",
        base = feishu.base_url(),
    );
    let mut daemon = start_example_daemon(
        &binary,
        dir,
        &model,
        &format!("127.0.0.1:{port}"),
        &channels,
    );
    feishu.set_webhook(format!("http://127.0.0.1:{port}/channels/feishu/webhook"));
    wait_running(port).await;

    let sender = feishu.sender();
    let check = url_verification("ajls384kdjx98XX", FAKE_FEISHU_VERIFICATION_TOKEN);
    let started = std::time::Instant::now();
    let answer = sender
        .post(&sender.body(&check, "check"), FeishuSigning::Missing)
        .await;
    println!(
        "url verification (encrypted): {answer:?} in {:?}",
        started.elapsed()
    );

    let alice = "ou_alice0001";
    let asked = feishu.user_says_p2p(alice, "hi there");
    feishu
        .wait_for(WAIT, "the p2p answer", |f| {
            f.chat_texts(&p2p_chat(alice))
                .iter()
                .any(|t| t.contains("Hello"))
        })
        .await;
    let root = feishu.user_says_in_group("oc_group0042", alice, "and in a group?", true, None);
    feishu
        .wait_for(WAIT, "the group answer", |f| {
            f.chat_texts("oc_group0042")
                .iter()
                .any(|t| t == "Topics work too.")
        })
        .await;
    let card = feishu.bot_messages("oc_group0042")[0].message_id.clone();
    feishu.user_says_in_group(
        "oc_group0042",
        "ou_bob0002",
        "still there?",
        false,
        Some(&card),
    );
    feishu
        .wait_for(WAIT, "the topic follow-up", |f| {
            f.chat_texts("oc_group0042").len() == 2
        })
        .await;
    feishu.user_sends_file(
        &p2p_chat(alice),
        "p2p",
        alice,
        "notes.txt",
        b"meeting at noon",
        Some("what do my notes say?"),
    );
    feishu
        .wait_for(WAIT, "the file answer", |f| {
            f.chat_texts(&p2p_chat(alice))
                .iter()
                .any(|t| t.contains("noon"))
        })
        .await;
    let forged = json!({"schema": "2.0", "header": {"event_id": "forged", "event_type": "im.message.receive_v1", "token": FAKE_FEISHU_VERIFICATION_TOKEN}, "event": {}});
    println!(
        "forged push: {:?}",
        sender
            .post(&sender.body(&forged, "forged"), FeishuSigning::Forged)
            .await
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    println!("question {asked}, topic root {root}");
    for message in feishu.messages() {
        println!(
            "{} {} in {} (root {:?}, parent {:?}, {} updates): {:?}",
            if message.from_bot { "BOT " } else { "USER" },
            message.msg_type,
            message.chat_id,
            message.root_id,
            message.parent_id,
            message.updates,
            message.text()
        );
    }
    for call in feishu.calls() {
        println!("{} {:?} {}", call.method, call.chat, call.body);
    }
    println!("reactions: {:?}", feishu.reactions());
    println!("model requests: {}", model.requests().len());
    let _ = daemon.kill().await;
}

async fn wait_running(port: u16) {
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let ready = http
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await;
        if let Ok(response) = ready
            && let Ok(text) = response.text().await
            && let Ok(body) = serde_json::from_str::<serde_json::Value>(&text)
            && body["channels"]["feishu"]["state"] == "running"
        {
            println!("readyz: {body}");
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon never became ready; see antler.log"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
