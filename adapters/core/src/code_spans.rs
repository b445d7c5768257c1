//! Where the code is in a chat message's text (``` fenced blocks and `inline` spans, as Slack,
//! Discord and Telegram's Markdown write them): a mention typed inside code is not a mention,
//! and code is left as written when mentions are stripped.

/// A piece of a message's text, in order; the pieces joined give the text back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextPart<'a> {
    /// A fenced block or an inline span, its backticks included.
    Code(&'a str),
    /// Everything else.
    Prose(&'a str),
}

/// Splits `text` into prose and code. A fence (```) or a backtick without its closing partner
/// is literal text, as the platforms show it.
pub fn text_parts(text: &str) -> Vec<TextPart<'_>> {
    let mut parts = Vec::new();
    let mut prose_start = 0;
    let mut at = 0;
    while let Some(offset) = text[at..].find('`') {
        let open = at + offset;
        let marker = if text[open..].starts_with("```") {
            "```"
        } else {
            "`"
        };
        let body = open + marker.len();
        match text[body..].find(marker) {
            Some(len) => {
                let close = body + len + marker.len();
                if prose_start < open {
                    parts.push(TextPart::Prose(&text[prose_start..open]));
                }
                parts.push(TextPart::Code(&text[open..close]));
                prose_start = close;
                at = close;
            }
            None => at = body,
        }
    }
    if prose_start < text.len() {
        parts.push(TextPart::Prose(&text[prose_start..]));
    }
    parts
}

/// Whether `check` holds for some prose part of `text`.
pub fn any_prose(text: &str, check: impl Fn(&str) -> bool) -> bool {
    text_parts(text).into_iter().any(|part| match part {
        TextPart::Prose(prose) => check(prose),
        TextPart::Code(_) => false,
    })
}

/// `text` with its prose parts rewritten by `rewrite` and its code as written.
pub fn map_prose(text: &str, mut rewrite: impl FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    for part in text_parts(text) {
        match part {
            TextPart::Prose(prose) => out.push_str(&rewrite(prose)),
            TextPart::Code(code) => out.push_str(code),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::TextPart::{Code, Prose};
    use super::*;

    #[test]
    fn code_is_told_from_prose() {
        let cases: Vec<(&str, Vec<TextPart<'_>>)> = vec![
            ("plain", vec![Prose("plain")]),
            ("a `b` c", vec![Prose("a "), Code("`b`"), Prose(" c")]),
            (
                "x ```\nfn f() {}\n``` y",
                vec![Prose("x "), Code("```\nfn f() {}\n```"), Prose(" y")],
            ),
            ("```one line```", vec![Code("```one line```")]),
            ("it`s lone", vec![Prose("it`s lone")]),
            ("``` never closed", vec![Prose("``` never closed")]),
            (
                "```a``` and `b`",
                vec![Code("```a```"), Prose(" and "), Code("`b`")],
            ),
            ("", vec![]),
        ];
        for (text, expected) in cases {
            assert_eq!(text_parts(text), expected, "{text:?}");
            let joined: String = text_parts(text)
                .iter()
                .map(|part| match part {
                    Code(s) | Prose(s) => *s,
                })
                .collect();
            assert_eq!(joined, text);
        }
    }

    #[test]
    fn prose_helpers_leave_code_alone() {
        assert!(any_prose("hi @bot", |p| p.contains("@bot")));
        assert!(!any_prose("see `@bot`", |p| p.contains("@bot")));
        assert_eq!(
            map_prose("@bot ```@bot``` @bot", |p| p.replace("@bot", "")),
            " ```@bot``` "
        );
    }
}
