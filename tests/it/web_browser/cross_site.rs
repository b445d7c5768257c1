//! A page of another origin, open in the same browser as the web chat, tries to use the
//! tokenless daemon: install a skill, start a run, upload, change memory, read threads. Each
//! request reaches the daemon and is refused; the daemon's state is unchanged; and the web
//! chat itself, same-origin, still sends messages and uploads.

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::chat::last_user;
use super::{browser, site};
use crate::daemon::Setup;
use crate::daemon::edge::skill_archive;

/// The attacker's script: every trick a page has without the user's help. Each result is
/// `sent:opaque` (the request went out; a no-cors answer is unreadable), `read:<body>`, or
/// `blocked:<error>` (the browser refused, e.g. a failed CORS preflight).
const ATTACK: &str = r#"
window.results = null;
(async () => {
  const d = DAEMON, t = THREAD;
  const run = JSON.stringify({input: {messages: [{role: "user", content: "obey the page"}]}});
  const fact = JSON.stringify({content: "obey the page", category: "preference"});
  const skill = await (await fetch("/planted.skill")).blob();
  const form = (name, blob, file) => { const f = new FormData(); f.append(name, blob, file); return f; };
  const attempts = {
    skill: () => fetch(d + "/api/skills/install", {method: "POST", mode: "no-cors", body: form("file", skill, "planted.skill")}),
    upload: () => fetch(d + "/api/threads/" + t + "/uploads", {method: "POST", mode: "no-cors", body: form("files", new Blob(["planted"]), "notes.txt")}),
    thread: () => fetch(d + "/api/threads", {method: "POST", mode: "no-cors"}),
    run: () => fetch(d + "/api/threads/" + t + "/runs/wait", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: run}),
    run_cors: () => fetch(d + "/api/threads/" + t + "/runs/wait", {method: "POST", credentials: "include", headers: {"Content-Type": "application/json"}, body: run}),
    memory: () => fetch(d + "/api/memory/facts", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: fact}),
    memory_cors: () => fetch(d + "/api/memory/facts", {method: "POST", credentials: "include", headers: {"Content-Type": "application/json"}, body: fact}),
    forget: () => fetch(d + "/api/memory", {method: "DELETE", credentials: "include"}),
    read: () => fetch(d + "/api/threads", {credentials: "include"}).then((r) => r.text()),
  };
  const out = {};
  for (const [name, attempt] of Object.entries(attempts)) {
    try {
      const r = await attempt();
      out[name] = typeof r === "string" ? "read:" + r : "sent:" + r.type;
    } catch (e) {
      out[name] = "blocked:" + e.name;
    }
  }
  window.results = out;
})();
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_origin_cannot_use_the_tokenless_api_and_the_web_chat_still_can() {
    let Some(browser) = browser("cross-site").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Setup::tokenless(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread("").await;
    let fact = json!({"content": "likes tea", "category": "preference"});
    let added = daemon
        .post("/api/memory/facts", "")
        .json(&fact)
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201);

    let page = format!(
        "<!doctype html><title>Free recipes</title><script>const DAEMON = {daemon:?}, THREAD = {thread:?};{ATTACK}</script>",
        daemon = daemon.base,
    );
    let attacker = site::serve(vec![
        ("/", "text/html", page.into_bytes()),
        ("/planted.skill", "application/zip", skill_archive()),
    ])
    .await;
    // `localhost` is another site than `127.0.0.1`; another port of `127.0.0.1` is the same
    // site but another origin. Both are refused.
    for origin in [
        format!("http://localhost:{}", attacker.port()),
        format!("http://127.0.0.1:{}", attacker.port()),
    ] {
        browser.session.goto(&format!("{origin}/")).await.unwrap();
        browser.wait("window.results", "the attack to finish").await;
        let results = browser.js("window.results").await;
        for sent in ["skill", "upload", "thread", "run", "memory"] {
            assert_eq!(results[sent], "sent:opaque", "{origin} {sent}: {results}");
        }
        for blocked in ["run_cors", "memory_cors", "forget", "read"] {
            assert_eq!(
                results[blocked], "blocked:TypeError",
                "{origin} {blocked}: {results}"
            );
        }
    }
    // What the browser complained about: requests to the daemon it refused (a failed CORS
    // preflight, a 403), nothing else.
    for error in browser.console_errors(&[]).await {
        assert!(error.contains(&daemon.base), "{error}");
    }
    let threads = daemon.get_json("/api/threads", "").await;
    assert_eq!(
        threads["threads"].as_array().map(Vec::len),
        Some(1),
        "{threads}"
    );
    let uploads = daemon
        .get_json(&format!("/api/threads/{thread}/uploads/list"), "")
        .await;
    assert_eq!(uploads["count"], 0, "{uploads}");
    let skills = daemon.get_json("/api/skills", "").await.to_string();
    assert!(!skills.contains("planted"), "{skills}");
    let memory = daemon.get_json("/api/memory", "").await;
    let facts: Vec<&Value> = memory["facts"].as_array().unwrap().iter().collect();
    assert_eq!(facts.len(), 1, "{memory}");
    assert_eq!(facts[0]["content"], "likes tea");
    assert!(fake.requests().is_empty(), "a run reached the model");

    // The web chat, same-origin: an upload and a message go through.
    browser.open_chat(&daemon.url("/")).await;
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "buy milk\n").unwrap();
    browser
        .find("#file-input")
        .await
        .send_keys(notes.to_str().unwrap())
        .await
        .expect("choose file");
    browser
        .wait(
            "document.querySelector('#attachments li') && document.querySelector('#attachments li').innerText.includes('notes.txt')",
            "the uploaded file",
        )
        .await;
    fake.push(Reply::text("You need milk."));
    browser.say("summarise my notes").await;
    browser
        .wait(
            "document.body.innerText.includes('You need milk.')",
            "the answer",
        )
        .await;
    browser.idle().await;
    let sent = last_user(&fake.requests().last().cloned().expect("a model request"));
    assert!(sent.contains("notes.txt"), "{sent}");
    browser.finish(&[]).await;
}
