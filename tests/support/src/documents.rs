//! Documents for conversion tests: small valid `.docx`, `.pptx`, `.xlsx` and `.pdf` files, and
//! hostile ones (a PDF whose content stream inflates to gigabytes, a spreadsheet whose
//! dimension claims every cell of a sheet, Word and PowerPoint parts that inflate past any cap).
//!
//! A bomb is made without ever holding what it inflates to: one chunk is deflated once (a
//! sync flush ends it on a byte boundary, and it refers back only to itself), its bytes are
//! repeated, and the checksums are combined (zlib's `adler32_combine`, flate2's `Crc::combine`).

use std::io::{Cursor, Write};

use flate2::{Compress, Compression, Crc, FlushCompress};
use zip::write::SimpleFileOptions;

/// A zip archive of `parts` (name, content), deflated.
pub fn zip_of(parts: &[(&str, &str)]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, content) in parts {
        writer
            .start_file(*name, SimpleFileOptions::default())
            .expect("start a zip member");
        writer
            .write_all(content.as_bytes())
            .expect("write a zip member");
    }
    writer.finish().expect("finish the zip").into_inner()
}

const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

/// A Word document: a heading, a paragraph with entities, a list item, a table, a field.
pub fn docx() -> Vec<u8> {
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

/// A deck of three slides stored out of order (slide10 after slide2 numerically).
pub fn pptx() -> Vec<u8> {
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

fn worksheet(head: &str, rows: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">{head}<sheetData>{rows}</sheetData></worksheet>"#
    )
}

fn inline(cell: &str, text: &str) -> String {
    format!(r#"<c r="{cell}" t="inlineStr"><is><t>{text}</t></is></c>"#)
}

/// A workbook of `sheets` (name, worksheet XML).
fn workbook(sheets: &[(&str, String)]) -> Vec<u8> {
    let parts = workbook_parts(sheets);
    let parts: Vec<(&str, &str)> = parts
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect();
    zip_of(&parts)
}

/// The parts (name, XML) of a workbook of `sheets`.
fn workbook_parts(sheets: &[(&str, String)]) -> Vec<(String, String)> {
    let overrides: String = (1..=sheets.len())
        .map(|n| format!(r#"<Override PartName="/xl/worksheets/sheet{n}.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>"#))
        .collect();
    let content_types = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>{overrides}</Types>"#
    );
    let entries: String = sheets
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            format!(
                r#"<sheet name="{name}" sheetId="{n}" r:id="rId{n}"/>"#,
                n = i + 1
            )
        })
        .collect();
    let book = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets>{entries}</sheets></workbook>"#
    );
    let relations: String = (1..=sheets.len())
        .map(|n| format!(r#"<Relationship Id="rId{n}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet{n}.xml"/>"#))
        .collect();
    let book_rels = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{relations}</Relationships>"#
    );
    let mut parts = vec![
        ("[Content_Types].xml".to_string(), content_types),
        (
            "_rels/.rels".to_string(),
            r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#.to_string(),
        ),
        ("xl/workbook.xml".to_string(), book),
        ("xl/_rels/workbook.xml.rels".to_string(), book_rels),
    ];
    for (n, (_, xml)) in sheets.iter().enumerate() {
        parts.push((format!("xl/worksheets/sheet{}.xml", n + 1), xml.clone()));
    }
    parts
}

/// Two sheets: "Prices" (a header and two rows) and "Notes" (one cell).
pub fn xlsx() -> Vec<u8> {
    let prices = worksheet(
        "",
        &format!(
            r#"<row r="1">{}{}</row><row r="2">{}<c r="B2"><v>3.5</v></c></row><row r="3">{}<c r="B3"><v>7</v></c></row>"#,
            inline("A1", "Item"),
            inline("B1", "Price"),
            inline("A2", "Tea"),
            inline("A3", "Cake")
        ),
    );
    let notes = worksheet("", &format!(r#"<row r="1">{}</row>"#, inline("A1", "ok")));
    workbook(&[("Prices", prices), ("Notes", notes)])
}

/// A 1.4 KB workbook whose sheet claims `A1:XFD1048576` and has a cell at each corner: a
/// reader that sizes its grid by the dimension asks for 16,384 × 1,048,576 cells.
pub fn xlsx_huge_dimension() -> Vec<u8> {
    let sheet = worksheet(
        r#"<dimension ref="A1:XFD1048576"/>"#,
        &format!(
            r#"<row r="1">{}</row><row r="1048576"><c r="XFD1048576"><v>1</v></c></row>"#,
            inline("A1", "corner")
        ),
    );
    workbook(&[("Sheet1", sheet)])
}

/// A workbook whose `xl/sharedStrings.xml` holds one string of about `inflated_mib` MiB (the
/// reader keeps every shared string in memory before it reads a cell).
pub fn xlsx_bomb(inflated_mib: usize) -> Vec<u8> {
    let sheet = worksheet("", r#"<row r="1"><c r="A1" t="s"><v>0</v></c></row>"#);
    let strings = deflate_repeated(
        br#"<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="1" uniqueCount="1"><si><t>"#,
        &mib_of(b"all work and no play "),
        inflated_mib,
        b"</t></si></sst>",
    );
    let parts = workbook_parts(&[("Sheet1", sheet)]);
    let mut members: Vec<(&str, Member)> = parts
        .iter()
        .map(|(name, xml)| (name.as_str(), Member::stored(xml.as_bytes())))
        .collect();
    members.push(("xl/sharedStrings.xml", Member::Deflated(strings)));
    zip_raw(&members)
}

/// A one-page PDF with correct xref offsets whose content stream is `content` under
/// `filter` (`None`: plain).
fn pdf_with(content: &[u8], filter: Option<&str>) -> Vec<u8> {
    let filter = filter.map(|f| format!(" /Filter {f}")).unwrap_or_default();
    let objects: [Vec<u8>; 5] = [
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_vec(),
        [
            format!("<< /Length {}{filter} >>\nstream\n", content.len()).as_bytes(),
            content,
            b"\nendstream",
        ]
        .concat(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_vec(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n", i + 1).into_bytes());
        out.extend(object);
        out.extend(b"\nendobj\n");
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

/// A one-page PDF showing `text` in Helvetica.
pub fn pdf(text: &str) -> Vec<u8> {
    pdf_with(
        format!("BT /F1 12 Tf 72 712 Td ({text}) Tj ET").as_bytes(),
        None,
    )
}

/// A valid one-page PDF whose FlateDecode content stream inflates to about `inflated_mib` MiB
/// of text operators (about 1 KiB of deflate per MiB).
pub fn pdf_bomb(inflated_mib: usize) -> Vec<u8> {
    let line = b"72 712 Td (all work and no play makes a dull bomb) Tj\n";
    let deflated = deflate_repeated(b"BT /F1 12 Tf\n", &mib_of(line), inflated_mib, b"ET\n");
    let mut zlib = vec![0x78, 0xda];
    zlib.extend(&deflated.raw);
    zlib.extend(deflated.adler32.to_be_bytes());
    pdf_with(&zlib, Some("/FlateDecode"))
}

/// A Word document whose `word/document.xml` inflates to about `inflated_mib` MiB of text.
pub fn docx_bomb(inflated_mib: usize) -> Vec<u8> {
    let part = deflate_repeated(
        format!(r#"<?xml version="1.0"?><w:document {W}><w:body><w:p><w:r><w:t>"#).as_bytes(),
        &mib_of(b"all work and no play "),
        inflated_mib,
        b"</w:t></w:r></w:p></w:body></w:document>",
    );
    zip_raw(&[
        ("[Content_Types].xml", Member::stored(b"<Types/>")),
        ("word/document.xml", Member::Deflated(part)),
    ])
}

/// A deck whose `ppt/slides/slide1.xml` inflates to about `inflated_mib` MiB of text.
pub fn pptx_bomb(inflated_mib: usize) -> Vec<u8> {
    let part = deflate_repeated(
        br#"<p:sld xmlns:a="a" xmlns:p="p"><p:cSld><p:spTree><p:sp><p:txBody><a:p><a:r><a:t>"#,
        &mib_of(b"all work and no play "),
        inflated_mib,
        b"</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld></p:sld>",
    );
    zip_raw(&[("ppt/slides/slide1.xml", Member::Deflated(part))])
}

/// `unit` repeated to just under 1 MiB (whole units only, so chunks join seamlessly).
fn mib_of(unit: &[u8]) -> Vec<u8> {
    unit.repeat((1024 * 1024) / unit.len())
}

/// A raw deflate stream and the checksums of what it inflates to.
struct Deflated {
    raw: Vec<u8>,
    inflated_len: u64,
    crc32: u32,
    adler32: u32,
}

/// Deflates `prefix`, `count` copies of `chunk`, then `suffix`, deflating each piece once.
fn deflate_repeated(prefix: &[u8], chunk: &[u8], count: usize, suffix: &[u8]) -> Deflated {
    let piece = |data: &[u8]| {
        let mut compress = Compress::new(Compression::best(), false);
        // `compress_vec` writes into the spare capacity only: room for the worst case.
        let mut out = Vec::with_capacity(data.len() * 2 + 1024);
        compress
            .compress_vec(data, &mut out, FlushCompress::Sync)
            .expect("deflate a piece");
        assert_eq!(
            compress.total_in(),
            data.len() as u64,
            "the whole piece went in"
        );
        out
    };
    let (head, body, tail) = (piece(prefix), piece(chunk), piece(suffix));
    let mut raw = head;
    for _ in 0..count {
        raw.extend(&body);
    }
    raw.extend(tail);
    // An empty final block with fixed codes ends the stream.
    raw.extend([0x03, 0x00]);

    let crc_of = |data: &[u8]| {
        let mut crc = Crc::new();
        crc.update(data);
        crc
    };
    let (chunk_crc, mut crc) = (crc_of(chunk), crc_of(prefix));
    let (chunk_adler, mut adler) = (adler32(chunk), adler32(prefix));
    for _ in 0..count {
        crc.combine(&chunk_crc);
        adler = adler32_combine(adler, chunk_adler, chunk.len() as u64);
    }
    crc.combine(&crc_of(suffix));
    adler = adler32_combine(adler, adler32(suffix), suffix.len() as u64);
    Deflated {
        raw,
        inflated_len: (prefix.len() + chunk.len() * count + suffix.len()) as u64,
        crc32: crc.sum(),
        adler32: adler,
    }
}

const ADLER_BASE: u64 = 65_521;

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u64, 0u64);
    for &byte in data {
        a = (a + u64::from(byte)) % ADLER_BASE;
        b = (b + a) % ADLER_BASE;
    }
    ((b << 16) | a) as u32
}

/// zlib's `adler32_combine`: the checksum of `A || B` from those of `A` and `B` and B's length.
fn adler32_combine(first: u32, second: u32, second_len: u64) -> u32 {
    let base = ADLER_BASE;
    let rem = second_len % base;
    let mut sum1 = u64::from(first & 0xffff);
    let mut sum2 = (rem * sum1) % base;
    sum1 += u64::from(second & 0xffff) + base - 1;
    sum2 += u64::from(first >> 16) + u64::from(second >> 16) + base - rem;
    if sum1 >= base {
        sum1 -= base;
    }
    if sum1 >= base {
        sum1 -= base;
    }
    if sum2 >= base << 1 {
        sum2 -= base << 1;
    }
    if sum2 >= base {
        sum2 -= base;
    }
    (sum1 | (sum2 << 16)) as u32
}

/// A zip member written as is.
enum Member {
    Stored(Vec<u8>),
    Deflated(Deflated),
}

impl Member {
    fn stored(bytes: &[u8]) -> Self {
        Self::Stored(bytes.to_vec())
    }
}

/// A zip archive whose members are given already compressed (the zip writer would deflate
/// them again, holding all of it).
fn zip_raw(members: &[(&str, Member)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, member) in members {
        let (method, crc, data, size): (u16, u32, &[u8], u64) = match member {
            Member::Stored(bytes) => (0, crc_of_all(bytes), bytes, bytes.len() as u64),
            Member::Deflated(d) => (8, d.crc32, &d.raw, d.inflated_len),
        };
        let offset = out.len() as u32;
        let fields = |header: &mut Vec<u8>| {
            header.extend(method.to_le_bytes());
            header.extend(0u16.to_le_bytes()); // time
            header.extend(0x21u16.to_le_bytes()); // date: 1980-01-01
            header.extend(crc.to_le_bytes());
            header.extend((data.len() as u32).to_le_bytes());
            header.extend((size as u32).to_le_bytes());
            header.extend((name.len() as u16).to_le_bytes());
            header.extend(0u16.to_le_bytes()); // extra field length
        };
        out.extend(0x0403_4b50u32.to_le_bytes());
        out.extend(20u16.to_le_bytes()); // version needed
        out.extend(0u16.to_le_bytes()); // flags
        fields(&mut out);
        out.extend(name.as_bytes());
        out.extend(data);

        central.extend(0x0201_4b50u32.to_le_bytes());
        central.extend(20u16.to_le_bytes()); // version made by
        central.extend(20u16.to_le_bytes()); // version needed
        central.extend(0u16.to_le_bytes()); // flags
        fields(&mut central);
        central.extend(0u16.to_le_bytes()); // comment length
        central.extend(0u16.to_le_bytes()); // disk
        central.extend(0u16.to_le_bytes()); // internal attributes
        central.extend(0u32.to_le_bytes()); // external attributes
        central.extend(offset.to_le_bytes());
        central.extend(name.as_bytes());
    }
    let central_offset = out.len() as u32;
    let count = members.len() as u16;
    out.extend(&central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend(0u16.to_le_bytes()); // this disk
    out.extend(0u16.to_le_bytes()); // disk of the central directory
    out.extend(count.to_le_bytes());
    out.extend(count.to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend(central_offset.to_le_bytes());
    out.extend(0u16.to_le_bytes()); // comment length
    out
}

fn crc_of_all(bytes: &[u8]) -> u32 {
    let mut crc = Crc::new();
    crc.update(bytes);
    crc.sum()
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn a_bomb_inflates_to_what_it_says_with_valid_checksums() {
        let pdf = pdf_bomb(3);
        let start = pdf.windows(7).position(|w| w == b"stream\n").unwrap() + 7;
        let end = pdf.windows(10).position(|w| w == b"\nendstream").unwrap();
        let mut inflated = Vec::new();
        flate2::read::ZlibDecoder::new(&pdf[start..end])
            .read_to_end(&mut inflated)
            .expect("a valid zlib stream, adler32 included");
        assert!(inflated.len() > 3 * 1_000_000 && inflated.len() < 3 * 1024 * 1024 + 100);
        assert!(inflated.starts_with(b"BT /F1 12 Tf\n72 712 Td ("));
        assert!(inflated.ends_with(b") Tj\nET\n"));
        assert!(pdf.len() < 20 * 1024, "{} bytes", pdf.len());

        let docx = docx_bomb(2);
        let mut archive = zip::ZipArchive::new(Cursor::new(docx)).unwrap();
        let mut text = String::new();
        archive
            .by_name("word/document.xml")
            .unwrap()
            .read_to_string(&mut text)
            .expect("the member's CRC-32 and size match");
        assert!(text.len() > 2_000_000 && text.ends_with("</w:document>"));
    }

    #[test]
    fn the_huge_dimension_workbook_is_small() {
        let bytes = xlsx_huge_dimension();
        assert!(bytes.len() < 2048, "{} bytes", bytes.len());
    }
}
