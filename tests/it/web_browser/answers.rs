//! What an answer points at: `[citation:Title](URL)` is a link titled Title, a picture the
//! model shows by its sandbox path (`![…](/mnt/user-data/outputs/chart.png)`) is the thread's
//! file from its artifact URL (fetched with the token where there is one), a link to a file
//! opens it, and a picture that does not exist or lies outside the outputs says so in its place;
//! the same after a reload.

use antler_test_support::{FakeOpenAi, Reply};

use super::{Browser, Tokenless, browser};
use crate::daemon::{Setup, TOKEN_A};

const CHART: &[u8] = include_bytes!("chart.png");
const SOURCE: &str = "https://example.com/reports/q3";

/// The answer, in pieces that cut the citation and the picture mid-way while it streams.
const ANSWER: [&str; 4] = [
    "Sales rose 12% [citation:Q3",
    " report](https://example.com/reports/q3).\n\n![Sales by month](/mnt/user-data/out",
    "puts/chart.png)\n\nThe [figures](/mnt/user-data/outputs/chart.png) are in your files.\n\n",
    "![Last year](/mnt/user-data/outputs/old.png)\n\n![Plot](/mnt/user-data/workspace/plot.png)",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn citations_are_links_and_pictures_come_from_the_threads_files() {
    let Some(browser) = browser("answers").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::new(&fake.base_url());
    let daemon = setup.start();
    browser.open_chat(&daemon.url("/")).await;
    let thread = first_turn(&browser, &fake).await;
    std::fs::create_dir_all(setup.outputs(&thread)).unwrap();
    std::fs::write(setup.outputs(&thread).join("chart.png"), CHART).unwrap();

    answer_with_citation_and_pictures(&browser, &fake).await;
    let chart = format!("/api/threads/{thread}/artifacts/mnt/user-data/outputs/chart.png");
    assert_eq!(
        browser.js(&format!("{PICTURE}.getAttribute('src')")).await,
        chart.as_str(),
        "the picture is the artifact URL"
    );
    assert_eq!(
        browser
            .js("document.querySelector('.answer a.file-link').getAttribute('href')")
            .await,
        chart.as_str()
    );
    browser.screenshot("18-citation-and-picture").await;

    browser.session.refresh().await.unwrap();
    browser
        .wait(PICTURE_SHOWN, "the picture after a reload")
        .await;
    assert_rendered(&browser).await;
    // The missing picture's look-up is the only failed request.
    browser.finish(&["404"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_the_picture_is_fetched_with_it() {
    let Some(browser) = browser("answers-token").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    browser
        .session
        .goto(&daemon.url("/"))
        .await
        .expect("open page");
    browser
        .wait(
            "document.getElementById('token-dialog').open",
            "the token dialog",
        )
        .await;
    browser
        .find("#token-input")
        .await
        .send_keys(&format!("{TOKEN_A}\u{E007}"))
        .await
        .unwrap();
    browser
        .wait(
            "!document.getElementById('token-dialog').open && document.querySelector('#model option') && document.querySelector('#model option').text.includes('fake-model')",
            "the page with the token",
        )
        .await;
    let thread = first_turn(&browser, &fake).await;
    let outputs = setup
        .data_dir()
        .join("users/alice/threads")
        .join(&thread)
        .join("user-data/outputs");
    std::fs::create_dir_all(&outputs).unwrap();
    std::fs::write(outputs.join("chart.png"), CHART).unwrap();

    answer_with_citation_and_pictures(&browser, &fake).await;
    let src = browser.js(&format!("{PICTURE}.src")).await;
    assert!(
        src.as_str().unwrap().starts_with("blob:"),
        "fetched with the token: {src}"
    );
    browser.finish(&["404", "401"]).await;
}

/// The loaded picture of the chart in the last answer.
const PICTURE: &str = "document.querySelector(\".answer img[data-file='chart.png']\")";
const PICTURE_SHOWN: &str = "document.querySelector(\".answer img[data-file='chart.png']\") && document.querySelector(\".answer img[data-file='chart.png']\").naturalWidth === 160";

/// A first exchange, so the thread exists; returns its id.
async fn first_turn(browser: &Browser, fake: &FakeOpenAi) -> String {
    fake.push(Reply::text("Ready."));
    browser.say("hello").await;
    browser
        .wait("document.body.innerText.includes('Ready.')", "the answer")
        .await;
    browser.idle().await;
    let thread = browser.js("localStorage.getItem('antler.thread')").await;
    thread.as_str().expect("thread id").to_owned()
}

async fn answer_with_citation_and_pictures(browser: &Browser, fake: &FakeOpenAi) {
    fake.push(Reply::chunks(ANSWER));
    browser.say("chart the sales").await;
    browser.idle().await;
    browser.wait(PICTURE_SHOWN, "the picture").await;
    assert_rendered(browser).await;
}

async fn assert_rendered(browser: &Browser) {
    let citation = "document.querySelector('.answer a.citation')";
    browser.wait(citation, "the citation").await;
    assert_eq!(
        browser.js(&format!("{citation}.textContent")).await,
        "Q3 report"
    );
    assert_eq!(
        browser
            .js(&format!("{citation}.getAttribute('href')"))
            .await,
        SOURCE
    );
    assert_eq!(browser.js(&format!("{citation}.target")).await, "_blank");
    let missing = "[image: Last year (old.png): the file does not exist]";
    let outside = "[image: Plot (plot.png): not shown, only files in /mnt/user-data/outputs can be shown here]";
    browser
        .wait(
            &format!(
                "[...document.querySelectorAll('.answer')].at(-1).innerText.includes({missing:?})"
            ),
            "the missing picture named",
        )
        .await;
    let text = browser
        .js("[...document.querySelectorAll('.answer')].at(-1).innerText")
        .await;
    let text = text.as_str().unwrap();
    assert!(text.contains(outside), "{text}");
    assert!(!text.contains("citation:"), "{text}");
    assert!(text.contains("The figures are in your files."), "{text}");
}
