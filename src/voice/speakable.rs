//! An answer as a voice can say it: Markdown marks dropped, what cannot be heard (code blocks,
//! tables, web addresses) replaced by a short mention of it, and a long answer cut on a
//! sentence or word boundary with a closing sentence saying the rest is in the text.

/// Said in place of a fenced code block.
pub const CODE_MENTION: &str = "See the code in the text.";
/// Said in place of a table.
pub const TABLE_MENTION: &str = "See the table in the text.";
/// Said in place of a web address.
pub const LINK_MENTION: &str = "a link";
/// Closes an answer spoken only in part.
pub const REST_IN_TEXT: &str = "The rest is in the text.";

/// `markdown` made speakable and cut to `max_chars` characters (the closing sentence
/// included); `true` when it was cut.
pub fn speakable(markdown: &str, max_chars: usize) -> (String, bool) {
    cut(&plain(markdown), max_chars)
}

/// The answer without Markdown: one line per spoken line, blank lines between paragraphs.
fn plain(markdown: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut lines = markdown.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if let Some(fence) = fence_of(trimmed) {
            // Everything up to the closing fence (or the end) is the block.
            for inner in lines.by_ref() {
                if inner.trim().starts_with(fence) {
                    break;
                }
            }
            out.push(CODE_MENTION.into());
            continue;
        }
        if is_table_row(trimmed) && lines.peek().is_some_and(|next| is_table_rule(next.trim())) {
            while lines.peek().is_some_and(|next| is_table_row(next.trim())) {
                lines.next();
            }
            out.push(TABLE_MENTION.into());
            continue;
        }
        if is_rule(trimmed) {
            continue;
        }
        let spoken = inline(strip_block_marks(trimmed));
        let spoken = spoken.trim();
        if spoken.is_empty() {
            if out.last().is_some_and(|last| !last.is_empty()) {
                out.push(String::new());
            }
        } else {
            out.push(spoken.to_string());
        }
    }
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    out.join("\n")
}

/// The fence a line opens (```` ``` ```` or `~~~`), if it opens one.
fn fence_of(line: &str) -> Option<&'static str> {
    if line.starts_with("```") {
        Some("```")
    } else if line.starts_with("~~~") {
        Some("~~~")
    } else {
        None
    }
}

fn is_table_row(line: &str) -> bool {
    line.starts_with('|') && line.len() > 1
}

/// `|---|:--:|` under a table's header.
fn is_table_rule(line: &str) -> bool {
    is_table_row(line)
        && line.contains('-')
        && line
            .chars()
            .all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
}

/// `---`, `***`, `___` alone on a line.
fn is_rule(line: &str) -> bool {
    let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    compact.len() >= 3
        && ["-", "*", "_"]
            .iter()
            .any(|mark| compact.chars().all(|c| c.to_string() == *mark))
}

/// A line without its heading, quote or bullet marks (a numbered item keeps its number).
fn strip_block_marks(line: &str) -> &str {
    let mut line = line;
    loop {
        let before = line;
        line = line.trim_start_matches('#').trim_start();
        line = line.strip_prefix('>').unwrap_or(line).trim_start();
        for bullet in ["- [ ] ", "- [x] ", "- ", "* ", "+ "] {
            if let Some(rest) = line.strip_prefix(bullet) {
                line = rest.trim_start();
            }
        }
        if line == before {
            return line;
        }
    }
}

/// Inline Markdown spoken: links as their text, images as their description, inline code as
/// its text, web addresses as a mention, emphasis marks dropped.
fn inline(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(['!', '[', '`', 'h', '*', '_', '~', '<']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let (spoken, used) = inline_at(tail, out.chars().last());
        out.push_str(&spoken);
        rest = &tail[used..];
    }
    out.push_str(rest);
    out
}

/// What `tail` starts with, spoken, and how many bytes it used (at least one).
fn inline_at(tail: &str, before: Option<char>) -> (String, usize) {
    let first = tail.chars().next().map_or(1, char::len_utf8);
    let image = tail.starts_with("![");
    if let Some((label, used)) = link(&tail[usize::from(image)..]) {
        let label = inline(label);
        let spoken = if label.trim().is_empty() || is_address(label.trim()) {
            if image { "an image" } else { LINK_MENTION }.to_string()
        } else {
            label
        };
        return (spoken, used + usize::from(image));
    }
    if let Some(code) = tail.strip_prefix('`')
        && let Some(end) = code.find('`')
    {
        return (code[..end].to_string(), end + 2);
    }
    // `<https://…>`, an autolink.
    if let Some(inner) = tail.strip_prefix('<')
        && let Some(end) = inner.find('>')
        && is_address(&inner[..end])
    {
        return (LINK_MENTION.into(), end + 2);
    }
    let word_start = before.is_none_or(|c| !c.is_alphanumeric());
    if word_start && (tail.starts_with("http://") || tail.starts_with("https://")) {
        let end = tail.find(char::is_whitespace).unwrap_or(tail.len());
        // A sentence's full stop after the address stays.
        let end = tail[..end]
            .trim_end_matches(['.', ',', ';', ':', '!', '?', ')'])
            .len();
        return (LINK_MENTION.into(), end);
    }
    for mark in ["**", "__", "~~", "*"] {
        if tail.starts_with(mark) {
            return (String::new(), mark.len());
        }
    }
    // `_emphasis_` only at a word's edge: snake_case stays as written.
    if let Some(rest) = tail.strip_prefix('_') {
        let after = rest.chars().next();
        let edge = word_start || after.is_none_or(|c| !c.is_alphanumeric());
        if edge {
            return (String::new(), 1);
        }
    }
    (tail[..first].to_string(), first)
}

/// `[label](destination)` at the start of `text`: the label and the bytes the link spans.
fn link(text: &str) -> Option<(&str, usize)> {
    let inner = text.strip_prefix('[')?;
    let mut depth = 0usize;
    let label_end = inner.char_indices().find_map(|(idx, c)| match c {
        '[' => {
            depth += 1;
            None
        }
        ']' if depth == 0 => Some(idx),
        ']' => {
            depth -= 1;
            None
        }
        _ => None,
    })?;
    let after = inner[label_end + 1..].strip_prefix('(')?;
    let dest_end = after.find(')')?;
    Some((&inner[..label_end], 1 + label_end + 2 + dest_end + 1))
}

fn is_address(text: &str) -> bool {
    text.starts_with("http://") || text.starts_with("https://") || text.starts_with("mailto:")
}

/// `text` cut to `max_chars` characters with [`REST_IN_TEXT`] closing it, on the last sentence
/// end that keeps at least half of the room, else on the last word boundary.
fn cut(text: &str, max_chars: usize) -> (String, bool) {
    if text.chars().count() <= max_chars {
        return (text.to_string(), false);
    }
    let note_chars = REST_IN_TEXT.chars().count() + 1;
    // Room too small for the note: the words alone.
    let room = if max_chars > note_chars * 2 {
        max_chars - note_chars
    } else {
        max_chars
    };
    let head_end = text
        .char_indices()
        .nth(room)
        .map_or(text.len(), |(idx, _)| idx);
    let head = &text[..head_end];
    let sentence_end = head
        .char_indices()
        .rev()
        .find(|(idx, c)| {
            matches!(c, '.' | '!' | '?' | '\n')
                && text[idx + c.len_utf8()..]
                    .chars()
                    .next()
                    .is_none_or(char::is_whitespace)
        })
        .map(|(idx, c)| idx + c.len_utf8())
        .filter(|end| head[..*end].chars().count() * 2 >= room);
    let end = sentence_end
        .or_else(|| head.rfind(char::is_whitespace).filter(|end| *end > 0))
        .unwrap_or(head.len());
    let mut spoken = head[..end].trim_end().to_string();
    if room < max_chars {
        if !spoken.ends_with(['.', '!', '?']) {
            spoken.push('.');
        }
        spoken.push(' ');
        spoken.push_str(REST_IN_TEXT);
    }
    (spoken, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_spoken_as_words() {
        let cases = [
            (
                "**Bold** and _soft_ and ~~gone~~.",
                "Bold and soft and gone.",
            ),
            ("# Title\n\nSome text.", "Title\n\nSome text."),
            ("- one\n- two\n* three", "one\ntwo\nthree"),
            ("1. first\n2. second", "1. first\n2. second"),
            ("> quoted words", "quoted words"),
            ("Use `cargo build` now.", "Use cargo build now."),
            ("See [the docs](https://x.example/a_b).", "See the docs."),
            (
                "Read https://x.example/page, then stop.",
                "Read a link, then stop.",
            ),
            ("At <https://x.example>.", "At a link."),
            ("![a cat](cat.png) and ![](x.png)!", "a cat and an image!"),
            ("[https://x.example](https://x.example)", "a link"),
            ("snake_case_name stays", "snake_case_name stays"),
            ("a\n\n---\n\nb", "a\n\nb"),
        ];
        for (markdown, spoken) in cases {
            assert_eq!(plain(markdown), spoken, "{markdown:?}");
        }
    }

    #[test]
    fn code_blocks_and_tables_become_a_mention() {
        let markdown = "Here:\n```rust\nfn main() {}\n```\nAnd a table:\n\n| a | b |\n|---|:-:|\n| 1 | 2 |\n\nDone.";
        assert_eq!(
            plain(markdown),
            format!("Here:\n{CODE_MENTION}\nAnd a table:\n\n{TABLE_MENTION}\n\nDone.")
        );
        // An unclosed fence hides the rest: it is all code.
        assert_eq!(plain("Look:\n```\nx = 1"), format!("Look:\n{CODE_MENTION}"));
        // A lone `|` line is prose.
        assert_eq!(plain("| not a table"), "| not a table");
    }

    #[test]
    fn a_long_answer_is_cut_on_a_sentence_with_the_note() {
        let text = "One sentence here. Another one follows. And a third that is long enough.";
        let (spoken, truncated) = speakable(text, 64);
        assert!(truncated);
        assert_eq!(
            spoken,
            format!("One sentence here. Another one follows. {REST_IN_TEXT}")
        );
        assert!(spoken.chars().count() <= 64);
        assert_eq!(speakable(text, 500), (text.to_string(), false));
    }

    #[test]
    fn without_a_sentence_end_the_cut_is_on_a_word() {
        let text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi";
        let (spoken, truncated) = speakable(text, 60);
        assert!(truncated);
        assert_eq!(
            spoken,
            format!("alpha beta gamma delta epsilon. {REST_IN_TEXT}")
        );
        assert!(spoken.chars().count() <= 60);
        // No room for the note: words only, still within the limit.
        let (spoken, _) = speakable(text, 12);
        assert_eq!(spoken, "alpha beta");
    }

    #[test]
    fn characters_not_bytes_are_counted() {
        let text = "Grüße aus München. Schöne Grüße zurück nach Köln und überall hin.";
        let (spoken, truncated) = speakable(text, 60);
        assert!(truncated);
        assert_eq!(spoken, format!("Grüße aus München. {REST_IN_TEXT}"));
    }
}
