//! What the model wrote → what is posted: Discord renders Markdown itself, so the text passes
//! through, except that mass and role mentions are broken up and over-long text is fitted.
//!
//! Every message also goes out with `allowed_mentions: {parse: []}` (see `send`), so nothing
//! the bot posts can ping anyone; the escaping keeps `@everyone` from even looking like a
//! mention. Code (fenced blocks and inline spans) is left as written: mentions do not render
//! there, and code must stay exact.

use antler_channel::split_message;

/// A zero-width space: splits `@everyone` so Discord does not see a mention.
const BREAK: char = '\u{200B}';

/// Breaks `@everyone`, `@here` and role mentions (`<@&id>`) outside code.
pub fn escape_mentions(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut in_fence = false;
    for (idx, line) in text.split('\n').enumerate() {
        if idx > 0 {
            out.push('\n');
        }
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            out.push_str(line);
            continue;
        }
        if in_fence {
            out.push_str(line);
            continue;
        }
        for (part_idx, part) in line.split('`').enumerate() {
            if part_idx > 0 {
                out.push('`');
            }
            if part_idx % 2 == 1 {
                out.push_str(part);
            } else {
                out.push_str(&escape_plain(part));
            }
        }
    }
    out
}

fn escape_plain(text: &str) -> String {
    text.replace("@everyone", &format!("@{BREAK}everyone"))
        .replace("@here", &format!("@{BREAK}here"))
        .replace("<@&", &format!("<@{BREAK}&"))
}

/// The messages one text becomes: escaped, then split at `limit` characters (fences re-opened)
/// if escaping made it longer than the daemon's chunk.
pub(crate) fn messages(text: &str, limit: usize) -> Vec<String> {
    let escaped = escape_mentions(text);
    if escaped.chars().count() <= limit {
        return vec![escaped];
    }
    split_message(&escaped, limit)
}

/// One message's worth of `text` (an edit of the status message): escaped, and cut with an
/// ellipsis when too long.
pub(crate) fn single(text: &str, limit: usize) -> String {
    let escaped = escape_mentions(text);
    if escaped.chars().count() <= limit {
        return escaped;
    }
    let mut cut: String = escaped.chars().take(limit.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A thread's name from the message that starts it: its first line, at most 100 characters.
pub fn thread_name(text: &str) -> String {
    let first = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let name: String = first.chars().take(100).collect();
    if name.trim().is_empty() {
        "Conversation".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mass_and_role_mentions_are_broken_outside_code() {
        let cases = [
            ("hello @everyone", "hello @\u{200B}everyone"),
            ("@here now", "@\u{200B}here now"),
            ("ping <@&123> and <@456>", "ping <@\u{200B}&123> and <@456>"),
            ("code `@everyone` stays", "code `@everyone` stays"),
            (
                "```\n@everyone in a block\n```\n@here after",
                "```\n@everyone in a block\n```\n@\u{200B}here after",
            ),
            ("plain text", "plain text"),
        ];
        for (input, expected) in cases {
            assert_eq!(escape_mentions(input), expected, "{input:?}");
        }
    }

    fn fences_balanced(chunk: &str) -> bool {
        chunk
            .lines()
            .filter(|line| line.trim_start().starts_with("```"))
            .count()
            % 2
            == 0
    }

    #[test]
    fn a_long_answer_splits_at_2000_with_fences_reopened() {
        let code: String = (0..150)
            .map(|i| format!("let value_{i:03} = {i};\n"))
            .collect();
        let text = format!(
            "{}\n```rust\n{code}```\n{}",
            "intro line\n".repeat(60),
            "outro line\n".repeat(60)
        );
        assert!(text.chars().count() > 4000);
        let chunks = split_message(&text, 2000);
        assert_eq!(chunks.len(), 3);
        for chunk in &chunks {
            assert!(chunk.chars().count() <= 2000);
            assert!(fences_balanced(chunk), "unbalanced fence in {chunk:?}");
        }
        let reopened = chunks.iter().skip(1).any(|c| c.starts_with("```rust\n"));
        assert!(reopened, "the code block continues with its language");
    }

    #[test]
    fn escaping_that_overflows_splits_again() {
        let text = "@everyone ".repeat(200);
        assert_eq!(text.chars().count(), 2000);
        let parts = messages(&text, 2000);
        assert_eq!(parts.len(), 2, "200 breaks do not fit one message");
        assert!(parts.iter().all(|p| p.chars().count() <= 2000));
        assert!(!parts.concat().contains("@everyone"));
        let edit = single(&text, 2000);
        assert_eq!(edit.chars().count(), 2000);
        assert!(edit.ends_with('…'));
    }

    #[test]
    fn thread_names_come_from_the_first_line() {
        assert_eq!(thread_name("\n  what is up?\nmore"), "what is up?");
        assert_eq!(thread_name(&"x".repeat(150)).chars().count(), 100);
        assert_eq!(thread_name("   "), "Conversation");
    }
}
