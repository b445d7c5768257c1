//! The entities Telegram's servers attach to a text they relay: `mention` for `@username`
//! (5 to 32 letters, digits or `_`, not inside a word) and `bot_command` for `/command` or
//! `/command@username` at the start of a word. Offsets and lengths count UTF-16 code units, as
//! Telegram's do.

use serde_json::{Value, json};

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The entities of `text`, in order.
pub(crate) fn entities(text: &str) -> Vec<Value> {
    let chars: Vec<char> = text.chars().collect();
    let utf16_at = |idx: usize| -> usize { chars[..idx].iter().map(|c| c.len_utf16()).sum() };
    let name_run = |from: usize| {
        chars[from..]
            .iter()
            .take_while(|c| is_name_char(**c))
            .count()
    };
    let mut found = Vec::new();
    let mut idx = 0;
    while idx < chars.len() {
        let after_word = idx > 0 && is_name_char(chars[idx - 1]);
        let after_space = idx == 0 || chars[idx - 1].is_whitespace();
        let (kind, len) = match chars[idx] {
            '@' if !after_word => {
                let run = name_run(idx + 1);
                if (5..=32).contains(&run) {
                    ("mention", 1 + run)
                } else {
                    ("", 0)
                }
            }
            '/' if after_space => {
                let run = name_run(idx + 1);
                let mut len = 1 + run;
                if run > 0 && chars.get(idx + len) == Some(&'@') {
                    let bot = name_run(idx + len + 1);
                    if (5..=32).contains(&bot) {
                        len += 1 + bot;
                    }
                }
                if run > 0 {
                    ("bot_command", len)
                } else {
                    ("", 0)
                }
            }
            _ => ("", 0),
        };
        if len == 0 {
            idx += 1;
            continue;
        }
        let offset = utf16_at(idx);
        found.push(json!({"type": kind, "offset": offset, "length": utf16_at(idx + len) - offset}));
        idx += len;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_and_commands_are_found_like_telegram_does() {
        let found = entities("/new@AntlerBot hé @antler_bars_bot_fan mail@host.io @abc");
        assert_eq!(
            found,
            vec![
                json!({"type": "bot_command", "offset": 0, "length": 14}),
                json!({"type": "mention", "offset": 18, "length": 20}),
            ]
        );
        // UTF-16: an emoji counts twice.
        assert_eq!(
            entities("🦌 @AntlerBot"),
            vec![json!({"type": "mention", "offset": 3, "length": 10})]
        );
    }
}
