//! The interactive card every text is sent as, and the little Markdown it needs adjusting.
//!
//! The card is the classic JSON form with one `markdown` element and `update_multi` (required
//! both when sending and when patching). Its Markdown has no headings, so `# Title` lines become
//! bold lines; everything else (bold, italics, links, lists, code blocks) passes as written.

use serde_json::json;

/// The card JSON (as the string Feishu's `content` field takes) showing `markdown`.
pub fn card(markdown: &str) -> String {
    json!({
        "config": {"wide_screen_mode": true, "update_multi": true},
        "elements": [{"tag": "markdown", "content": to_card_markdown(markdown)}]
    })
    .to_string()
}

/// Markdown as the card's `markdown` element shows it.
pub fn to_card_markdown(markdown: &str) -> String {
    let mut in_code = false;
    markdown
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
    fn the_card_is_updatable_and_holds_the_text() {
        let card: serde_json::Value = serde_json::from_str(&card("Working on it…")).expect("json");
        assert_eq!(card["config"]["update_multi"], true);
        assert_eq!(card["config"]["wide_screen_mode"], true);
        assert_eq!(card["elements"][0]["tag"], "markdown");
        assert_eq!(card["elements"][0]["content"], "Working on it…");
    }
}
