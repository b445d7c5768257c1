//! One conversation in the browser: Markdown rendered and sanitized, tool steps before the
//! answer, presented files as cards (type, size, download) with images and SVGs shown as
//! pictures, a clarification answered by a button, the same conversation after a reload, and
//! the page at phone width with its drawer.

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::{Tokenless, browser};

const CHART: &[u8] = include_bytes!("chart.png");
/// An SVG with a script that would change the page's title if it ever ran as a document.
const DIAGRAM: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" width="120" height="60" viewBox="0 0 120 60"><script>parent.document.title = "svg ran"; document.title = "svg ran";</script><rect width="120" height="60" rx="8" fill="#2f6f4f"/><circle cx="30" cy="30" r="14" fill="#fff"/></svg>"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_renders_markdown_steps_files_and_survives_a_reload() {
    let Some(browser) = browser("conversation").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::new(&fake.base_url());
    let daemon = setup.start();
    browser
        .session
        .goto(&daemon.url("/"))
        .await
        .expect("open page");
    browser
        .wait(
            "document.querySelector('#model option') && document.querySelector('#model option').text.includes('fake-model') && document.querySelector('.note')",
            "models and the welcome note",
        )
        .await;

    // Markdown, with an attack in the middle of it.
    fake.push(Reply::chunks([
        "Here is a **bold** plan.\n\n```sh\necho hi\n",
        "```\n\nAnd <img src=x onerror=alert(1)> done.",
    ]));
    browser.say("hello").await;
    browser
        .wait(
            "document.querySelector('.answer strong') && document.querySelector('.answer pre')",
            "the rendered Markdown",
        )
        .await;
    browser.idle().await;
    let answer = browser
        .js("document.querySelector('.answer').innerText")
        .await;
    let answer = answer.as_str().unwrap();
    assert!(!answer.contains("**"), "raw Markdown shown: {answer}");
    assert!(
        answer.contains("echo hi") && answer.contains("done."),
        "{answer}"
    );
    assert_eq!(
        browser
            .js("document.querySelectorAll('img[onerror], img[src=x]').length")
            .await,
        0
    );
    assert!(
        browser.session.alert_text().await.is_err(),
        "an alert opened"
    );
    assert_eq!(
        browser
            .js("document.querySelectorAll('.code-block .copy').length")
            .await,
        1
    );
    browser.screenshot("01-markdown").await;

    // A tool-using run that presents a document and an image.
    let thread = browser.js("localStorage.getItem('antler.thread')").await;
    let thread = thread.as_str().expect("thread id").to_owned();
    std::fs::create_dir_all(setup.outputs(&thread)).unwrap();
    std::fs::write(setup.outputs(&thread).join("chart.png"), CHART).unwrap();
    std::fs::write(setup.outputs(&thread).join("diagram.svg"), DIAGRAM).unwrap();
    fake.push(Reply::tool_call(
        "write_file",
        json!({"path": "/mnt/user-data/outputs/report.md", "content": "# Report\n\nAll good.\n"}),
    ))
    .push(Reply::tool_call(
        "present_files",
        json!({"filepaths": ["/mnt/user-data/outputs/report.md", "/mnt/user-data/outputs/chart.png", "/mnt/user-data/outputs/diagram.svg"]}),
    ))
    .push(Reply::chunks(["Your **report** ", "is ready."]));
    browser.say("write the report").await;
    browser
        .wait(
            "document.querySelectorAll('.artifact').length === 3",
            "three artifacts",
        )
        .await;
    browser.idle().await;
    let order = browser
        .js("[...document.querySelectorAll('.turn')].at(-1).innerText")
        .await;
    let order = order.as_str().unwrap();
    let step = order.find("write_file").expect("write_file step");
    let presented = order.find("present_files").expect("present_files step");
    let final_answer = order.find("is ready.").expect("the answer");
    assert!(step < presented && presented < final_answer, "{order}");
    assert_eq!(
        browser
            .js("document.querySelectorAll('.step.done').length")
            .await,
        2
    );
    let href = browser
        .js("document.querySelector(\".artifact[data-path$='report.md'] a.download\").getAttribute('href')")
        .await;
    let download = daemon
        .http
        .get(daemon.url(href.as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(download.status(), 200);
    let disposition = download.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(disposition.starts_with("attachment"), "{disposition}");
    assert_eq!(download.text().await.unwrap(), "# Report\n\nAll good.\n");
    browser
        .wait(
            "document.querySelector('.artifact img') && document.querySelector('.artifact img').naturalWidth === 160",
            "the chart shown inline",
        )
        .await;
    // An <img> shows a picture served as a download too (Content-Disposition: attachment), so
    // pictures keep showing whichever way the daemon serves them.
    browser
        .js("(() => { const i = new Image(); i.id = 'as-download'; i.src = document.querySelector('.artifact img').src + '?download=true'; document.body.append(i); return true; })()")
        .await;
    browser
        .wait(
            "document.getElementById('as-download').naturalWidth === 160",
            "the picture served as a download",
        )
        .await;
    browser
        .js("document.getElementById('as-download').remove() || true")
        .await;
    // Each card names the file's type and size.
    for (name, expected) in [
        ("report.md", "Markdown · 20 B".to_owned()),
        (
            "chart.png",
            format!("PNG image · {}", size_text(CHART.len())),
        ),
        (
            "diagram.svg",
            format!("SVG image · {}", size_text(DIAGRAM.len())),
        ),
    ] {
        let meta =
            format!("document.querySelector(\".artifact[data-path$='{name}'] .meta\").textContent");
        browser
            .wait(&format!("{meta} !== '…'"), "the file's type and size")
            .await;
        assert_eq!(browser.js(&meta).await, expected.as_str(), "{name}");
    }
    // The SVG is a picture (an <img> from its bytes), never a document of its own: its script
    // does not run.
    let svg = "document.querySelector(\".artifact[data-path$='diagram.svg'] img.preview\")";
    browser
        .wait(
            &format!("{svg} && {svg}.naturalWidth === 120"),
            "the SVG shown as an image",
        )
        .await;
    assert!(
        browser
            .js(&format!("{svg}.src"))
            .await
            .as_str()
            .unwrap()
            .starts_with("data:image/svg+xml;base64,")
    );
    assert_eq!(
        browser
            .js("document.querySelectorAll('iframe, object, embed').length")
            .await,
        0
    );
    assert_eq!(browser.js("document.title").await, "Antler");
    browser.screenshot("02-tools-and-files").await;

    // A clarification question answered with its button.
    fake.push(Reply::tool_call(
        "ask_clarification",
        json!({"question": "PDF or Markdown?", "clarification_type": "approach_choice", "options": ["PDF", "Markdown"]}),
    ));
    browser.say("make it nicer").await;
    browser
        .wait(
            "document.querySelectorAll('.question .options button:enabled').length === 2",
            "the options",
        )
        .await;
    browser.idle().await;
    browser.screenshot("03-question").await;
    fake.push(Reply::text("Markdown it is."));
    browser
        .js("[...document.querySelectorAll('.question button')].find(b => b.textContent === 'Markdown').click() || true")
        .await;
    browser
        .wait(
            "document.body.innerText.includes('Markdown it is.')",
            "the answer to the choice",
        )
        .await;
    browser.idle().await;
    let sent = fake.requests().last().cloned().expect("a model request");
    let last_user = last_user_text(&sent);
    assert_eq!(last_user, "Markdown", "{sent}");

    // A reload rebuilds everything from /state.
    browser.session.refresh().await.expect("reload");
    browser
        .wait(
            "document.querySelectorAll('.human').length === 4 && document.querySelector('.artifact img') && document.querySelector('.answer strong')",
            "the restored conversation",
        )
        .await;
    let restored = browser.js("document.getElementById('log').innerText").await;
    let restored = restored.as_str().unwrap();
    for needle in [
        "hello",
        "bold",
        "write_file",
        "present_files",
        "report.md",
        "PDF or Markdown?",
        "Markdown it is.",
    ] {
        assert!(
            restored.contains(needle),
            "{needle:?} missing after reload: {restored}"
        );
    }
    assert!(!restored.contains("**"), "{restored}");
    assert_eq!(
        browser
            .js("document.querySelectorAll('img[onerror]').length")
            .await,
        0
    );
    assert_eq!(
        browser
            .js("document.querySelectorAll('.question button:enabled').length")
            .await,
        0,
        "an answered question offers no buttons"
    );
    browser.screenshot("04-reloaded").await;

    // Phone width: nothing wider than the screen; the sidebar is a drawer that a tap on the
    // backdrop, its ✕ and Esc close, and ☰ is there again after.
    browser.session.set_window_size(390, 844).await.unwrap();
    browser
        .wait(
            "document.documentElement.scrollWidth <= window.innerWidth && document.getElementById('sidebar').getBoundingClientRect().right <= 0",
            "no horizontal scroll and the sidebar folded away",
        )
        .await;
    assert_eq!(browser.js(TOGGLE_ON_TOP).await, true, "☰ reachable");
    browser.screenshot("05-phone").await;
    let drawer_open = "document.getElementById('sidebar').getBoundingClientRect().left >= 0 && !document.getElementById('backdrop').hidden";
    let drawer_closed = "document.getElementById('sidebar').getBoundingClientRect().right <= 0 && document.getElementById('backdrop').hidden";
    browser.click("#toggle-sidebar").await;
    browser.wait(drawer_open, "the sidebar slid in").await;
    browser.screenshot("06-phone-sidebar").await;
    browser
        .session
        .click_at(370, 420)
        .await
        .expect("tap the backdrop");
    browser
        .wait(drawer_closed, "the backdrop closing the sidebar")
        .await;
    browser.wait(TOGGLE_ON_TOP, "☰ uncovered").await;
    browser.click("#toggle-sidebar").await;
    browser.wait(drawer_open, "the sidebar again").await;
    browser
        .find("#close-sidebar")
        .await
        .send_keys(&super::webdriver::ESCAPE.to_string())
        .await
        .expect("press Escape");
    browser.wait(drawer_closed, "Esc closing the sidebar").await;
    assert_eq!(
        browser.js("document.activeElement.id").await,
        "toggle-sidebar",
        "focus back on ☰"
    );
    browser.click("#toggle-sidebar").await;
    browser.wait(drawer_open, "the sidebar once more").await;
    browser.click("#close-sidebar").await;
    browser.wait(drawer_closed, "✕ closing the sidebar").await;
    browser.wait(TOGGLE_ON_TOP, "☰ uncovered").await;
    browser.finish(&[]).await;
}

/// Whether ☰ is shown and nothing lies over its middle (a tap there reaches it).
const TOGGLE_ON_TOP: &str = "(() => { const t = document.getElementById('toggle-sidebar'); const r = t.getBoundingClientRect(); return r.width > 0 && document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === t; })()";

/// A size as the page writes it ("12.3 KB").
fn size_text(bytes: usize) -> String {
    let bytes = bytes as f64;
    if bytes < 1024.0 {
        format!("{bytes} B")
    } else if bytes < 1024.0 * 1024.0 {
        format!("{:.1} KB", bytes / 1024.0)
    } else {
        format!("{:.1} MB", bytes / 1024.0 / 1024.0)
    }
}

fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

pub(super) fn last_user(request: &Value) -> String {
    last_user_text(request)
}
