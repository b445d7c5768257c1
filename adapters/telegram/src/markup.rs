//! Markdown (as models write it) → Telegram HTML. Always produces balanced tags, so a partial
//! answer mid-stream renders too; the sender falls back to plain text if Telegram still refuses.

use std::sync::OnceLock;

use regex::Regex;

/// Converts fenced code, inline code, bold, italics, links and headings; escapes the rest.
pub fn to_html(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len() + 32);
    // `Some(true)`: inside a fence with a language (`<pre><code>`), `Some(false)`: bare `<pre>`.
    let mut fence: Option<bool> = None;
    // No newline before the first line of the text or of a code block.
    let mut at_block_start = true;
    for line in markdown.split('\n') {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            match fence.take() {
                Some(with_code) => {
                    out.push_str(if with_code { "</code></pre>" } else { "</pre>" });
                    at_block_start = false;
                }
                None => {
                    if !at_block_start {
                        out.push('\n');
                    }
                    let lang = info.trim();
                    let valid = !lang.is_empty()
                        && lang
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "+-_#.".contains(c));
                    if valid {
                        out.push_str(&format!("<pre><code class=\"language-{lang}\">"));
                    } else {
                        out.push_str("<pre>");
                    }
                    fence = Some(valid);
                    at_block_start = true;
                }
            }
            continue;
        }
        if !at_block_start {
            out.push('\n');
        }
        at_block_start = false;
        if fence.is_some() {
            out.push_str(&escape(line));
        } else {
            out.push_str(&inline(line));
        }
    }
    if let Some(with_code) = fence {
        out.push_str(if with_code { "</code></pre>" } else { "</pre>" });
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn inline(line: &str) -> String {
    static HEADING: OnceLock<Regex> = OnceLock::new();
    let heading = HEADING
        .get_or_init(|| Regex::new(r"^#{1,6}\s+(.+)$").unwrap_or_else(|_| unreachable_regex()));
    if let Some(caps) = heading.captures(line) {
        return format!("<b>{}</b>", spans(&caps[1]));
    }
    spans(line)
}

/// Code spans stay literal; the text between them gets emphasis and links. An unpaired last
/// backtick is ordinary text.
fn spans(line: &str) -> String {
    let unpaired = line.matches('`').count() % 2 == 1;
    let (body, tail) = match line.rfind('`') {
        Some(idx) if unpaired => (&line[..idx], &line[idx..]),
        _ => (line, ""),
    };
    let mut out = String::new();
    for (idx, part) in body.split('`').enumerate() {
        if idx % 2 == 1 {
            out.push_str(&format!("<code>{}</code>", escape(part)));
        } else {
            out.push_str(&emphasis(&escape(part)));
        }
    }
    out.push_str(&emphasis(&escape(tail)));
    out
}

fn emphasis(text: &str) -> String {
    static RULES: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    let rules = RULES.get_or_init(|| {
        [
            (
                r"\[([^\]]+)\]\((https?://[^)\s\x22]+)\)",
                "<a href=\"$2\">$1</a>",
            ),
            (r"\*\*([^*]+?)\*\*", "<b>$1</b>"),
            (r"__([^_]+?)__", "<b>$1</b>"),
            (r"~~([^~]+?)~~", "<s>$1</s>"),
            (r"(^|[\s(])\*([^*\s][^*]*?)\*", "$1<i>$2</i>"),
        ]
        .into_iter()
        .filter_map(|(pattern, replacement)| Some((Regex::new(pattern).ok()?, replacement)))
        .collect()
    });
    let mut out = text.to_string();
    for (regex, replacement) in rules {
        out = regex.replace_all(&out, *replacement).into_owned();
    }
    out
}

fn unreachable_regex() -> Regex {
    // Only reached if a constant pattern above failed to compile; match nothing then.
    Regex::new("$^").unwrap_or_else(|_| unreachable_regex())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_of_conversions() {
        let cases = [
            ("plain text", "plain text"),
            ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
            ("**bold** and *italic*", "<b>bold</b> and <i>italic</i>"),
            ("snake_case_name stays", "snake_case_name stays"),
            ("2 * 3 * 4", "2 * 3 * 4"),
            ("use `a<b>` here", "use <code>a&lt;b&gt;</code> here"),
            ("an odd ` backtick", "an odd ` backtick"),
            (
                "[docs](https://x.test/a?b=1&c=2)",
                "<a href=\"https://x.test/a?b=1&amp;c=2\">docs</a>",
            ),
            ("## Title", "<b>Title</b>"),
            (
                "```rust\nlet a = 1 < 2;\n```",
                "<pre><code class=\"language-rust\">let a = 1 &lt; 2;</code></pre>",
            ),
            ("```\nx\n```\nafter", "<pre>x</pre>\nafter"),
            (
                "unclosed\n```py\nprint(1)",
                "unclosed\n<pre><code class=\"language-py\">print(1)</code></pre>",
            ),
            ("~~gone~~", "<s>gone</s>"),
        ];
        for (markdown, html) in cases {
            assert_eq!(to_html(markdown), html, "{markdown:?}");
        }
    }
}
