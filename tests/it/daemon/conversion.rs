//! Hostile documents and pages against the real daemon: each is parsed in a bounded converter
//! child, so the daemon stays up and small, the upload is kept, and the reason it has no
//! Markdown copy reaches the user (the upload's answer) and the agent (its file list, the
//! `web_fetch` result).

use serde_json::{Value, json};

use antler_test_support::bench::{peak_rss_kib, rss_kib};
use antler_test_support::documents::{
    docx, docx_bomb, pdf, pdf_bomb, pptx_bomb, xlsx_bomb, xlsx_huge_dimension,
};
use antler_test_support::{FakeOpenAi, Reply};

use super::{Daemon, Setup, TOKEN_A};

/// The daemon's peak resident memory stays under this through every hostile conversion (its
/// debug build idles around 70 MiB and peaked at 76-80 MiB in these tests; converting in-process
/// took 24 GB before the OOM killer).
const DAEMON_PEAK_RSS_MIB: u64 = 200;
/// The converter child's address space in these tests.
const CHILD_MEMORY_MB: u64 = 256;

fn conversion_config(extra: &str) -> String {
    format!(
        "uploads:\n  auto_convert_documents: true\n  max_file_size: 20000000\n\
         conversion:\n  memory_mb: {CHILD_MEMORY_MB}\n  timeout_seconds: 60\n{extra}"
    )
}

async fn upload(daemon: &Daemon, thread: &str, name: &'static str, bytes: Vec<u8>) -> Value {
    let form = reqwest::multipart::Form::new().part(
        "files",
        reqwest::multipart::Part::bytes(bytes).file_name(name),
    );
    let response = daemon
        .post(&format!("/api/threads/{thread}/uploads"), TOKEN_A)
        .multipart(form)
        .send()
        .await
        .expect("upload request");
    assert_eq!(response.status(), 200, "{name}");
    response.json().await.expect("upload answer")
}

fn assert_daemon_small(daemon: &Daemon) {
    let peak = peak_rss_kib(daemon.pid()) / 1024;
    assert!(
        peak > 0 && peak < DAEMON_PEAK_RSS_MIB,
        "daemon peak RSS {peak} MiB (now {} MiB)",
        rss_kib(daemon.pid()) / 1024
    );
}

async fn assert_daemon_answers(daemon: &Daemon) {
    let health = daemon
        .http
        .get(daemon.url("/healthz"))
        .send()
        .await
        .expect("the daemon still answers");
    assert_eq!(health.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_uploads_stop_their_converter_not_the_daemon() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("I can read the report only."));
    let setup = Setup::new(&fake.base_url(), &conversion_config(""));
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;

    let too_much_memory =
        format!("the conversion stopped: it needed more than {CHILD_MEMORY_MB} MiB of memory");
    let hostile: [(&'static str, Vec<u8>, &str); 4] = [
        // ~1 GB of text operators behind FlateDecode, about 1 MB on the wire.
        ("bomb.pdf", pdf_bomb(1000), &too_much_memory),
        // A shared string of ~1 GB: the reader holds every shared string before any cell.
        ("bomb.xlsx", xlsx_bomb(1000), &too_much_memory),
        // 100 MiB parts: refused by the parsers' own inflate cap.
        ("bomb.docx", docx_bomb(100), "inflates past"),
        ("bomb.pptx", pptx_bomb(100), "inflates past"),
    ];
    let mut listed = Vec::new();
    for (name, bytes, reason) in hostile {
        let answer = upload(&daemon, &thread, name, bytes).await;
        let file = &answer["files"][0];
        assert_eq!(file["filename"], name);
        let error = file["conversion_error"].as_str().unwrap_or_default();
        assert!(error.contains(reason), "{name}: {answer}");
        assert!(file.get("markdown_path").is_none(), "{name}");
        let message = answer["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "{name} was kept but has no Markdown copy: {error}"
            )),
            "{message}"
        );
        listed.push(file.clone());
        assert_daemon_answers(&daemon).await;
    }
    // 16,384 × 1,048,576 cells claimed in 1.4 KB, one value at each corner: a dense grid
    // would be 512 GiB; read cell by cell it is one row and a note.
    let answer = upload(&daemon, &thread, "corners.xlsx", xlsx_huge_dimension()).await;
    let corners = &answer["files"][0];
    assert_eq!(
        corners["markdown_path"],
        "/mnt/user-data/uploads/corners.md"
    );
    let url = corners["markdown_artifact_url"].as_str().unwrap();
    let markdown = daemon
        .get(url, TOKEN_A)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        markdown,
        "# corners.xlsx\n\n## Sheet: Sheet1\n\n| corner |\n| --- |\n\n\
         _… 1 cell right of column IV not shown_\n"
    );
    // A normal document still converts, through the same children.
    let answer = upload(&daemon, &thread, "report.docx", docx()).await;
    let report = &answer["files"][0];
    assert_eq!(report["markdown_path"], "/mnt/user-data/uploads/report.md");
    listed.push(report.clone());
    let answer = upload(&daemon, &thread, "invoice.pdf", pdf("Total due 42")).await;
    assert_eq!(
        answer["files"][0]["markdown_path"],
        "/mnt/user-data/uploads/invoice.md"
    );
    assert_daemon_small(&daemon);

    // Every upload is kept; only the documents that converted have a Markdown copy.
    let uploads: Value = daemon
        .get_json(&format!("/api/threads/{thread}/uploads/list"), TOKEN_A)
        .await;
    let mut names: Vec<&str> = uploads["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["filename"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "bomb.docx",
            "bomb.pdf",
            "bomb.pptx",
            "bomb.xlsx",
            "corners.md",
            "corners.xlsx",
            "invoice.md",
            "invoice.pdf",
            "report.docx",
            "report.md"
        ]
    );

    // The agent is told which files have a Markdown copy and why the others have none.
    let response = daemon
        .post(&format!("/api/threads/{thread}/runs/wait"), TOKEN_A)
        .json(&json!({"input": {"messages": [{
            "role": "user",
            "content": "summarise these",
            "additional_kwargs": {"files": listed},
        }]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let request = fake.requests().pop().expect("the model was called");
    let sent = request.to_string();
    assert!(
        sent.contains("Markdown copy: /mnt/user-data/uploads/report.md"),
        "{sent}"
    );
    assert!(
        sent.contains(&format!("No Markdown copy: {too_much_memory}")),
        "{sent}"
    );
    assert!(sent.contains("inflates past"), "{sent}");
    // A converted document is outside text: the thread now holds untrusted content.
    let state = daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    let untrusted = state["values"]["extra"]["untrusted"].to_string();
    assert!(
        untrusted.contains(r#"{"kind":"document","detail":"report.docx"}"#),
        "{untrusted}"
    );
    assert_daemon_small(&daemon);
}

/// A page of `levels` nested `<div>`s (2.2 MB at 200,000), with text at the bottom.
fn nested_page(levels: usize) -> String {
    format!(
        "<html><head><title>Deep page</title></head><body>{}<p>the bottom</p>{}</body></html>",
        "<div>".repeat(levels),
        "</div>".repeat(levels)
    )
}

async fn page_server() -> String {
    use axum::Router;
    use axum::response::Html;
    use axum::routing::get;
    let deep = nested_page(200_000);
    // ~4.8 MB of tiny elements: over a million nodes, more than 128 MiB to parse.
    let wide = format!("<html><body>{}</body></html>", "<a>x</a>".repeat(600_000));
    let router = Router::new()
        .route("/deep", get(move || async move { Html(deep) }))
        .route("/wide", get(move || async move { Html(wide) }));
    let addr = antler_test_support::serve(router).await;
    format!("http://{addr}")
}

/// The debug build's html5ever takes seconds for 200,000 elements (a release build a tenth of
/// a second), more on a loaded machine: the timeout is generous, the memory is not.
fn web_fetch_config(memory_mb: u64) -> String {
    format!(
        "tools:\n  - name: web_fetch\n    group: web\n    use: web_fetch\n    allow_private_networks: true\n\
         conversion:\n  memory_mb: {memory_mb}\n  timeout_seconds: 180\n"
    )
}

/// The content of the tool message the model received for its `web_fetch` call, inside the
/// `<untrusted source="web_fetch" url="…">` marker it came in.
fn tool_result(fake: &FakeOpenAi) -> String {
    let request = fake.requests().pop().expect("the model was called again");
    let content = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .expect("a tool message");
    let inner = content
        .strip_prefix("<untrusted source=\"web_fetch\" url=\"")
        .and_then(|rest| rest.split_once("\">\n"))
        .and_then(|(_, rest)| rest.strip_suffix("\n</untrusted>"));
    inner.expect("the page came marked untrusted").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_200000_nested_divs_is_flattened_not_fatal() {
    let pages = page_server().await;
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call(
        "web_fetch",
        json!({"url": format!("{pages}/deep")}),
    ))
    .push(Reply::text("It is a deep page."));
    let setup = Setup::new(&fake.base_url(), &web_fetch_config(512));
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let response = daemon.run_wait(TOKEN_A, &thread, "read the page").await;
    assert_eq!(response.status(), 200);
    let result = tool_result(&fake);
    assert!(result.starts_with("# Deep page\n\nSource: "), "{result}");
    assert!(
        result.contains(
            "the page nests deeper than 512 levels; 199489 deeper elements were read as plain text"
        ),
        "{}",
        &result[..result.len().min(400)]
    );
    assert!(result.contains("the bottom"), "{result}");
    assert_daemon_answers(&daemon).await;
    assert_daemon_small(&daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_too_big_to_convert_is_reported_to_the_model() {
    let pages = page_server().await;
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call(
        "web_fetch",
        json!({"url": format!("{pages}/wide")}),
    ))
    .push(Reply::text("That page could not be read."));
    let setup = Setup::new(&fake.base_url(), &web_fetch_config(128));
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let response = daemon.run_wait(TOKEN_A, &thread, "read the page").await;
    assert_eq!(response.status(), 200);
    let result = tool_result(&fake);
    assert_eq!(
        result,
        format!(
            "Error: the page at {pages}/wide could not be converted: the conversion stopped: it \
             needed more than 128 MiB of memory (conversion.memory_mb)"
        )
    );
    assert_daemon_answers(&daemon).await;
    assert_daemon_small(&daemon);
}
