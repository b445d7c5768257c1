//! Whether a Telegram message mentions the bot, read from its entities (Telegram's own parse):
//! a `mention` whose text is `@username` (case-insensitive, whole: `@antler_bars_bot_fan` is
//! another user), a `text_mention` of the bot's id, or a `bot_command` addressed to it
//! (`/new@AntlerBot`). Nothing inside a `code` or `pre` entity counts, and nothing in the bare
//! text does: Telegram marks every real mention.

use std::ops::Range;

use teloxide::types::{Message, MessageEntityKind, MessageEntityRef};

use crate::convert::BotIdentity;

/// The message's text (or caption) with the bot's mentions cut, and whether there were any.
pub(crate) struct Mentions {
    pub(crate) mentions_bot: bool,
    pub(crate) text: String,
}

pub(crate) fn bot_mentions(message: &Message, bot: &BotIdentity) -> Mentions {
    let raw = message.text().or(message.caption()).unwrap_or("");
    let entities = message
        .parse_entities()
        .or_else(|| message.parse_caption_entities())
        .unwrap_or_default();
    mentions_in(raw, &entities, bot)
}

fn mentions_in(raw: &str, entities: &[MessageEntityRef<'_>], bot: &BotIdentity) -> Mentions {
    let handle = format!("@{}", bot.username);
    let code: Vec<Range<usize>> = entities
        .iter()
        .filter(|e| {
            matches!(
                e.kind(),
                MessageEntityKind::Code | MessageEntityKind::Pre { .. }
            )
        })
        .map(MessageEntityRef::range)
        .collect();
    let in_code = |range: &Range<usize>| {
        code.iter()
            .any(|c| c.start <= range.start && range.end <= c.end)
    };
    // Each cut with whether the space after it goes too: a mention's does, a command's
    // `@Bot` suffix's does not (`/agent@Bot history` is `/agent history`).
    let mut cuts: Vec<(Range<usize>, bool)> = Vec::new();
    for entity in entities.iter().filter(|e| !in_code(&e.range())) {
        let range = entity.range();
        match entity.kind() {
            MessageEntityKind::Mention if entity.text().eq_ignore_ascii_case(&handle) => {
                cuts.push((range, true));
            }
            MessageEntityKind::TextMention { user } if user.id.0 == bot.id => {
                cuts.push((range, true))
            }
            MessageEntityKind::BotCommand => {
                let command = entity.text();
                let suffix_at = command.len().saturating_sub(handle.len());
                let addressed = command
                    .get(suffix_at..)
                    .is_some_and(|suffix| suffix.eq_ignore_ascii_case(&handle));
                if addressed {
                    cuts.push((range.start + suffix_at..range.end, false));
                }
            }
            _ => {}
        }
    }
    Mentions {
        mentions_bot: !cuts.is_empty(),
        text: cut(raw, &mut cuts),
    }
}

/// `raw` without the `cuts` (and a space after those that take it), trimmed.
fn cut(raw: &str, cuts: &mut [(Range<usize>, bool)]) -> String {
    cuts.sort_by_key(|(range, _)| range.start);
    let mut out = String::with_capacity(raw.len());
    let mut rest = 0;
    for (range, with_space) in cuts.iter() {
        if range.start < rest {
            continue;
        }
        out.push_str(&raw[rest..range.start]);
        rest = range.end;
        if *with_space && raw[rest..].starts_with(' ') {
            rest += 1;
        }
    }
    out.push_str(&raw[rest..]);
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn bot() -> BotIdentity {
        BotIdentity {
            id: 999,
            username: "antler_bars_bot".into(),
        }
    }

    fn message(text: &str, entities: Value) -> Message {
        serde_json::from_value(json!({
            "message_id": 10, "date": 1_700_000_000,
            "chat": {"id": -100, "type": "supergroup", "title": "g"},
            "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
            "text": text, "entities": entities
        }))
        .expect("message json")
    }

    /// An entity over the first occurrence of `part` in `text` (ASCII test texts: UTF-16
    /// offsets equal byte offsets).
    fn entity(text: &str, part: &str, kind: Value) -> Value {
        let offset = text.find(part).expect("part in text");
        let mut entity = kind;
        entity["offset"] = json!(offset);
        entity["length"] = json!(part.len());
        entity
    }

    /// (text, entities as (the part they cover, their kind), mentions the bot, text left)
    type Case<'a> = (&'a str, Vec<(&'a str, Value)>, bool, &'a str);

    #[test]
    fn only_entities_outside_code_mention_the_bot() {
        let mention = json!({"type": "mention"});
        let cases: Vec<Case<'_>> = vec![
            (
                "@antler_bars_bot what now",
                vec![("@antler_bars_bot", mention.clone())],
                true,
                "what now",
            ),
            (
                "@Antler_Bars_Bot hi",
                vec![("@Antler_Bars_Bot", mention.clone())],
                true,
                "hi",
            ),
            (
                "@antler_bars_bot_fan hi",
                vec![("@antler_bars_bot_fan", mention.clone())],
                false,
                "@antler_bars_bot_fan hi",
            ),
            // No entity: Telegram did not see a mention, so there is none.
            ("@antler_bars_bot hi", vec![], false, "@antler_bars_bot hi"),
            (
                "run @antler_bars_bot now",
                vec![
                    ("@antler_bars_bot", json!({"type": "code"})),
                    ("@antler_bars_bot", mention.clone()),
                ],
                false,
                "run @antler_bars_bot now",
            ),
            (
                "x\n@antler_bars_bot\ny",
                vec![("x\n@antler_bars_bot\ny", json!({"type": "pre"}))],
                false,
                "x\n@antler_bars_bot\ny",
            ),
            (
                "/new@antler_bars_bot",
                vec![("/new@antler_bars_bot", json!({"type": "bot_command"}))],
                true,
                "/new",
            ),
            (
                "/agent@antler_bars_bot history coder",
                vec![("/agent@antler_bars_bot", json!({"type": "bot_command"}))],
                true,
                "/agent history coder",
            ),
            (
                "/new@other_bot",
                vec![("/new@other_bot", json!({"type": "bot_command"}))],
                false,
                "/new@other_bot",
            ),
            (
                "Antler please",
                vec![(
                    "Antler",
                    json!({"type": "text_mention", "user": {"id": 999, "is_bot": true, "first_name": "Antler"}}),
                )],
                true,
                "please",
            ),
            (
                "Bob please",
                vec![(
                    "Bob",
                    json!({"type": "text_mention", "user": {"id": 7, "is_bot": false, "first_name": "Bob"}}),
                )],
                false,
                "Bob please",
            ),
        ];
        for (text, entities, expected, stripped) in cases {
            let entities: Vec<Value> = entities
                .into_iter()
                .map(|(part, kind)| entity(text, part, kind))
                .collect();
            let found = bot_mentions(&message(text, json!(entities)), &bot());
            assert_eq!(found.mentions_bot, expected, "{text:?}");
            assert_eq!(found.text, stripped, "{text:?}");
        }
    }
}
