//! Whether a Slack message mentions the bot, and the text without those mentions.
//!
//! Slack's own word first: an `app_mention` event is one. A `message` event from a person's
//! client carries its rich text (`blocks`), where a mention is a `user` element with the
//! member's id, never one inside a code block or code span; that is read when present. Without
//! blocks (a message posted through the API) the text's `<@U…>` / `<@U…|name>` tokens count,
//! matched whole (`<@UBOT12>` is not `UBOT1`) and outside code. Either way a user id is compared
//! whole, so a longer id never passes for the bot's.

use antler_channel::{any_prose, map_prose};
use serde_json::Value;

/// Whether the message (its `text` and optional `blocks`) mentions `user_id`.
pub(crate) fn mentions_user(text: &str, blocks: Option<&Value>, user_id: &str) -> bool {
    match blocks.filter(|blocks| has_rich_text(blocks)) {
        Some(blocks) => rich_text_mentions(blocks, user_id),
        None => any_prose(text, |prose| has_token(prose, user_id)),
    }
}

/// `text` without the mentions of `user_id` outside code, whitespace tidied.
pub(crate) fn strip_mentions(text: &str, user_id: &str) -> String {
    let stripped = map_prose(text, |prose| remove_tokens(prose, user_id));
    stripped
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

fn has_rich_text(blocks: &Value) -> bool {
    blocks
        .as_array()
        .is_some_and(|blocks| blocks.iter().any(|block| block["type"] == "rich_text"))
}

/// A `user` element for `user_id` anywhere in the rich text but in code.
fn rich_text_mentions(value: &Value, user_id: &str) -> bool {
    match value {
        Value::Array(items) => items.iter().any(|item| rich_text_mentions(item, user_id)),
        Value::Object(element) => {
            if element.get("type").and_then(Value::as_str) == Some("rich_text_preformatted") {
                return false;
            }
            let in_code_span = element
                .get("style")
                .and_then(|style| style.get("code"))
                .and_then(Value::as_bool)
                == Some(true);
            let is_mention = element.get("type").and_then(Value::as_str) == Some("user")
                && element.get("user_id").and_then(Value::as_str) == Some(user_id);
            (is_mention && !in_code_span)
                || element
                    .get("elements")
                    .is_some_and(|children| rich_text_mentions(children, user_id))
        }
        _ => false,
    }
}

/// The byte ranges of `<@ID>` and `<@ID|label>` tokens for `user_id` in `text`.
fn tokens(text: &str, user_id: &str) -> Vec<(usize, usize)> {
    let opening = format!("<@{user_id}");
    let mut found = Vec::new();
    for (start, _) in text.match_indices(&opening) {
        let after = start + opening.len();
        let end = match text[after..].chars().next() {
            Some('>') => Some(after + 1),
            Some('|') => text[after..].find('>').map(|close| after + close + 1),
            _ => None,
        };
        if let Some(end) = end {
            found.push((start, end));
        }
    }
    found
}

fn has_token(text: &str, user_id: &str) -> bool {
    !tokens(text, user_id).is_empty()
}

fn remove_tokens(text: &str, user_id: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    for (start, end) in tokens(text, user_id) {
        if start < rest {
            continue;
        }
        out.push_str(&text[rest..start]);
        out.push(' ');
        rest = end;
    }
    out.push_str(&text[rest..]);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Rich text as Slack's clients send it: `section` elements in one `rich_text` block.
    fn rich_text(elements: Value) -> Value {
        json!([{"type": "rich_text", "block_id": "b1", "elements": elements}])
    }

    #[test]
    fn mentions_are_whole_tokens_outside_code() {
        // (text, blocks, mentions UBOT1)
        let cases = [
            ("<@UBOT1> hi", None, true),
            ("<@UBOT1|antler> hi", None, true),
            ("hi <@UBOT12>", None, false),
            ("hi <@UBOT1", None, false),
            ("<@UBOT1x> hi", None, false),
            ("see `<@UBOT1>`", None, false),
            ("```\n<@UBOT1> in a block\n```", None, false),
            ("```<@UBOT1>``` but <@UBOT1> too", None, true),
            (
                "<@UBOT1> hi",
                Some(rich_text(
                    json!([{"type": "rich_text_section", "elements": [
                    {"type": "user", "user_id": "UBOT1"}, {"type": "text", "text": " hi"}]}]),
                )),
                true,
            ),
            (
                "<@UBOT12> hi",
                Some(rich_text(
                    json!([{"type": "rich_text_section", "elements": [
                    {"type": "user", "user_id": "UBOT12"}, {"type": "text", "text": " hi"}]}]),
                )),
                false,
            ),
            (
                "```<@UBOT1>```",
                Some(rich_text(
                    json!([{"type": "rich_text_preformatted", "elements": [
                    {"type": "user", "user_id": "UBOT1"}]}]),
                )),
                false,
            ),
            (
                "`<@UBOT1>`",
                Some(rich_text(
                    json!([{"type": "rich_text_section", "elements": [
                    {"type": "user", "user_id": "UBOT1", "style": {"code": true}}]}]),
                )),
                false,
            ),
            (
                // A list item mentioning the bot.
                "• <@UBOT1>",
                Some(rich_text(
                    json!([{"type": "rich_text_list", "style": "bullet", "elements": [
                    {"type": "rich_text_section", "elements": [{"type": "user", "user_id": "UBOT1"}]}]}]),
                )),
                true,
            ),
            (
                // The blocks are Slack's word: the text alone would say yes.
                "<@UBOT1>",
                Some(rich_text(
                    json!([{"type": "rich_text_section", "elements": [
                    {"type": "text", "text": "nothing"}]}]),
                )),
                false,
            ),
            (
                // Blocks without rich text (an app's layout) leave the text to decide.
                "<@UBOT1> hi",
                Some(json!([{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}])),
                true,
            ),
        ];
        for (text, blocks, expected) in cases {
            assert_eq!(
                mentions_user(text, blocks.as_ref(), "UBOT1"),
                expected,
                "{text:?} {blocks:?}"
            );
        }
    }

    #[test]
    fn only_the_bots_mentions_outside_code_are_stripped() {
        let cases = [
            ("<@UBOT1> what is up?", "what is up?"),
            ("<@UBOT1|antler> what\n<@UBOT1>  now", "what\nnow"),
            ("ask <@UBOT12> and <@U2>", "ask <@UBOT12> and <@U2>"),
            ("<@UBOT1> run `<@UBOT1>`", "run `<@UBOT1>`"),
        ];
        for (text, expected) in cases {
            assert_eq!(strip_mentions(text, "UBOT1"), expected, "{text:?}");
        }
    }
}
