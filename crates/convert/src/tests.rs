//! The parsers as the child runs them (in-process, on generated documents), and the daemon's
//! side of a child against small shell programs that end each way a converter can.

use std::time::{Duration, Instant};

use antler_test_support::documents::{docx, pdf, pptx, xlsx, xlsx_huge_dimension, zip_of};

use super::child::{Failure, convert};
use super::documents::markdown_table;
use super::*;

#[test]
fn docx_becomes_headings_paragraphs_lists_and_tables() {
    assert_eq!(
        convert(Kind::Docx, &docx()).unwrap(),
        "# Quarterly report\n\nRevenue & costs rose Again.\n\n- first point\n\n\
         | Region | Sales |\n| --- | --- |\n| North\\|East | 42 |\n\nThe end"
    );
}

#[test]
fn pptx_slides_come_in_numeric_order() {
    assert_eq!(
        convert(Kind::Pptx, &pptx()).unwrap(),
        "## Slide 1\n\nRoadmap\n\nShip v1 in Q3\n\n## Slide 2\n\nR&D budget\n\n\
         ## Slide 10\n\nAppendix"
    );
}

#[test]
fn xlsx_becomes_one_table_per_sheet() {
    assert_eq!(
        convert(Kind::Xlsx, &xlsx()).unwrap(),
        "## Sheet: Prices\n\n| Item | Price |\n| --- | --- |\n| Tea | 3.5 |\n\
         | Cake | 7 |\n\n## Sheet: Notes\n\n| ok |\n| --- |"
    );
}

#[test]
fn a_workbook_claiming_every_cell_converts_in_what_its_cells_cost() {
    // The issue's 1.4 KB workbook: a dense grid of its corners would be 512 GiB.
    assert_eq!(
        convert(Kind::Xlsx, &xlsx_huge_dimension()).unwrap(),
        "## Sheet: Sheet1\n\n| corner |\n| --- |\n\n_… 1 cell right of column IV not shown_"
    );
}

#[test]
fn pdf_text_is_extracted_per_page() {
    let md = convert(Kind::Pdf, &pdf("Hello PDF world, invoice #42")).unwrap();
    assert!(md.starts_with("## Page 1\n\n"), "{md}");
    assert!(md.contains("Hello PDF world, invoice #42"), "{md}");
}

#[test]
fn corrupt_and_empty_documents_fail_with_a_reason() {
    let cases: [(Kind, Vec<u8>); 4] = [
        (Kind::Pdf, b"%PDF-1.4\nthis is not a pdf".to_vec()),
        (Kind::Docx, b"PK\x03\x04 truncated".to_vec()),
        (Kind::Xlsx, zip_of(&[("xl/workbook.xml", "<workbook")])),
        (Kind::Pptx, zip_of(&[("ppt/presentation.xml", "<p/>")])),
    ];
    for (kind, bytes) in cases {
        let result = std::panic::catch_unwind(|| convert(kind, &bytes));
        match result {
            Ok(Err(Failure::Unreadable(detail))) => assert!(!detail.is_empty(), "{kind:?}"),
            // pdf-extract panics on some garbage; the child reports that as a crash.
            Err(_) => assert_eq!(kind, Kind::Pdf),
            other => panic!("{kind:?}: {other:?}"),
        }
    }
    let blank = zip_of(&[("word/document.xml", "<w:document><w:body/></w:document>")]);
    assert_eq!(convert(Kind::Docx, &blank), Err(Failure::NoText));
}

#[test]
fn html_is_a_page_with_its_title() {
    let out = convert(Kind::Html, b"<title>T</title><p>Hi <b>there</b></p>").unwrap();
    let page = html::Page::decode(&out);
    assert_eq!(page.title.as_deref(), Some("T"));
    assert_eq!(page.markdown, "Hi **there**");
}

#[test]
fn kinds_come_from_document_names_and_arguments() {
    assert_eq!(Kind::of_document("A.Docx"), Some(Kind::Docx));
    assert_eq!(Kind::of_document("report.pdf"), Some(Kind::Pdf));
    assert_eq!(Kind::of_document("docx"), None);
    assert_eq!(Kind::of_document("page.html"), None);
    for kind in Kind::ALL {
        assert_eq!(Kind::from_arg(kind.arg()), Some(kind));
    }
}

#[test]
fn markdown_tables_pad_ragged_rows() {
    let rows = vec![vec!["a".to_string()], vec!["1".into(), "2\n3".into()]];
    assert_eq!(
        markdown_table(&rows),
        "| a |  |\n| --- | --- |\n| 1 | 2<br>3 |\n"
    );
}

/// A converter whose child is `sh -c script` (it gets `--kind <kind>` as `$1 $2`).
fn shell(script: &str) -> Converter {
    Converter::new(Program::custom("/bin/sh", ["-c", script, "converter"]), 2)
}

fn limits(seconds: u64) -> Limits {
    Limits {
        memory_mb: 256,
        timeout: Duration::from_secs(seconds),
        max_output_mb: 1,
    }
}

async fn run_shell(script: &str, limits: &Limits) -> Result<String, ConvertError> {
    shell(script)
        .convert(Kind::Pdf, Input::Bytes(b"input".to_vec()), limits)
        .await
}

#[tokio::test]
async fn the_child_reads_stdin_and_its_stdout_is_the_markdown() {
    let out = run_shell(r#"printf '%s:' "$2"; cat"#, &limits(10)).await;
    assert_eq!(out.unwrap(), "pdf:input");
}

#[tokio::test]
async fn exit_statuses_become_reasons() {
    let unreadable = run_shell("echo 'bad xref' >&2; exit 65", &limits(10)).await;
    assert_eq!(
        unreadable,
        Err(ConvertError::Unreadable {
            kind: "PDF",
            detail: "bad xref".into()
        })
    );
    assert_eq!(
        run_shell("exit 66", &limits(10)).await,
        Err(ConvertError::NoText)
    );
    let oom = run_shell(
        "echo 'memory allocation of 549755813888 bytes failed' >&2; kill -ABRT $$",
        &limits(10),
    )
    .await;
    assert_eq!(oom, Err(ConvertError::TooMuchMemory { limit_mb: 256 }));
    let deep = run_shell(
        "echo \"thread 'convert' has overflowed its stack\" >&2; kill -ABRT $$",
        &limits(10),
    )
    .await;
    assert_eq!(deep, Err(ConvertError::TooDeep));
    let crashed = run_shell("kill -SEGV $$", &limits(10)).await;
    assert!(
        matches!(&crashed, Err(ConvertError::Crashed { detail }) if detail.contains("signal 11")),
        "{crashed:?}"
    );
}

/// Waits (up to 60 s, returning as soon as it holds) for `done`, checking every 20 ms.
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Live (not zombie) processes with `arg` on their command line.
fn processes_with_arg(arg: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let dir = entry.path();
            let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            let has_arg = cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes());
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'));
            has_arg && !zombie
        })
        .count()
}

#[tokio::test]
async fn a_slow_child_is_killed_with_its_process_group_at_the_timeout() {
    // A grandchild in the same group would outlive a kill of the child alone; its odd sleep
    // time marks it (the child may write no file: its RLIMIT_FSIZE is 0).
    let marker = format!("{}.{}", 900 + std::process::id() % 90, std::process::id());
    let script = format!("sleep {marker} & wait");
    let conversion = tokio::spawn(async move { run_shell(&script, &limits(2)).await });
    wait_for("the grandchild to start", || {
        processes_with_arg(&marker) == 1
    })
    .await;
    let out = conversion.await.unwrap();
    assert_eq!(out, Err(ConvertError::TimedOut { seconds: 2 }));
    wait_for("the grandchild to die", || processes_with_arg(&marker) == 0).await;
}

#[tokio::test]
async fn output_past_the_cap_stops_the_child() {
    let started = Instant::now();
    let out = run_shell("yes converted", &limits(20)).await;
    assert_eq!(out, Err(ConvertError::OutputTooLarge { limit_mb: 1 }));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn the_address_space_limit_applies_to_the_child() {
    // dd allocates its 300 MB buffer at once: refused under 256 MiB, fine under 1 GiB.
    let script = "dd if=/dev/zero of=/dev/null bs=300M count=1 status=none && echo copied";
    let limited = run_shell(script, &limits(20)).await;
    assert!(
        matches!(&limited, Err(ConvertError::Crashed { .. })),
        "{limited:?}"
    );
    let roomy = Limits {
        memory_mb: 1024,
        ..limits(20)
    };
    assert_eq!(run_shell(script, &roomy).await.unwrap().trim(), "copied");
}

#[tokio::test]
async fn slots_bound_concurrent_children_and_a_long_wait_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let script = format!("touch {}; sleep 3", started.display());
    let converter = Converter::new(Program::custom("/bin/sh", ["-c", &script, "c"]), 1);
    let first = {
        let converter = converter.clone();
        tokio::spawn(async move {
            converter
                .convert(Kind::Pdf, Input::Bytes(Vec::new()), &limits(10))
                .await
        })
    };
    wait_for("the first child", || started.exists()).await;
    let second = converter
        .convert(Kind::Pdf, Input::Bytes(Vec::new()), &limits(1))
        .await;
    assert_eq!(second, Err(ConvertError::Busy { seconds: 1 }));
    assert_eq!(first.await.unwrap(), Ok(String::new()));
}

#[tokio::test]
async fn a_missing_program_is_unavailable_and_the_seam_replaces_it() {
    let converter = Converter::new(Program::antler("/nonexistent/antler"), 1);
    let out = converter
        .convert(Kind::Html, Input::Bytes(b"<p>x</p>".to_vec()), &limits(5))
        .await;
    assert!(
        matches!(out, Err(ConvertError::Unavailable { .. })),
        "{out:?}"
    );
    converter.set_program(Program::custom(
        "/bin/sh",
        ["-c", "printf 'T\\n0\\nok'", "c"],
    ));
    let page = converter
        .convert_page(b"<p>x</p>".to_vec(), &limits(5))
        .await
        .unwrap();
    assert_eq!(
        (page.title.as_deref(), page.markdown.as_str()),
        (Some("T"), "ok")
    );
}
