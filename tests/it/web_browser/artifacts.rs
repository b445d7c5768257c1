//! Agent-written files opened in the browser straight from the API: XML, XHTML, HTML and SVG
//! with scripts are downloads and never run on the daemon's origin; a text file holding HTML
//! shows as text; an image and a PDF still display with the sandboxing policy.

use std::time::{Duration, Instant};

use antler_test_support::FakeOpenAi;

use super::{browser, site};
use crate::daemon::Setup;

const CHART: &[u8] = include_bytes!("chart.png");

/// Creates a thread through the API and marks the page, if it ever runs.
const SCRIPT: &str = "document.title='ran';fetch('/api/threads',{method:'POST'})";

/// A one-page PDF saying "Hello PDF".
fn pdf() -> Vec<u8> {
    let content = "BT /F1 24 Tf 50 100 Td (Hello PDF) Tj ET";
    let objects = [
        "<</Type/Catalog/Pages 2 0 R>>".to_owned(),
        "<</Type/Pages/Kids[3 0 R]/Count 1>>".to_owned(),
        "<</Type/Page/Parent 2 0 R/MediaBox[0 0 300 200]/Contents 4 0 R/Resources<</Font<</F1 5 0 R>>>>>>".to_owned(),
        format!("<</Length {}>>stream\n{content}\nendstream", content.len()),
        "<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>".to_owned(),
    ];
    let mut out = String::from("%PDF-1.4\n");
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.push_str(&format!("{} 0 obj{object}endobj\n", i + 1));
    }
    let xref = out.len();
    out.push_str(&format!(
        "xref\n0 {}\n0000000000 65535 f \n",
        objects.len() + 1
    ));
    for offset in offsets {
        out.push_str(&format!("{offset:010} 00000 n \n"));
    }
    out.push_str(&format!(
        "trailer<</Size {}/Root 1 0 R>>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1
    ));
    out.into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_files_never_run_and_images_and_pdfs_still_display() {
    let Some(browser) = browser("artifacts").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Setup::tokenless(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread("").await;
    let outputs = setup
        .data_dir()
        .join("users/local/threads")
        .join(&thread)
        .join("user-data/outputs");
    std::fs::create_dir_all(&outputs).unwrap();
    let xhtml = format!(
        "<?xml version=\"1.0\"?><html xmlns=\"http://www.w3.org/1999/xhtml\"><body><p>report</p><script>{SCRIPT}</script></body></html>"
    );
    let active = [
        ("report.xml", xhtml.clone()),
        ("report.xhtml", xhtml),
        ("page.html", format!("<p>page</p><script>{SCRIPT}</script>")),
        (
            "image.svg",
            format!("<svg xmlns=\"http://www.w3.org/2000/svg\"><script>{SCRIPT}</script></svg>"),
        ),
    ];
    for (name, body) in &active {
        std::fs::write(outputs.join(name), body).unwrap();
    }
    std::fs::write(
        outputs.join("note.txt"),
        format!("<script>{SCRIPT}</script>"),
    )
    .unwrap();
    std::fs::write(outputs.join("chart.png"), CHART).unwrap();
    std::fs::write(outputs.join("doc.pdf"), pdf()).unwrap();
    let url = |name: &str| {
        daemon.url(&format!(
            "/api/threads/{thread}/artifacts/mnt/user-data/outputs/{name}"
        ))
    };

    browser.open_chat(&daemon.url("/")).await;
    let chat = browser.js("location.href").await;
    for (name, _) in &active {
        // A download: the browser stays on the chat, and nothing of the file runs.
        let _ = browser.session.goto(&url(name)).await;
        assert_eq!(browser.js("location.href").await, chat, "{name} was opened");
        assert_ne!(browser.js("document.title").await, "ran", "{name} ran");
    }
    // Plain text is shown as text, whatever it holds.
    browser.session.goto(&url("note.txt")).await.unwrap();
    assert_eq!(browser.js("document.contentType").await, "text/plain");
    assert!(
        browser
            .js("document.body.innerText")
            .await
            .as_str()
            .unwrap()
            .contains("<script>")
    );
    assert_ne!(browser.js("document.title").await, "ran");
    // The image displays under the policy.
    browser.session.goto(&url("chart.png")).await.unwrap();
    browser
        .wait(
            "document.images.length === 1 && document.images[0].naturalWidth === 160",
            "the image",
        )
        .await;
    // The PDF displays as it does from a server that sends no policy at all.
    let reference = site::serve(vec![("/doc.pdf", "application/pdf", pdf())]).await;
    let plain = settled_screenshot(&browser, &format!("http://{reference}/doc.pdf")).await;
    let sandboxed = settled_screenshot(&browser, &url("doc.pdf")).await;
    assert!(plain.len() > 5_000, "the reference PDF did not render");
    assert!(
        sandboxed == plain,
        "the PDF looks different under the policy"
    );
    browser.screenshot("artifact-pdf").await;

    // No script ran: the thread is still the only one.
    let threads = daemon.get_json("/api/threads", "").await;
    assert_eq!(
        threads["threads"].as_array().map(Vec::len),
        Some(1),
        "{threads}"
    );
    // Chromium styles its image page inline, which the policy refuses (the image still shows).
    browser.finish(&["Applying inline style violates"]).await;
}

/// Opens `url` and returns a screenshot once two in a row are the same (the PDF viewer draws
/// in steps).
async fn settled_screenshot(browser: &super::Browser, url: &str) -> Vec<u8> {
    browser.session.goto(url).await.expect("open the PDF");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Vec::new();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let shot = browser.session.screenshot().await.expect("screenshot");
        if shot == last && shot.len() > 5_000 {
            return shot;
        }
        assert!(Instant::now() < deadline, "the PDF never settled");
        last = shot;
    }
}
