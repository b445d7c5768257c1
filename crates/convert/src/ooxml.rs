//! Word and PowerPoint text through zip + quick-xml, in the converter child: paragraphs,
//! headings, list items and tables of `word/document.xml`; the text of `ppt/slides/slideN.xml`
//! in slide order.

use std::io::{Cursor, Read};

use quick_xml::Reader;
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesRef, BytesStart, Event};

use crate::documents::{MAX_PART_BYTES, markdown_table};

type Archive<'a> = zip::ZipArchive<Cursor<&'a [u8]>>;

fn open(bytes: &[u8]) -> Result<Archive<'_>, String> {
    zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| format!("not a valid zip archive: {e}"))
}

/// One member as UTF-8 text, refusing members that inflate past [`MAX_PART_BYTES`].
fn read_part(archive: &mut Archive<'_>, name: &str) -> Result<String, String> {
    let part = archive
        .by_name(name)
        .map_err(|e| format!("missing {name}: {e}"))?;
    let mut text = String::new();
    part.take(MAX_PART_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {name}: {e}"))?;
    if text.len() as u64 > MAX_PART_BYTES {
        let mib = MAX_PART_BYTES / (1024 * 1024);
        return Err(format!("{name} inflates past {mib} MiB"));
    }
    Ok(text)
}

/// quick-xml 0.42 reports `&amp;`, `&#x41;` … as separate events; without this they vanish.
fn entity_text(reference: &BytesRef<'_>) -> String {
    if let Ok(Some(c)) = reference.resolve_char_ref() {
        return c.to_string();
    }
    let name = reference.xml10_content();
    resolve_predefined_entity(&name)
        .map(str::to_string)
        .unwrap_or_default()
}

fn local(e: &BytesStart<'_>) -> String {
    e.local_name().as_ref().to_string()
}

fn attribute(e: &BytesStart<'_>, key: &str) -> Option<String> {
    e.try_get_attribute(key)
        .ok()
        .flatten()
        .map(|a| a.value.into_owned())
}

/// Markdown prefix for a Word paragraph style (`Heading2` → `## `, `Title` → `# `).
fn heading_prefix(style: &str) -> Option<String> {
    if style.eq_ignore_ascii_case("title") {
        return Some("# ".into());
    }
    let level: usize = style
        .strip_prefix("Heading")
        .or_else(|| style.strip_prefix("heading"))?
        .trim()
        .parse()
        .ok()?;
    Some(format!("{} ", "#".repeat(level.clamp(1, 6))))
}

#[derive(Default)]
struct Table {
    rows: Vec<Vec<String>>,
    row: Vec<String>,
    cell: Vec<String>,
}

#[derive(Default)]
struct Paragraph {
    text: String,
    style: Option<String>,
    list: bool,
}

pub(crate) fn docx_to_markdown(bytes: &[u8]) -> Result<String, String> {
    let mut archive = open(bytes)?;
    let xml = read_part(&mut archive, "word/document.xml")?;
    let mut reader = Reader::from_str(&xml);
    let mut blocks: Vec<String> = Vec::new();
    let mut tables: Vec<Table> = Vec::new();
    let mut para = Paragraph::default();
    let mut in_text = false;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("malformed word/document.xml: {e}"))?;
        match event {
            Event::Eof => break,
            Event::Start(e) => match local(&e).as_str() {
                "p" => para = Paragraph::default(),
                "t" => in_text = true,
                "pStyle" => para.style = attribute(&e, "w:val"),
                "numPr" => para.list = true,
                "tbl" => tables.push(Table::default()),
                "tr" => {
                    if let Some(t) = tables.last_mut() {
                        t.row.clear();
                    }
                }
                "tc" => {
                    if let Some(t) = tables.last_mut() {
                        t.cell.clear();
                    }
                }
                _ => {}
            },
            Event::Empty(e) => match local(&e).as_str() {
                "pStyle" => para.style = attribute(&e, "w:val"),
                "numPr" => para.list = true,
                "tab" => para.text.push('\t'),
                "br" | "cr" => para.text.push('\n'),
                _ => {}
            },
            Event::Text(t) if in_text => para.text.push_str(&t.xml10_content()),
            Event::CData(t) if in_text => para.text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if in_text => para.text.push_str(&entity_text(&r)),
            Event::End(e) => match e.local_name().as_ref() {
                "t" => in_text = false,
                "p" => {
                    let text = std::mem::take(&mut para.text);
                    let text = text.trim();
                    if let Some(table) = tables.last_mut() {
                        if !text.is_empty() {
                            table.cell.push(text.to_string());
                        }
                    } else if !text.is_empty() {
                        let prefix = match para.style.as_deref().and_then(heading_prefix) {
                            Some(heading) => heading,
                            None if para.list => "- ".to_string(),
                            None => String::new(),
                        };
                        blocks.push(format!("{prefix}{text}"));
                    }
                }
                "tc" => {
                    if let Some(t) = tables.last_mut() {
                        let cell = std::mem::take(&mut t.cell).join("<br>");
                        t.row.push(cell);
                    }
                }
                "tr" => {
                    if let Some(t) = tables.last_mut() {
                        let row = std::mem::take(&mut t.row);
                        t.rows.push(row);
                    }
                }
                "tbl" => {
                    let Some(table) = tables.pop() else {
                        continue;
                    };
                    match tables.last_mut() {
                        // A table inside a cell becomes text of that cell.
                        Some(outer) => outer.cell.push(
                            table
                                .rows
                                .iter()
                                .map(|r| r.join(", "))
                                .collect::<Vec<_>>()
                                .join("; "),
                        ),
                        None if !table.rows.is_empty() => {
                            blocks.push(markdown_table(&table.rows).trim_end().to_string());
                        }
                        None => {}
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
    Ok(blocks.join("\n\n"))
}

pub(crate) fn pptx_to_markdown(bytes: &[u8]) -> Result<String, String> {
    let mut archive = open(bytes)?;
    // Slides are numbered in their file names; the archive order is arbitrary.
    let mut slides: Vec<(u32, String)> = archive
        .file_names()
        .filter_map(|name| {
            let name = name.ok()?;
            let number = name
                .strip_prefix("ppt/slides/slide")?
                .strip_suffix(".xml")?
                .parse()
                .ok()?;
            Some((number, name.to_string()))
        })
        .collect();
    if slides.is_empty() {
        return Err("no slides found under ppt/slides/".into());
    }
    slides.sort();
    let mut out = String::new();
    for (number, name) in slides {
        let xml = read_part(&mut archive, &name)?;
        let paragraphs = slide_paragraphs(&xml).map_err(|e| format!("malformed {name}: {e}"))?;
        out.push_str(&format!("## Slide {number}\n\n"));
        for paragraph in paragraphs {
            out.push_str(&paragraph);
            out.push_str("\n\n");
        }
    }
    Ok(out)
}

fn slide_paragraphs(xml: &str) -> Result<Vec<String>, quick_xml::Error> {
    let mut reader = Reader::from_str(xml);
    let mut paragraphs = Vec::new();
    let mut current = String::new();
    let mut in_text = false;
    loop {
        match reader.read_event()? {
            Event::Eof => break,
            Event::Start(e) if e.local_name().as_ref() == "t" => in_text = true,
            Event::Start(e) if e.local_name().as_ref() == "p" => current.clear(),
            Event::Empty(e) if e.local_name().as_ref() == "br" => current.push('\n'),
            Event::Text(t) if in_text => current.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if in_text => current.push_str(&entity_text(&r)),
            Event::End(e) if e.local_name().as_ref() == "t" => in_text = false,
            Event::End(e) if e.local_name().as_ref() == "p" => {
                let text = current.trim();
                if !text.is_empty() {
                    paragraphs.push(text.to_string());
                }
                current.clear();
            }
            _ => {}
        }
    }
    Ok(paragraphs)
}
