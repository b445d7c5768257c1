//! The interactive card every text is sent as, and the little Markdown it needs adjusting.
//!
//! The card is the classic JSON form with one `markdown` element and `update_multi` (required
//! both when sending and when patching). Its Markdown has no headings, so `# Title` lines become
//! bold lines; everything else (bold, italics, links, lists, code blocks) passes as written,
//! except an @all tag (`<at id=all></at>`, `<at user_id="all">`, any spelling naming `all`):
//! like `@everyone` on Discord it would ping the whole group on the model's word, so a
//! zero-width space after its `<` leaves it as text. It is broken inside code too, where Feishu
//! may still read it.

use serde_json::json;

/// The card JSON (as the string Feishu's `content` field takes) showing `markdown`.
pub fn card(markdown: &str) -> String {
    json!({
        "config": {"wide_screen_mode": true, "update_multi": true},
        "elements": [{"tag": "markdown", "content": to_card_markdown(markdown)}]
    })
    .to_string()
}

/// A zero-width space: splits `<at` so Feishu does not see a tag.
const BREAK: char = '\u{200B}';

/// Markdown as the card's `markdown` element shows it.
pub fn to_card_markdown(markdown: &str) -> String {
    let mut in_code = false;
    break_mass_mentions(markdown)
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                return line.to_string();
            }
            if in_code {
                return line.to_string();
            }
            match heading(line) {
                Some(title) => format!("**{title}**"),
                None => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `<at …>` tag that names `all` (in `id`, `ids`, `user_id`, `open_id`, quoted or not,
/// any case) with a zero-width space after its `<`.
fn break_mass_mentions(text: &str) -> String {
    // ASCII lowercasing keeps every byte offset.
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = lower[search..].find("<at") {
        let start = search + found;
        let attributes = start + 3;
        search = attributes;
        let is_tag = lower[attributes..]
            .chars()
            .next()
            .is_some_and(|c| c.is_whitespace() || c == '>' || c == '/');
        if !is_tag {
            continue;
        }
        let end = lower[attributes..]
            .find('>')
            .map_or(lower.len(), |close| attributes + close);
        let names_all = lower[attributes..end]
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|word| word == "all");
        if names_all {
            out.push_str(&text[copied..=start]);
            out.push(BREAK);
            copied = start + 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// The title of an ATX heading (`# …` to `###### …`).
fn heading(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let title = line[hashes..].strip_prefix(' ')?.trim();
    (!title.is_empty()).then_some(title.trim_end_matches('#').trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_become_bold_outside_code() {
        let cases = [
            ("# Report", "**Report**"),
            ("### Next steps ##", "**Next steps**"),
            ("#hashtag", "#hashtag"),
            ("####### seven", "####### seven"),
            (
                "**bold** and [a link](https://x.y)",
                "**bold** and [a link](https://x.y)",
            ),
            (
                "```sh\n# a comment\n```\n# After",
                "```sh\n# a comment\n```\n**After**",
            ),
            ("- one\n- two", "- one\n- two"),
        ];
        for (input, expected) in cases {
            assert_eq!(to_card_markdown(input), expected, "{input:?}");
        }
    }

    #[test]
    fn at_all_tags_are_broken_everywhere_and_person_mentions_kept() {
        let broken = |tag: &str| tag.replacen('<', "<\u{200B}", 1);
        let mass = [
            "<at id=all></at>",
            "<at id=\"all\"></at>",
            "<at id='all'></at>",
            "<AT ID=ALL></AT>",
            "<at user_id=\"all\">everyone</at>",
            "<at open_id=\"all\"></at>",
            "<at ids=ou_1,all></at>",
            "<at\tid = all ></at>",
        ];
        for tag in mass {
            let text = format!("Hey {tag} look");
            assert_eq!(
                to_card_markdown(&text),
                format!("Hey {} look", broken(tag)),
                "{tag}"
            );
            let in_code = format!("```\n{tag}\n```");
            assert_eq!(
                to_card_markdown(&in_code),
                format!("```\n{}\n```", broken(tag))
            );
        }
        for kept in [
            "<at id=ou_123></at>",
            "<at id=ou_all_fans></at>",
            "<attention> all",
            "@all and @所有人 as plain text",
            "<at",
        ] {
            assert_eq!(to_card_markdown(kept), kept);
        }
        let card: serde_json::Value =
            serde_json::from_str(&card("<at id=all></at> hi")).expect("json");
        assert_eq!(
            card["elements"][0]["content"],
            "<\u{200B}at id=all></at> hi"
        );
    }

    #[test]
    fn the_card_is_updatable_and_holds_the_text() {
        let card: serde_json::Value = serde_json::from_str(&card("Working on it…")).expect("json");
        assert_eq!(card["config"]["update_multi"], true);
        assert_eq!(card["config"]["wide_screen_mode"], true);
        assert_eq!(card["elements"][0]["tag"], "markdown");
        assert_eq!(card["elements"][0]["content"], "Working on it…");
    }
}
