//! Markdown (as models write it) → Slack mrkdwn.
//!
//! Slack reads `&`, `<` and `>` as markup everywhere, code included, so they are always
//! escaped; a link becomes `<url|label>`, `**bold**` becomes `*bold*`, `*italic*` `_italic_`,
//! `~~gone~~` `~gone~`, a heading a bold line, a bullet `•`. Fences lose their language (Slack
//! shows none). A half-written answer mid-stream converts too: unmatched markers stay as typed.

use std::sync::OnceLock;

use regex::Regex;

/// Converts a Markdown answer to mrkdwn.
pub fn to_mrkdwn(markdown: &str) -> String {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in markdown.split('\n') {
        if line.trim_start().starts_with("```") {
            out.push("```".to_string());
            in_fence = !in_fence;
            continue;
        }
        out.push(if in_fence { escape(line) } else { block(line) });
    }
    // A fence still open (a cut or a half-streamed answer) is closed, so the code renders.
    if in_fence {
        out.push("```".to_string());
    }
    out.join("\n")
}

/// Headings, quotes, bullets and rules; the rest of the line is inline markup.
fn block(line: &str) -> String {
    static RULE: OnceLock<Option<Regex>> = OnceLock::new();
    static HEADING: OnceLock<Option<Regex>> = OnceLock::new();
    static BULLET: OnceLock<Option<Regex>> = OnceLock::new();
    let rule = RULE.get_or_init(|| Regex::new(r"^\s*(-{3,}|\*{3,}|_{3,})\s*$").ok());
    let heading = HEADING.get_or_init(|| Regex::new(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$").ok());
    let bullet = BULLET.get_or_init(|| Regex::new(r"^(\s*)[-*+]\s+(.*)$").ok());
    if rule.as_ref().is_some_and(|r| r.is_match(line)) {
        return "──────────".into();
    }
    if let Some(title) = heading.as_ref().and_then(|r| r.captures(line)) {
        let title = title[1].replace("**", "").replace("__", "");
        return format!("*{}*", inline(&title));
    }
    if let Some(item) = bullet.as_ref().and_then(|r| r.captures(line)) {
        return format!("{}• {}", &item[1], inline(&item[2]));
    }
    if let Some(quoted) = line.strip_prefix('>') {
        return format!(">{}", inline(quoted));
    }
    inline(line)
}

/// Inline code stays literal (escaped); links, emphasis and strike-through are converted.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(start) = rest.find('`') {
        let Some(len) = rest[start + 1..].find('`') else {
            break;
        };
        out.push_str(&emphasis(&rest[..start]));
        out.push('`');
        out.push_str(&escape(&rest[start + 1..start + 1 + len]));
        out.push('`');
        rest = &rest[start + len + 2..];
    }
    out.push_str(&emphasis(rest));
    out
}

fn emphasis(text: &str) -> String {
    static LINK: OnceLock<Option<Regex>> = OnceLock::new();
    static RULES: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    let link = LINK.get_or_init(|| Regex::new(r"\[([^\]]+)\]\(([^)\s]+)\)").ok());
    let rules = RULES.get_or_init(|| {
        [
            // Bold is marked with \u{1} first so the italic rule cannot take its asterisks.
            (r"\*\*([^*\s](?:[^*]*[^*\s])?)\*\*", "\u{1}$1\u{1}"),
            (r"(^|[^\w])__([^_\s](?:[^_]*[^_\s])?)__", "$1\u{1}$2\u{1}"),
            (r"(^|[\s(])\*([^*\s](?:[^*]*[^*\s])?)\*", "${1}_${2}_"),
            (r"~~([^~]+)~~", "~$1~"),
        ]
        .into_iter()
        .filter_map(|(pattern, replacement)| Some((Regex::new(pattern).ok()?, replacement)))
        .collect()
    });
    // Links first, out of the way of escaping and emphasis (their URLs have `_` and `*`).
    let mut links = Vec::new();
    let text = match link {
        Some(link) => link
            .replace_all(text, |caps: &regex::Captures<'_>| {
                let label = escape(&caps[1]).replace('|', "¦");
                let url = escape(&caps[2]).replace('|', "%7C");
                links.push(format!("<{url}|{label}>"));
                format!("\u{2}{}\u{3}", links.len() - 1)
            })
            .into_owned(),
        None => text.to_string(),
    };
    let mut out = escape(&text);
    for (regex, replacement) in rules {
        out = regex.replace_all(&out, *replacement).into_owned();
    }
    let mut out = out.replace('\u{1}', "*");
    for (idx, link) in links.iter().enumerate() {
        out = out.replace(&format!("\u{2}{idx}\u{3}"), link);
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_of_conversions() {
        let cases = [
            ("plain text", "plain text"),
            ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
            ("**bold** and *italic*", "*bold* and _italic_"),
            ("__bold__ and _italic_", "*bold* and _italic_"),
            ("snake_case_name stays", "snake_case_name stays"),
            ("2 * 3 * 4", "2 * 3 * 4"),
            ("~~gone~~", "~gone~"),
            (
                "use `a<b>` and `**not bold**`",
                "use `a&lt;b&gt;` and `**not bold**`",
            ),
            ("an odd ` backtick", "an odd ` backtick"),
            (
                "[the docs](https://x.test/a_b?c=1&d=2)",
                "<https://x.test/a_b?c=1&amp;d=2|the docs>",
            ),
            ("see [a|b](https://x.test)", "see <https://x.test|a¦b>"),
            (
                "bare https://x.test/a_b_c stays",
                "bare https://x.test/a_b_c stays",
            ),
            ("## Title", "*Title*"),
            ("# **Bold** title #", "*Bold title*"),
            ("- one\n- two\n  * nested", "• one\n• two\n  • nested"),
            ("1. first\n2. second", "1. first\n2. second"),
            ("> quoted *text*", "> quoted _text_"),
            ("---", "──────────"),
            (
                "```rust\nlet a = 1 < 2 && **x**;\n```\nafter",
                "```\nlet a = 1 &lt; 2 &amp;&amp; **x**;\n```\nafter",
            ),
            (
                "unclosed\n```py\nprint(1<2)",
                "unclosed\n```\nprint(1&lt;2)\n```",
            ),
            ("**half-streamed bo", "**half-streamed bo"),
        ];
        for (markdown, mrkdwn) in cases {
            assert_eq!(to_mrkdwn(markdown), mrkdwn, "{markdown:?}");
        }
    }
}
