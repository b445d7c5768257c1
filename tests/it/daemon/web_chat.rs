//! The web chat page at `/` and the API it rebuilds a conversation from after a reload.

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::{Daemon, Setup, TOKEN_A, TOKEN_B};

fn messages(state: &Value) -> Vec<Value> {
    state["values"]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// What the page renders from `/state`: `(kind, text)` per visible message, by the same rules
/// as its script (hidden messages and harness-authored human notes skipped).
fn visible(state: &Value) -> Vec<(String, String)> {
    let mut shown = Vec::new();
    for message in messages(state) {
        if message["meta"]["hide_from_ui"] == true {
            continue;
        }
        let content = message["content"].as_str().unwrap_or_default().to_owned();
        match message["type"].as_str() {
            Some("human") if message.get("name").is_none() => shown.push(("human".into(), content)),
            Some("ai") => {
                if !content.is_empty() {
                    shown.push(("ai".into(), content));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    shown.push(("tool".into(), call["name"].as_str().unwrap().to_owned()));
                }
            }
            Some("tool") if message["name"] == "ask_clarification" => {
                shown.push(("ai".into(), content))
            }
            _ => {}
        }
    }
    shown
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_page_finds_the_conversation_in_the_state_api() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::chunks(["Hello ", "there."]))
        .push(Reply::tool_call(
            "ask_clarification",
            json!({"question": "PDF or Markdown?", "clarification_type": "approach_choice", "options": ["PDF", "Markdown"]}),
        ));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();

    // The page names its own thread id and streams into it without creating it first.
    let thread = "web-0123456789abcdef0123";
    let events = daemon.stream_run(TOKEN_A, thread, "hi").await;
    assert_eq!(events.last().map(|(name, _)| name.as_str()), Some("end"));
    let events = daemon
        .stream_run(TOKEN_A, thread, "write me a report")
        .await;
    assert_eq!(events.last().map(|(name, _)| name.as_str()), Some("end"));

    let state = daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    // The run ended on a question: the thread waits for the answer.
    assert_eq!(state["status"], "interrupted");
    let shown = visible(&state);
    let expected: Vec<(String, String)> = [
        ("human", "hi"),
        ("ai", "Hello there."),
        ("human", "write me a report"),
        ("tool", "ask_clarification"),
        ("ai", "🔀 PDF or Markdown?\n\n  1. PDF\n  2. Markdown"),
    ]
    .into_iter()
    .map(|(kind, text)| (kind.to_owned(), text.to_owned()))
    .collect();
    assert_eq!(shown, expected);
    // Nothing the harness injected for the model is shown as a person's message.
    for message in messages(&state) {
        if message["type"] == "human" && message["meta"]["hide_from_ui"] != true {
            assert!(message.get("name").is_none(), "{message}");
        }
    }

    // A thread that is gone (or another user's) is a JSON 404: the page starts afresh.
    for (path, token) in [
        ("/api/threads/web-never-used/state".to_owned(), TOKEN_A),
        (format!("/api/threads/{thread}/state"), TOKEN_B),
    ] {
        let response = daemon.get(&path, token).send().await.unwrap();
        Daemon::expect_error(response, 404, "thread_not_found", &["POST /api/threads"]).await;
    }
    let deleted = daemon
        .delete(&format!("/api/threads/{thread}"), TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    let response = daemon
        .get(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .send()
        .await
        .unwrap();
    Daemon::expect_error(response, 404, "thread_not_found", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_assets_come_from_the_binary_with_a_strict_policy() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let page = daemon.http.get(daemon.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let header = |response: &reqwest::Response, name: &str| {
        response.headers()[name].to_str().unwrap().to_owned()
    };
    let csp = header(&page, "content-security-policy");
    for needle in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
    ] {
        assert!(csp.contains(needle), "{needle:?} missing from {csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(header(&page, "cache-control"), "no-cache");
    let html = page.text().await.unwrap();
    // No third-party scripts or styles, nothing inline.
    for external in [
        "http://", "https://", "src=\"//", "<style", "<script>", "style=",
    ] {
        assert!(!html.contains(external), "{external:?} in the page");
    }
    let entry = html
        .split('"')
        .find(|part| part.starts_with("/assets/") && part.ends_with("/js/app.js"))
        .expect("the entry module")
        .to_owned();

    // Versioned assets are cached for good; the modules read /state and know the lock.
    let script = daemon.http.get(daemon.url(&entry)).send().await.unwrap();
    assert_eq!(script.status(), 200);
    assert!(header(&script, "cache-control").contains("immutable"));
    assert!(header(&script, "content-type").starts_with("text/javascript"));
    let chat = daemon
        .http
        .get(daemon.url(&entry.replace("app.js", "chat.js")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(chat.contains("/state") && chat.contains("hide_from_ui"));
    let stale = daemon
        .http
        .get(daemon.url("/assets/000000000000/js/app.js"))
        .send()
        .await
        .unwrap();
    Daemon::expect_error(stale, 404, "not_found", &["reload"]).await;
    for (path, kind) in [
        ("/favicon.ico", "image/x-icon"),
        ("/favicon.svg", "image/svg+xml"),
    ] {
        let icon = daemon.http.get(daemon.url(path)).send().await.unwrap();
        assert_eq!(icon.status(), 200, "{path}");
        assert_eq!(header(&icon, "content-type"), kind);
    }
}
