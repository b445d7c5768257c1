//! How each type of artifact is served: only passive types inline, every file sandboxed and
//! `nosniff`, so nothing an agent writes can run script in the API's origin.

use antler_test_support::FakeOpenAi;

use super::Setup;

const CSP: &str = "sandbox; default-src 'none'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_passive_types_are_inline_and_every_artifact_is_sandboxed() {
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
    let script = "<script>fetch('/api/threads',{method:'POST'})</script>";
    let files: &[(&str, &str)] = &[
        ("report.xml", "attachment"),
        ("page.html", "attachment"),
        ("page.xhtml", "attachment"),
        ("image.svg", "attachment"),
        ("style.xsl", "attachment"),
        ("code.js", "attachment"),
        ("blob.qqq", "attachment"),
        ("archive.bin", "attachment"),
        ("chart.png", "inline"),
        ("photo.jpg", "inline"),
        ("anim.gif", "inline"),
        ("pic.webp", "inline"),
        ("doc.pdf", "inline"),
        ("notes.txt", "inline"),
        ("data.json", "inline"),
        ("table.csv", "inline"),
        ("song.mp3", "inline"),
        ("clip.mp4", "inline"),
    ];
    for (name, _) in files {
        std::fs::write(outputs.join(name), script).unwrap();
    }
    let get = |name: &str, query: &str| {
        daemon
            .http
            .get(daemon.url(&format!(
                "/api/threads/{thread}/artifacts/mnt/user-data/outputs/{name}{query}"
            )))
            .send()
    };
    for (name, disposition) in files {
        let response = get(name, "").await.unwrap();
        assert_eq!(response.status(), 200, "{name}");
        let headers = response.headers();
        let served = headers["content-disposition"].to_str().unwrap();
        assert!(
            served.starts_with(disposition),
            "{name}: {served} (type {:?})",
            headers["content-type"]
        );
        assert_eq!(headers["content-security-policy"], CSP, "{name}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{name}");
    }
    // Asked for as a download, a passive type is one too; a byte range keeps the headers.
    let download = get("chart.png", "?download=true").await.unwrap();
    assert!(
        download.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment")
    );
    let range = daemon
        .http
        .get(daemon.url(&format!(
            "/api/threads/{thread}/artifacts/mnt/user-data/outputs/report.xml"
        )))
        .header("range", "bytes=0-7")
        .send()
        .await
        .unwrap();
    assert_eq!(range.status(), 206);
    assert_eq!(range.headers()["content-security-policy"], CSP);
    assert!(
        range.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment")
    );
}
