//! The rich text Slack's clients attach to a person's message (`blocks`), made from its
//! mrkdwn text: ``` fences become `rich_text_preformatted`, `inline code` a text element with
//! `style.code`, `<@U…>` (outside code) a `user` element; the rest text elements in a
//! `rich_text_section`. Code never holds a `user` element, as in Slack.

use serde_json::{Value, json};

/// `[{"type": "rich_text", "block_id", "elements": […]}]` for `text`.
pub(crate) fn rich_text_blocks(text: &str) -> Value {
    let mut elements = Vec::new();
    let mut section = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let Some(len) = rest[start + 3..].find("```") else {
            break;
        };
        inline(&rest[..start], &mut section);
        flush(&mut section, &mut elements);
        let code = &rest[start + 3..start + 3 + len];
        elements.push(json!({"type": "rich_text_preformatted",
            "elements": [{"type": "text", "text": code}]}));
        rest = &rest[start + 3 + len + 3..];
    }
    inline(rest, &mut section);
    flush(&mut section, &mut elements);
    json!([{"type": "rich_text", "block_id": "fake", "elements": elements}])
}

fn flush(section: &mut Vec<Value>, elements: &mut Vec<Value>) {
    if !section.is_empty() {
        elements.push(json!({"type": "rich_text_section", "elements": std::mem::take(section)}));
    }
}

/// Inline code and mentions of one stretch of text outside fences.
fn inline(text: &str, section: &mut Vec<Value>) {
    let pieces: Vec<&str> = text.split('`').collect();
    let closed = pieces.len() % 2 == 1;
    for (idx, piece) in pieces.iter().enumerate() {
        let is_code = idx % 2 == 1 && (closed || idx + 1 < pieces.len());
        if is_code {
            section.push(json!({"type": "text", "text": piece, "style": {"code": true}}));
        } else if idx % 2 == 1 {
            // A lone backtick is literal.
            mentions(&format!("`{piece}"), section);
        } else {
            mentions(piece, section);
        }
    }
}

fn mentions(text: &str, section: &mut Vec<Value>) {
    let mut rest = text;
    while let Some(start) = rest.find("<@") {
        let Some(len) = rest[start..].find('>') else {
            break;
        };
        let token = &rest[start + 2..start + len];
        let user = token.split('|').next().unwrap_or("");
        if user.is_empty() || !user.chars().all(|c| c.is_ascii_alphanumeric()) {
            push_text(&rest[..start + 2], section);
            rest = &rest[start + 2..];
            continue;
        }
        push_text(&rest[..start], section);
        section.push(json!({"type": "user", "user_id": user}));
        rest = &rest[start + len + 1..];
    }
    push_text(rest, section);
}

fn push_text(text: &str, section: &mut Vec<Value>) {
    if !text.is_empty() {
        section.push(json!({"type": "text", "text": text}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_outside_code_become_user_elements() {
        let blocks = rich_text_blocks("<@U1> see `<@U2>`\n```<@U3>``` and <@U4|bob>");
        assert_eq!(
            blocks[0]["elements"],
            json!([
                {"type": "rich_text_section", "elements": [
                    {"type": "user", "user_id": "U1"},
                    {"type": "text", "text": " see "},
                    {"type": "text", "text": "<@U2>", "style": {"code": true}},
                    {"type": "text", "text": "\n"}]},
                {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": "<@U3>"}]},
                {"type": "rich_text_section", "elements": [
                    {"type": "text", "text": " and "},
                    {"type": "user", "user_id": "U4"}]}
            ])
        );
    }
}
