//! Splitting a long answer into platform-sized messages without breaking code fences.
//!
//! Cuts prefer a paragraph break, then a line break, then a space, and only then a hard cut.
//! A cut inside a ```` ``` ```` block closes the fence at the end of the chunk and reopens it
//! (with its language tag) at the start of the next, so every chunk renders on its own.

/// Splits `text` into chunks of at most `max_chars` characters.
pub fn split_message(text: &str, max_chars: usize) -> Vec<String> {
    // Room for a closing fence ("\n```") and a reopening one ("```lang\n").
    const FENCE_RESERVE: usize = 24;
    let max_chars = max_chars.max(FENCE_RESERVE * 2);
    if text.chars().count() <= max_chars {
        return vec![text.to_string()];
    }
    let mut chunks = Vec::new();
    let mut rest: &str = text;
    let mut open_fence: Option<String> = None;
    while !rest.is_empty() {
        let prefix = open_fence
            .as_ref()
            .map(|fence| format!("{fence}\n"))
            .unwrap_or_default();
        let budget = max_chars - prefix.chars().count();
        if rest.chars().count() <= budget {
            chunks.push(format!("{prefix}{rest}"));
            break;
        }
        let window_end = byte_index(rest, budget - FENCE_RESERVE);
        let cut = best_cut(&rest[..window_end]);
        let (head, tail) = rest.split_at(cut);
        let fence_after = fence_state(head, open_fence.clone());
        let mut chunk = format!("{prefix}{}", head.trim_end_matches('\n'));
        if fence_after.is_some() {
            chunk.push_str("\n```");
        }
        chunks.push(chunk);
        open_fence = fence_after;
        rest = tail.trim_start_matches('\n');
    }
    chunks
}

/// Byte index of the `chars`-th character (or the end).
fn byte_index(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map_or(text.len(), |(idx, _)| idx)
}

fn best_cut(window: &str) -> usize {
    let floor = window.len() / 3;
    if let Some(idx) = window.rfind("\n\n").filter(|idx| *idx > floor) {
        return idx + 1;
    }
    if let Some(idx) = window.rfind('\n').filter(|idx| *idx > floor) {
        return idx + 1;
    }
    if let Some(idx) = window.rfind(' ').filter(|idx| *idx > floor) {
        return idx + 1;
    }
    window.len()
}

/// The fence open after `text`, given the one open before it (`Some("```rust")`).
fn fence_state(text: &str, mut open: Option<String>) -> Option<String> {
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            open = match open {
                Some(_) => None,
                None => Some(format!("```{}", info.trim())),
            };
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fences_balanced(chunk: &str) -> bool {
        chunk
            .lines()
            .filter(|line| line.trim_start().starts_with("```"))
            .count()
            % 2
            == 0
    }

    #[test]
    fn table_of_splits() {
        let lines: String = (0..600).map(|i| format!("line number {i:04}\n")).collect();
        let code = format!(
            "intro\n```rust\n{}```\noutro",
            (0..300)
                .map(|i| format!("let x{i} = {i};\n"))
                .collect::<String>()
        );
        let one_word = "x".repeat(250);
        let cases: Vec<(&str, String, usize)> = vec![
            ("short text is one chunk", "hello".into(), 1),
            ("lines split on line boundaries", lines.clone(), 3),
            ("a long code block reopens its fence", code.clone(), 2),
            (
                "a word longer than the limit is hard-cut",
                one_word.clone(),
                3,
            ),
        ];
        for (name, text, expected) in cases {
            let max = if name.contains("hard-cut") { 100 } else { 4096 };
            let chunks = split_message(&text, max);
            assert_eq!(chunks.len(), expected, "{name}");
            for chunk in &chunks {
                assert!(chunk.chars().count() <= max, "{name}: chunk too long");
                assert!(
                    fences_balanced(chunk),
                    "{name}: unbalanced fence in {chunk:?}"
                );
            }
        }
    }

    #[test]
    fn line_boundaries_are_kept_and_nothing_is_lost() {
        let text: String = (0..600).map(|i| format!("line number {i:04}\n")).collect();
        let chunks = split_message(&text, 4096);
        assert_eq!(chunks.len(), 3);
        for chunk in &chunks {
            assert!(chunk.starts_with("line number "), "cut mid-line");
            assert!(
                chunk.trim_end().ends_with(|c: char| c.is_ascii_digit()),
                "cut mid-line"
            );
        }
        assert_eq!(chunks.join("\n"), text);
    }

    #[test]
    fn reopened_fence_keeps_its_language() {
        let code = format!(
            "```python\n{}```",
            (0..400)
                .map(|i| format!("print({i})\n"))
                .collect::<String>()
        );
        let chunks = split_message(&code, 1000);
        assert!(chunks.len() > 1);
        for chunk in &chunks[1..] {
            assert!(chunk.starts_with("```python\n"), "{chunk:.30}");
        }
    }
}
