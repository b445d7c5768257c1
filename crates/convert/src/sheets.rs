//! Spreadsheets (`.xlsx`) to one Markdown table per sheet, read cell by cell, in the converter
//! child.
//!
//! calamine's `worksheet_range` builds a dense grid spanning the first and the last used cell:
//! a 1.4 KB workbook with a value in `A1` and one in `XFD1048576` asked for 512 GiB at once.
//! Read through its cell reader instead, a sheet costs what its cells do, never what its
//! corners span: the first [`MAX_SHEET_ROWS`] rows that hold a value are kept, at most
//! [`MAX_SHEET_COLUMNS`] columns of them are shown, and what is left out is counted in a note.

use std::io::Cursor;

use calamine::{Data, Reader, Xlsx, XlsxError};

use crate::documents::markdown_table;

/// Rows with a value rendered per sheet; the rest are counted in a note.
const MAX_SHEET_ROWS: usize = 5_000;
/// Columns rendered per sheet, from its leftmost used one; cells further right are counted.
const MAX_SHEET_COLUMNS: u32 = 256;

pub(crate) fn xlsx_to_markdown(bytes: &[u8]) -> Result<String, String> {
    let mut workbook: Xlsx<_> = Xlsx::new(Cursor::new(bytes)).map_err(|e| e.to_string())?;
    let mut out = String::new();
    for name in workbook.sheet_names() {
        let mut sheet = Sheet::default();
        match workbook.worksheet_cells_reader(&name) {
            Ok(mut cells) => {
                while let Some(cell) = cells.next_cell().map_err(|e| e.to_string())? {
                    let (row, column) = cell.get_position();
                    sheet.add(row, column, Data::from(cell.get_value().clone()));
                }
            }
            // A chart sheet or a dialog sheet: no cells.
            Err(XlsxError::NotAWorksheet(_)) => {}
            Err(error) => return Err(error.to_string()),
        }
        out.push_str(&format!("## Sheet: {name}\n\n"));
        out.push_str(&sheet.render());
        out.push('\n');
    }
    Ok(out)
}

/// The kept cells of one sheet, in the order the file lists them (row by row).
#[derive(Default)]
struct Sheet {
    /// Row number and its cells (column, text), for the first rows that hold a value.
    rows: Vec<(u32, Vec<(u32, String)>)>,
    /// Rows with a value after the kept ones.
    rows_not_shown: usize,
    /// The last row counted in `rows_not_shown`.
    last_skipped_row: Option<u32>,
}

impl Sheet {
    fn add(&mut self, row: u32, column: u32, value: Data) {
        let text = cell_text(&value);
        if text.trim().is_empty() {
            return;
        }
        let kept = self.rows.len();
        match self.rows.last_mut() {
            Some((last, cells)) if *last == row => cells.push((column, text)),
            _ if kept < MAX_SHEET_ROWS => self.rows.push((row, vec![(column, text)])),
            _ if self.last_skipped_row != Some(row) => {
                self.last_skipped_row = Some(row);
                self.rows_not_shown += 1;
            }
            _ => {}
        }
    }

    fn render(&self) -> String {
        let cells = || self.rows.iter().flat_map(|(_, cells)| cells.iter());
        let Some(first) = cells().map(|(column, _)| *column).min() else {
            return "_(empty sheet)_\n".to_string();
        };
        let last_shown = first.saturating_add(MAX_SHEET_COLUMNS - 1);
        let width = cells()
            .map(|(column, _)| *column)
            .filter(|column| *column <= last_shown)
            .max()
            .map_or(1, |last| (last - first + 1) as usize);
        let mut cut = 0;
        let mut table: Vec<Vec<String>> = Vec::with_capacity(self.rows.len());
        for (_, cells) in &self.rows {
            let mut line = vec![String::new(); width];
            let mut shown = false;
            for (column, text) in cells {
                match line.get_mut((column - first) as usize) {
                    Some(slot) => {
                        slot.clone_from(text);
                        shown = true;
                    }
                    None => cut += 1,
                }
            }
            // A row whose values are all right of the last column shown.
            if shown {
                table.push(line);
            }
        }
        let mut out = markdown_table(&table);
        if cut > 0 {
            out.push_str(&format!(
                "\n_… {} right of column {} not shown_\n",
                count(cut, "cell"),
                column_name(last_shown)
            ));
        }
        if self.rows_not_shown > 0 {
            out.push_str(&format!(
                "\n_… {} not shown_\n",
                count(self.rows_not_shown, "more row")
            ));
        }
        out
    }
}

/// "1 cell", "2 cells".
fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

fn cell_text(cell: &Data) -> String {
    match cell {
        Data::Empty => String::new(),
        Data::Error(e) => format!("#{e:?}"),
        other => other.to_string(),
    }
}

/// A column's letters as spreadsheets name it (0 is `A`, 26 is `AA`).
fn column_name(index: u32) -> String {
    let mut letters = Vec::new();
    let mut rest = u64::from(index) + 1;
    while rest > 0 {
        let digit = ((rest - 1) % 26) as u8;
        letters.push(b'A' + digit);
        rest = (rest - 1) / 26;
    }
    letters.iter().rev().map(|&b| char::from(b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_named_like_spreadsheets_do() {
        let names: Vec<String> = [0, 25, 26, 255, 16_383].map(column_name).to_vec();
        assert_eq!(names, ["A", "Z", "AA", "IV", "XFD"]);
    }

    #[test]
    fn a_sheet_costs_its_cells_not_the_span_of_its_corners() {
        let mut sheet = Sheet::default();
        sheet.add(0, 0, Data::String("corner".into()));
        sheet.add(0, 3, Data::Float(2.5));
        sheet.add(1, 2, Data::Empty);
        sheet.add(1_048_575, 16_383, Data::Int(1));
        assert_eq!(
            sheet.render(),
            "| corner |  |  | 2.5 |\n| --- | --- | --- | --- |\n\n\
             _… 1 cell right of column IV not shown_\n"
        );
    }

    #[test]
    fn rows_past_the_limit_are_counted_once_each() {
        let mut sheet = Sheet::default();
        for row in 0..(MAX_SHEET_ROWS as u32 + 3) {
            sheet.add(row, 0, Data::Int(i64::from(row)));
            sheet.add(row, 1, Data::Int(1));
        }
        let out = sheet.render();
        let lines = out.lines().filter(|l| l.starts_with("| ")).count();
        assert_eq!(lines, MAX_SHEET_ROWS + 1, "the rows and the separator");
        assert!(out.ends_with("\n_… 3 more rows not shown_\n"), "{out}");
        assert_eq!(Sheet::default().render(), "_(empty sheet)_\n");
    }
}
