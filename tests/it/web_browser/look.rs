//! How the page looks and behaves around a conversation: the model menu (name and model id,
//! never cut), the message box that grows with its text, the "Thinking" placeholder before the
//! first words (the composer does not move), quotes and links styled by the theme, the short
//! placeholder at phone width, and the dark theme (`prefers-color-scheme`, emulated through the
//! DevTools protocol).

use std::time::Duration;

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::chat::last_user;
use super::webdriver::{ENTER, SHIFT};
use super::{Browser, Tokenless, browser};

/// The model menu's options as `[text, value]` pairs.
const MODEL_OPTIONS: &str =
    "[...document.getElementById('model').options].map(o => [o.text, o.value])";

/// Whether the model menu shows its whole text: its width is the width it takes with no limit,
/// and it lies inside the window.
const MODEL_NOT_CUT: &str = "(() => { const s = document.getElementById('model'); const shown = s.getBoundingClientRect().width; s.style.maxWidth = 'none'; s.style.flexShrink = '0'; const full = s.getBoundingClientRect().width; s.style.maxWidth = ''; s.style.flexShrink = ''; return full - shown <= 0.5 && s.getBoundingClientRect().right <= window.innerWidth && s.scrollWidth <= s.clientWidth; })()";

/// Whether the message box's placeholder fits on its one line.
const PLACEHOLDER_FITS: &str = "(() => { const i = document.getElementById('input'); const s = getComputedStyle(i); const c = document.createElement('canvas').getContext('2d'); c.font = `${s.fontWeight} ${s.fontSize} ${s.fontFamily}`; return c.measureText(i.placeholder).width <= i.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); })()";

/// Relative luminance (0 black … 1 white) of the main surfaces and the text.
const LUMINANCE: &str = "(() => { const lum = (c) => { const [r, g, b] = c.match(/[\\d.]+/g).slice(0, 3).map(Number); return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255; }; const bg = (sel) => lum(getComputedStyle(document.querySelector(sel)).backgroundColor); return {dark: matchMedia('(prefers-color-scheme: dark)').matches, page: bg('body'), ink: lum(getComputedStyle(document.body).color), answer: bg('.answer'), composer: bg('#composer'), input: bg('#input'), sidebar: bg('#sidebar'), topbar: bg('.topbar')}; })()";

fn second_model(model_url: &str) -> String {
    format!(
        "  - name: big\n    display_name: Big model\n    provider: openai\n    model: big-model-70b\n    base_url: {model_url}\n    timeout: 30\n"
    )
}

async fn height(browser: &Browser, selector: &str) -> f64 {
    browser
        .js(&format!(
            "document.querySelector('{selector}').getBoundingClientRect().height"
        ))
        .await
        .as_f64()
        .unwrap()
}

async fn top(browser: &Browser, selector: &str) -> f64 {
    browser
        .js(&format!(
            "document.querySelector('{selector}').getBoundingClientRect().top"
        ))
        .await
        .as_f64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_message_box_grows_and_thinking_shows_until_the_first_words() {
    let Some(browser) = browser("look").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::with_models(&fake.base_url(), &second_model(&fake.base_url()));
    let daemon = setup.start();
    browser.open_chat(&daemon.url("/")).await;

    // Each model once, by name and model id; the default marked as such, chosen by default.
    browser
        .wait(
            "document.getElementById('model').options.length === 2",
            "the models",
        )
        .await;
    assert_eq!(
        browser.js(MODEL_OPTIONS).await,
        json!([
            ["Fake model — fake-model (default)", ""],
            ["Big model — big-model-70b", "big"]
        ])
    );
    assert_eq!(
        browser.js("document.getElementById('model').value").await,
        ""
    );
    assert_eq!(
        browser.js(MODEL_NOT_CUT).await,
        true,
        "the model menu is cut"
    );
    assert_eq!(browser.js(PLACEHOLDER_FITS).await, true);

    // The box grows line by line up to its limit, then scrolls.
    let one_line = height(&browser, "#input").await;
    let composer_before = top(&browser, "#composer").await;
    let input = browser.find("#input").await;
    let four_lines = format!(
        "line 1{SHIFT}{ENTER}{SHIFT}line 2{SHIFT}{ENTER}{SHIFT}line 3{SHIFT}{ENTER}{SHIFT}line 4"
    );
    input.send_keys(&four_lines).await.expect("type");
    let grown = height(&browser, "#input").await;
    assert!(grown >= one_line + 3.0 * 18.0, "{one_line} -> {grown}");
    let many: String = (5..=30)
        .map(|n| format!("{SHIFT}{ENTER}{SHIFT}line {n}"))
        .collect();
    input.send_keys(&many).await.expect("type");
    let limit = browser
        .js("parseFloat(getComputedStyle(document.getElementById('input')).maxHeight)")
        .await
        .as_f64()
        .unwrap();
    let tallest = height(&browser, "#input").await;
    assert!(
        tallest <= limit + 0.5 && tallest > grown,
        "{grown} -> {tallest} (limit {limit})"
    );
    assert_eq!(
        browser
            .js("(() => { const i = document.getElementById('input'); return i.scrollHeight > i.clientHeight; })()")
            .await,
        true
    );

    // A slow model: "Thinking" holds the answer's place until its first words replace it,
    // and the composer stays where it was.
    browser
        .js("(() => { window.seen = []; new MutationObserver(() => { const now = [...document.querySelectorAll('.answer')].some(a => a.textContent.trim()) ? 'answer' : document.querySelector('.turn .thinking') ? 'thinking' : null; if (now && window.seen.at(-1) !== now) window.seen.push(now); }).observe(document.getElementById('log'), {childList: true, subtree: true, characterData: true}); return true; })()")
        .await;
    fake.push(Reply::slow(
        [
            "> A quoted line from the notes.\n\n",
            "See [the docs](https://example.com/docs) for more.",
        ],
        Duration::from_millis(1000),
    ));
    input.send_keys(&ENTER.to_string()).await.expect("send");
    browser
        .wait(
            "window.seen.includes('thinking') && !document.getElementById('stop').hidden",
            "the thinking placeholder",
        )
        .await;
    browser.screenshot("12-thinking").await;
    assert_eq!(
        height(&browser, "#input").await,
        one_line,
        "the box shrank back"
    );
    assert_eq!(
        top(&browser, "#composer").await,
        composer_before,
        "the composer moved"
    );
    browser
        .wait(
            "document.querySelector('.answer blockquote') && document.querySelector('.answer a')",
            "the answer",
        )
        .await;
    browser.idle().await;
    assert_eq!(
        browser.js("window.seen").await,
        json!(["thinking", "answer"])
    );
    assert_eq!(
        browser
            .js("document.querySelectorAll('.thinking').length")
            .await,
        0
    );
    assert_eq!(top(&browser, "#composer").await, composer_before);
    let sent = last_user(&fake.requests().last().cloned().expect("a model request"));
    assert!(
        sent.contains("line 1\nline 2") && sent.contains("line 30"),
        "{sent}"
    );

    // Quotes have a bar and muted text; links take the theme's colour, not the browser's blue.
    let styles = browser
        .js("(() => { const q = getComputedStyle(document.querySelector('.answer blockquote')); const a = getComputedStyle(document.querySelector('.answer a')); const root = getComputedStyle(document.documentElement); const colour = (v) => { const d = document.createElement('i'); d.style.color = root.getPropertyValue(v); document.body.append(d); const c = getComputedStyle(d).color; d.remove(); return c; }; return {bar: q.borderLeftWidth, quote: q.color, muted: colour('--muted'), link: a.color, theme: colour('--link')}; })()")
        .await;
    assert_eq!(styles["bar"], "3px", "{styles}");
    assert_eq!(styles["quote"], styles["muted"], "{styles}");
    assert_eq!(styles["link"], styles["theme"], "{styles}");
    assert_ne!(styles["link"], "rgb(0, 0, 238)", "{styles}");
    browser.screenshot("13-desktop-light").await;

    // The chosen model goes with the next run.
    browser
        .js("(() => { const s = document.getElementById('model'); s.value = 'big'; s.dispatchEvent(new Event('change')); return true; })()")
        .await;
    assert_eq!(browser.js(MODEL_NOT_CUT).await, true);
    fake.push(Reply::text("From the big one."));
    browser.say("and you?").await;
    browser
        .wait(
            "document.body.innerText.includes('From the big one.')",
            "the answer",
        )
        .await;
    browser.idle().await;
    let request = fake.requests().last().cloned().unwrap();
    assert_eq!(request["model"], "big-model-70b", "{request}");
    browser.finish(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dark_mode_and_phone_width_keep_everything_readable() {
    let Some(browser) = browser("dark").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::new(&fake.base_url());
    let daemon = setup.start();
    browser.open_chat(&daemon.url("/")).await;
    fake.push(Reply::text(
        "Here is the plan:\n\n> Keep it short.\n\n1. Read [the guide](https://example.com).\n2. Run `make`.\n\n```sh\nmake test\n```",
    ));
    browser.say("what now?").await;
    browser
        .wait("document.querySelector('.answer blockquote')", "the answer")
        .await;
    browser.idle().await;
    let light: Value = browser.js(LUMINANCE).await;
    assert_eq!(light["dark"], false);
    assert!(light["page"].as_f64().unwrap() > 0.9, "{light}");

    emulate_scheme(&browser, "dark").await;
    browser
        .wait(
            "matchMedia('(prefers-color-scheme: dark)').matches",
            "the dark scheme",
        )
        .await;
    let dark: Value = browser.js(LUMINANCE).await;
    for surface in ["page", "answer", "composer", "input", "sidebar", "topbar"] {
        assert!(dark[surface].as_f64().unwrap() < 0.2, "{surface}: {dark}");
    }
    assert!(dark["ink"].as_f64().unwrap() > 0.8, "{dark}");
    browser.screenshot("14-desktop-dark").await;

    // Phone width: the short placeholder on one line, the model menu whole, both schemes.
    browser.session.set_window_size(390, 844).await.unwrap();
    browser
        .wait(
            "document.getElementById('input').placeholder === 'Message Antler'",
            "the short placeholder",
        )
        .await;
    assert_eq!(browser.js(PLACEHOLDER_FITS).await, true);
    assert_eq!(
        browser.js(MODEL_NOT_CUT).await,
        true,
        "the model menu is cut"
    );
    assert!(
        browser
            .js("document.querySelector('#model option:checked').text")
            .await
            .as_str()
            .unwrap()
            .contains("fake-model")
    );
    assert_eq!(
        browser
            .js("document.documentElement.scrollWidth <= window.innerWidth")
            .await,
        true
    );
    browser.screenshot("15-phone-dark").await;
    browser.click("#toggle-sidebar").await;
    browser
        .wait(
            "document.getElementById('sidebar').getBoundingClientRect().left >= 0",
            "the sidebar",
        )
        .await;
    browser.screenshot("16-phone-dark-sidebar").await;
    browser.click("#close-sidebar").await;
    emulate_scheme(&browser, "light").await;
    browser
        .wait("!matchMedia('(prefers-color-scheme: dark)').matches && document.getElementById('sidebar').getBoundingClientRect().right <= 0", "the light scheme")
        .await;
    assert_eq!(browser.js(MODEL_NOT_CUT).await, true);
    browser.screenshot("17-phone-light").await;
    browser.finish(&[]).await;
}

async fn emulate_scheme(browser: &Browser, scheme: &str) {
    browser
        .session
        .cdp(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        )
        .await
        .expect("emulate the colour scheme");
}
