//! Conversion of generated documents: minimal OOXML written with the zip crate and a tiny PDF.

use std::io::Write;

use zip::write::SimpleFileOptions;

use super::*;

fn zip_of(parts: &[(&str, &str)]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, content) in parts {
        writer
            .start_file(*name, SimpleFileOptions::default())
            .unwrap();
        writer.write_all(content.as_bytes()).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

fn docx() -> Vec<u8> {
    let body = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document {W}><w:body>
<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Quarterly report</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">Revenue &amp; costs </w:t></w:r><w:r><w:t>rose &#x41;gain.</w:t></w:r></w:p>
<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/></w:numPr></w:pPr><w:r><w:t>first point</w:t></w:r></w:p>
<w:tbl>
<w:tr><w:tc><w:p><w:r><w:t>Region</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Sales</w:t></w:r></w:p></w:tc></w:tr>
<w:tr><w:tc><w:p><w:r><w:t>North|East</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>42</w:t></w:r></w:p></w:tc></w:tr>
</w:tbl>
<w:p><w:r><w:instrText>PAGE</w:instrText><w:t>The end</w:t></w:r></w:p>
</w:body></w:document>"#
    );
    zip_of(&[
        ("[Content_Types].xml", "<Types/>"),
        ("word/document.xml", &body),
    ])
}

fn slide(text: &[&str]) -> String {
    let paragraphs: String = text
        .iter()
        .map(|t| format!("<a:p><a:r><a:t>{t}</a:t></a:r></a:p>"))
        .collect();
    format!(
        r#"<p:sld xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"><p:cSld><p:spTree><p:sp><p:txBody>{paragraphs}</p:txBody></p:sp></p:spTree></p:cSld></p:sld>"#
    )
}

fn pptx() -> Vec<u8> {
    // Stored out of order, and slide10 after slide2 numerically.
    zip_of(&[
        ("ppt/slides/slide10.xml", &slide(&["Appendix"])),
        (
            "ppt/slides/slide1.xml",
            &slide(&["Roadmap", "Ship v1 in Q3"]),
        ),
        ("ppt/slides/slide2.xml", &slide(&["R&amp;D budget"])),
        ("ppt/slides/_rels/slide1.xml.rels", "<Relationships/>"),
    ])
}

fn xlsx() -> Vec<u8> {
    let sheet = |rows: &str| {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>{rows}</sheetData></worksheet>"#
        )
    };
    let inline = |r: &str, t: &str| format!(r#"<c r="{r}" t="inlineStr"><is><t>{t}</t></is></c>"#);
    let data = sheet(&format!(
        r#"<row r="1">{}{}</row><row r="2">{}<c r="B2"><v>3.5</v></c></row><row r="3">{}<c r="B3"><v>7</v></c></row>"#,
        inline("A1", "Item"),
        inline("B1", "Price"),
        inline("A2", "Tea"),
        inline("A3", "Cake")
    ));
    let notes = sheet(&format!(r#"<row r="1">{}</row>"#, inline("A1", "ok")));
    zip_of(&[
        (
            "[Content_Types].xml",
            r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/worksheets/sheet2.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>"#,
        ),
        (
            "_rels/.rels",
            r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#,
        ),
        (
            "xl/workbook.xml",
            r#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Prices" sheetId="1" r:id="rId1"/><sheet name="Notes" sheetId="2" r:id="rId2"/></sheets></workbook>"#,
        ),
        (
            "xl/_rels/workbook.xml.rels",
            r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet2.xml"/></Relationships>"#,
        ),
        ("xl/worksheets/sheet1.xml", &data),
        ("xl/worksheets/sheet2.xml", &notes),
    ])
}

/// A one-page PDF with correct xref offsets, showing `text` in Helvetica.
fn pdf(text: &str) -> Vec<u8> {
    let stream = format!("BT /F1 12 Tf 72 712 Td ({text}) Tj ET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_string(),
        format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_string(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n{object}\nendobj\n", i + 1).into_bytes());
    }
    let xref = out.len();
    out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).into_bytes());
    for offset in offsets {
        out.extend(format!("{offset:010} 00000 n \n").into_bytes());
    }
    out.extend(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .into_bytes(),
    );
    out
}

#[test]
fn docx_becomes_headings_paragraphs_lists_and_tables() {
    let md = document_to_markdown("report.docx", &docx())
        .unwrap()
        .unwrap();
    assert_eq!(
        md,
        "# report.docx\n\n# Quarterly report\n\nRevenue & costs rose Again.\n\n- first point\n\n\
         | Region | Sales |\n| --- | --- |\n| North\\|East | 42 |\n\nThe end\n"
    );
}

#[test]
fn pptx_slides_come_in_numeric_order() {
    let md = document_to_markdown("deck.PPTX", &pptx()).unwrap().unwrap();
    assert_eq!(
        md,
        "# deck.PPTX\n\n## Slide 1\n\nRoadmap\n\nShip v1 in Q3\n\n## Slide 2\n\nR&D budget\n\n\
         ## Slide 10\n\nAppendix\n"
    );
}

#[test]
fn xlsx_becomes_one_table_per_sheet() {
    let md = document_to_markdown("prices.xlsx", &xlsx())
        .unwrap()
        .unwrap();
    assert_eq!(
        md,
        "# prices.xlsx\n\n## Sheet: Prices\n\n| Item | Price |\n| --- | --- |\n| Tea | 3.5 |\n\
         | Cake | 7 |\n\n## Sheet: Notes\n\n| ok |\n| --- |\n"
    );
}

#[test]
fn pdf_text_is_extracted_per_page() {
    let md = document_to_markdown("invoice.pdf", &pdf("Hello PDF world, invoice #42"))
        .unwrap()
        .unwrap();
    assert!(md.starts_with("# invoice.pdf\n\n## Page 1\n\n"), "{md}");
    assert!(md.contains("Hello PDF world, invoice #42"), "{md}");
}

#[test]
fn other_types_are_not_converted() {
    assert!(document_to_markdown("notes.txt", b"hi").unwrap().is_none());
    assert!(
        document_to_markdown("archive.zip", b"PK")
            .unwrap()
            .is_none()
    );
    assert_eq!(DocumentKind::of("A.Docx"), Some(DocumentKind::Docx));
    assert_eq!(DocumentKind::of("docx"), None);
}

#[test]
fn markdown_tables_pad_ragged_rows() {
    let rows = vec![vec!["a".to_string()], vec!["1".into(), "2\n3".into()]];
    assert_eq!(
        markdown_table(&rows),
        "| a |  |\n| --- | --- |\n| 1 | 2<br>3 |\n"
    );
}

#[tokio::test]
async fn converted_copy_is_written_beside_the_upload_without_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let upload = dir.path().join("report.docx");
    std::fs::write(&upload, docx()).unwrap();
    std::fs::write(dir.path().join("report.md"), "my own notes").unwrap();

    let md = convert_upload(&upload).await.unwrap().unwrap();
    assert_eq!(md, dir.path().join("report_1.md"));
    assert!(
        std::fs::read_to_string(&md)
            .unwrap()
            .contains("# Quarterly report")
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("report.md")).unwrap(),
        "my own notes",
        "an existing file is never overwritten"
    );
    let txt = dir.path().join("plain.txt");
    std::fs::write(&txt, "x").unwrap();
    assert_eq!(convert_upload(&txt).await.unwrap(), None);
}

#[tokio::test]
async fn corrupt_documents_leave_the_original_and_no_markdown() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>); 4] = [
        ("broken.pdf", b"%PDF-1.4\nthis is not a pdf".to_vec()),
        ("broken.docx", b"PK\x03\x04 truncated".to_vec()),
        ("broken.xlsx", zip_of(&[("xl/workbook.xml", "<workbook")])),
        ("empty.pptx", zip_of(&[("ppt/presentation.xml", "<p/>")])),
    ];
    for (name, bytes) in &cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let error = convert_upload(&path).await.unwrap_err();
        assert!(
            matches!(
                error,
                ConvertError::Corrupt { .. } | ConvertError::Panicked { .. }
            ),
            "{name}: {error}"
        );
        assert_eq!(&std::fs::read(&path).unwrap(), bytes, "{name} untouched");
    }
    let written = convert_stored_uploads(
        dir.path(),
        &cases.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>(),
    )
    .await;
    assert!(written.is_empty());
    let mds = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "md")
        })
        .count();
    assert_eq!(mds, 0, "no Markdown file for a failed conversion");
}
