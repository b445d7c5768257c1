//! Uploads converted through the real converter child (the `antler` binary's `convert`), from
//! an in-process caller: the seam a harness outside the binary uses, the Markdown copy beside
//! the original, and originals left alone when a conversion fails.

use std::path::Path;

use serde_json::{Value, json};

use antler::config::AppConfig;
use antler::files::uploads::convert::{UploadConvertError, convert_listed_uploads, convert_upload};
use antler_convert::{ConvertError, Converter, Input, Kind, Limits, Program};
use antler_test_support::documents::{docx, docx_bomb, xlsx_bomb, zip_of};

fn converter() -> Converter {
    Converter::new(Program::antler(env!("CARGO_BIN_EXE_antler")), 2)
}

fn markdown_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_copy_is_written_beside_the_upload_without_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let upload = dir.path().join("report.docx");
    std::fs::write(&upload, docx()).unwrap();
    std::fs::write(dir.path().join("report.md"), "my own notes").unwrap();

    let md = convert_upload(&converter(), &Limits::default(), &upload)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(md, dir.path().join("report_1.md"));
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(
        text.starts_with("# report.docx\n\n# Quarterly report\n\n"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("report.md")).unwrap(),
        "my own notes",
        "an existing file is never overwritten"
    );
    let txt = dir.path().join("plain.txt");
    std::fs::write(&txt, "x").unwrap();
    let none = convert_upload(&converter(), &Limits::default(), &txt).await;
    assert!(matches!(none, Ok(None)), "{none:?}");
}

#[tokio::test]
async fn failed_conversions_keep_the_original_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("broken.pdf", b"%PDF-1.4\nthis is not a pdf".to_vec(), ""),
        (
            "broken.docx",
            b"PK\x03\x04 truncated".to_vec(),
            "not a readable Word document",
        ),
        (
            "empty.pptx",
            zip_of(&[("ppt/presentation.xml", "<p/>")]),
            "no slides found",
        ),
        ("bomb.xlsx", xlsx_bomb(1000), "needed more than 256 MiB"),
    ];
    let limits = Limits {
        memory_mb: 256,
        ..Limits::default()
    };
    for (name, bytes, reason) in &cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let error = convert_upload(&converter(), &limits, &path)
            .await
            .unwrap_err();
        assert!(
            matches!(error, UploadConvertError::Convert(_)),
            "{name}: {error}"
        );
        assert!(error.to_string().contains(reason), "{name}: {error}");
        assert_eq!(&std::fs::read(&path).unwrap(), bytes, "{name} untouched");
    }
    assert!(markdown_files(dir.path()).is_empty());
}

#[tokio::test]
async fn listed_uploads_get_their_copy_or_their_reason_only_when_conversion_is_on() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.docx"), docx()).unwrap();
    std::fs::write(dir.path().join("b.docx"), docx_bomb(80)).unwrap();
    std::fs::write(dir.path().join("c.txt"), "plain").unwrap();
    let entries = || {
        vec![
            json!({"filename": "a.docx"}),
            json!({"filename": "b.docx"}),
            json!({"filename": "c.txt"}),
        ]
    };
    let mut off = entries();
    convert_listed_uploads(&converter(), &AppConfig::default(), dir.path(), &mut off).await;
    assert_eq!(off, entries(), "auto_convert_documents is off by default");

    let mut config = AppConfig::default();
    config.uploads.auto_convert_documents = true;
    let mut files: Vec<Value> = entries();
    convert_listed_uploads(&converter(), &config, dir.path(), &mut files).await;
    assert_eq!(files[0]["markdown_path"], "/mnt/user-data/uploads/a.md");
    assert_eq!(files[0]["markdown_file"], "a.md");
    let why = files[1]["conversion_error"].as_str().unwrap();
    assert!(why.contains("word/document.xml inflates past"), "{why}");
    assert_eq!(files[2], json!({"filename": "c.txt"}));
    assert_eq!(markdown_files(dir.path()), ["a.md"]);

    // Entries that already say how their conversion went (a chat message handled again) are
    // left as they are: no second copy, no second attempt.
    let settled = files.clone();
    convert_listed_uploads(&converter(), &config, dir.path(), &mut files).await;
    assert_eq!(files, settled);
    assert_eq!(markdown_files(dir.path()), ["a.md"]);
}

#[tokio::test]
async fn a_page_converts_in_the_child_with_its_title() {
    let page = converter()
        .convert_page(
            b"<html><head><title>Tea</title></head><body><h1>Brew</h1><p>Hot.</p></body></html>"
                .to_vec(),
            &Limits::default(),
        )
        .await
        .unwrap();
    assert_eq!(page.title.as_deref(), Some("Tea"));
    assert_eq!(page.markdown, "# Brew\n\nHot.");
    assert_eq!(page.flattened, 0);
    let unknown = Converter::new(
        Program::custom(env!("CARGO_BIN_EXE_antler"), ["convert"]),
        1,
    )
    .convert(
        Kind::Pdf,
        Input::Bytes(b"not a pdf".to_vec()),
        &Limits::default(),
    )
    .await;
    assert!(
        matches!(
            unknown,
            Err(ConvertError::Unreadable { .. } | ConvertError::Crashed { .. })
        ),
        "{unknown:?}"
    );
}
