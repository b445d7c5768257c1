//! PDF text through pdf-extract, and the Markdown tables spreadsheets and Word documents share.
//! Run only in the converter child (see `child`).

/// Largest decompressed archive member read (guards against zip bombs before the child's
/// memory limit has to).
pub(crate) const MAX_PART_BYTES: u64 = 64 * 1024 * 1024;

pub(crate) fn pdf_to_markdown(bytes: &[u8]) -> Result<String, String> {
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
