//! Uploaded documents (`.pdf`, `.docx`, `.xlsx`, `.pptx`) to a Markdown sibling the agent can
//! read with its file tools, when `uploads.auto_convert_documents` is on.
//!
//! Parsing untrusted documents is risky (the reference turns it off by default), so conversion
//! runs off the async runtime, inside `catch_unwind` (pdf-extract can panic on odd PDFs), reads
//! at most [`MAX_PART_BYTES`] of any archive member, and never touches the original: a failure
//! only means there is no `.md`.

mod ooxml;
#[cfg(test)]
mod tests;

use std::io::Cursor;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use calamine::{Data, Reader};

use crate::uploads::{split_extension, store_upload};

/// Extensions converted (lowercase, without the dot).
pub const CONVERTIBLE_EXTENSIONS: &[&str] = &["pdf", "docx", "xlsx", "pptx"];
/// Largest document read for conversion; bigger uploads are kept without a `.md`.
pub const MAX_DOCUMENT_BYTES: u64 = 50 * 1024 * 1024;
/// Largest decompressed archive member read (guards against zip bombs).
pub const MAX_PART_BYTES: u64 = 64 * 1024 * 1024;
/// Rows rendered per spreadsheet sheet; the rest are counted in a note.
const MAX_SHEET_ROWS: usize = 5_000;

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("could not read {name}: {message}")]
    Read { name: String, message: String },
    #[error("{name} is not a readable {kind} document ({message}); re-save it and upload it again")]
    Corrupt {
        name: String,
        kind: &'static str,
        message: String,
    },
    #[error("{name} is larger than {limit} bytes; it was kept without a Markdown copy")]
    TooLarge { name: String, limit: u64 },
    #[error("{name} contains no extractable text (a scanned PDF needs OCR first)")]
    NoText { name: String },
    #[error("the converter crashed on {name}; the file was kept as uploaded")]
    Panicked { name: String },
    #[error("could not write the Markdown copy of {name}: {message}")]
    Write { name: String, message: String },
    #[error("the conversion task was cancelled: {0}")]
    Cancelled(String),
}

/// The document kinds this module converts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocumentKind {
    Pdf,
    Docx,
    Xlsx,
    Pptx,
}

impl DocumentKind {
    /// The kind of `name` by its extension (case-insensitive), if it is convertible.
    pub fn of(name: &str) -> Option<Self> {
        let (_, ext) = split_extension(name);
        match ext.trim_start_matches('.').to_ascii_lowercase().as_str() {
            "pdf" => Some(Self::Pdf),
            "docx" => Some(Self::Docx),
            "xlsx" => Some(Self::Xlsx),
            "pptx" => Some(Self::Pptx),
            _ => None,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Pdf => "PDF",
            Self::Docx => "Word",
            Self::Xlsx => "Excel",
            Self::Pptx => "PowerPoint",
        }
    }
}

/// Converts the stored upload at `path` when it is a supported document, writing `{stem}.md`
/// beside it (`{stem}_1.md`, … when that name is taken) and returning the new file's path.
/// `Ok(None)`: not a convertible type. On error the original is untouched and no `.md` exists.
pub async fn convert_upload(path: &Path) -> Result<Option<PathBuf>, ConvertError> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || convert_upload_blocking(&path))
        .await
        .map_err(|e| ConvertError::Cancelled(e.to_string()))?
}

/// Converts each of `filenames` (already stored in `dir`) that is a supported document. A
/// failure is logged and skipped: the upload itself already succeeded. Returns the `.md` files
/// written.
pub async fn convert_stored_uploads(dir: &Path, filenames: &[String]) -> Vec<PathBuf> {
    let mut written = Vec::new();
    for name in filenames {
        match convert_upload(&dir.join(name)).await {
            Ok(Some(markdown)) => written.push(markdown),
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(file = %name, %error, "could not convert the upload to Markdown; kept as uploaded");
            }
        }
    }
    written
}

/// [`convert_upload`] for callers already off the async runtime.
pub fn convert_upload_blocking(path: &Path) -> Result<Option<PathBuf>, ConvertError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if DocumentKind::of(&name).is_none() {
        return Ok(None);
    }
    let read_error = |e: std::io::Error| ConvertError::Read {
        name: name.clone(),
        message: e.to_string(),
    };
    let size = std::fs::metadata(path).map_err(read_error)?.len();
    if size > MAX_DOCUMENT_BYTES {
        return Err(ConvertError::TooLarge {
            name,
            limit: MAX_DOCUMENT_BYTES,
        });
    }
    let bytes = std::fs::read(path).map_err(read_error)?;
    let Some(markdown) = document_to_markdown(&name, &bytes)? else {
        return Ok(None);
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let (stem, _) = split_extension(&name);
    let stored = store_upload(dir, &format!("{stem}.md"), markdown.as_bytes()).map_err(|e| {
        ConvertError::Write {
            name: name.clone(),
            message: e.to_string(),
        }
    })?;
    Ok(Some(dir.join(stored.filename)))
}

/// Markdown for the document `bytes` named `name`; `Ok(None)` when the type is not converted.
pub fn document_to_markdown(name: &str, bytes: &[u8]) -> Result<Option<String>, ConvertError> {
    let Some(kind) = DocumentKind::of(name) else {
        return Ok(None);
    };
    let corrupt = |message: String| ConvertError::Corrupt {
        name: name.to_string(),
        kind: kind.label(),
        message,
    };
    let converted = catch_unwind(AssertUnwindSafe(|| match kind {
        DocumentKind::Pdf => pdf_to_markdown(bytes),
        DocumentKind::Xlsx => xlsx_to_markdown(bytes),
        DocumentKind::Docx => ooxml::docx_to_markdown(bytes),
        DocumentKind::Pptx => ooxml::pptx_to_markdown(bytes),
    }));
    let body = match converted {
        Err(_) => {
            return Err(ConvertError::Panicked {
                name: name.to_string(),
            });
        }
        Ok(result) => result.map_err(corrupt)?,
    };
    if body.trim().is_empty() {
        return Err(ConvertError::NoText {
            name: name.to_string(),
        });
    }
    Ok(Some(format!("# {name}\n\n{}\n", body.trim_end())))
}

fn pdf_to_markdown(bytes: &[u8]) -> Result<String, String> {
    let pages = pdf_extract::extract_text_from_mem_by_pages(bytes).map_err(|e| e.to_string())?;
    let mut out = String::new();
    for (index, page) in pages.iter().enumerate() {
        let text = page.trim();
        if text.is_empty() {
            continue;
        }
        out.push_str(&format!("## Page {}\n\n{text}\n\n", index + 1));
    }
    Ok(out)
}

fn xlsx_to_markdown(bytes: &[u8]) -> Result<String, String> {
    let mut workbook =
        calamine::open_workbook_auto_from_rs(Cursor::new(bytes)).map_err(|e| e.to_string())?;
    let mut out = String::new();
    for sheet in workbook.sheet_names() {
        let range = workbook
            .worksheet_range(&sheet)
            .map_err(|e| e.to_string())?;
        out.push_str(&format!("## Sheet: {sheet}\n\n"));
        let rows: Vec<Vec<String>> = range
            .rows()
            .map(|row| row.iter().map(cell_text).collect())
            .collect();
        if rows.is_empty() {
            out.push_str("_(empty sheet)_\n\n");
            continue;
        }
        let shown = rows.len().min(MAX_SHEET_ROWS);
        out.push_str(&markdown_table(&rows[..shown]));
        if rows.len() > shown {
            out.push_str(&format!(
                "\n_… {} more rows not shown_\n",
                rows.len() - shown
            ));
        }
        out.push('\n');
    }
    Ok(out)
}

fn cell_text(cell: &Data) -> String {
    match cell {
        Data::Empty => String::new(),
        Data::Error(e) => format!("#{e:?}"),
        other => other.to_string(),
    }
}

/// A Markdown table with the first row as the header; ragged rows are padded.
pub(crate) fn markdown_table(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let line = |row: &[String]| {
        let cells: Vec<String> = (0..width)
            .map(|i| escape_cell(row.get(i).map(String::as_str).unwrap_or("")))
            .collect();
        format!("| {} |\n", cells.join(" | "))
    };
    let mut out = String::new();
    if let Some((header, body)) = rows.split_first() {
        out.push_str(&line(header));
        out.push_str(&format!("|{}\n", " --- |".repeat(width)));
        for row in body {
            out.push_str(&line(row));
        }
    }
    out
}

fn escape_cell(text: &str) -> String {
    text.trim()
        .replace('|', "\\|")
        .replace("\r\n", "<br>")
        .replace('\n', "<br>")
}
