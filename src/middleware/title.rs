//! `TitleMiddleware`: names a thread after its first exchange (reference §3.4).
//!
//! Only the local fallback exists so far (the first user message, shortened); [`parse_title`] is
//! the cleaning step a title model's output will go through once one can be configured.

use async_trait::async_trait;

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, Middleware, MiddlewareError};
use crate::config::schema::TitleConfig;
use crate::messages::Message;
use crate::state::{StateUpdate, ThreadState};
use crate::tools::builtin::truncate_chars;

pub const DEFAULT_TITLE: &str = "New Conversation";
/// The fallback never keeps more than this many characters of the user's message.
const FALLBACK_MAX_CHARS: usize = 50;

pub struct TitleMiddleware {
    config: TitleConfig,
}

impl TitleMiddleware {
    pub fn new(config: TitleConfig) -> Self {
        Self { config }
    }
}

/// The local title: the first user message, cut to `min(50, max_chars - 3)` chars + `"..."` when
/// it is longer than `min(max_chars, 50)`; `"New Conversation"` when empty.
pub fn fallback_title(user_message: &str, max_chars: usize) -> String {
    let text = user_message.trim();
    if text.is_empty() {
        return DEFAULT_TITLE.to_string();
    }
    let limit = max_chars.min(FALLBACK_MAX_CHARS);
    if text.chars().count() <= limit {
        return text.to_string();
    }
    let keep = FALLBACK_MAX_CHARS.min(max_chars.saturating_sub(3));
    format!("{}...", truncate_chars(text, keep).trim_end())
}

/// Cleans a title model's answer: drops `<think>…</think>` blocks, surrounding quotes and
/// whitespace, keeps the first line, and cuts to `max_chars`.
pub fn parse_title(raw: &str, max_chars: usize) -> String {
    let mut text = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(open) = rest.find("<think>") {
        text.push_str(&rest[..open]);
        match rest[open..].find("</think>") {
            Some(close) => rest = &rest[open + close + "</think>".len()..],
            // An unclosed block is all thinking: nothing after it is the title.
            None => rest = "",
        }
    }
    text.push_str(rest);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let quotes: &[char] = &['"', '\'', '`', '“', '”', '‘', '’', '«', '»'];
    let title = line.trim_matches(quotes).trim();
    truncate_chars(title, max_chars).trim_end().to_string()
}

/// Whether the thread is at its first exchange and still untitled.
fn should_title(state: &ThreadState) -> bool {
    if state.title.is_some() {
        return false;
    }
    let humans = state
        .messages
        .iter()
        .filter(|m| m.is_genuine_human())
        .count();
    humans == 1 && state.last_ai().is_some_and(|ai| ai.tool_calls.is_empty())
}

#[async_trait]
impl Middleware for TitleMiddleware {
    fn name(&self) -> &str {
        "TitleMiddleware"
    }

    async fn after_model(
        &self,
        state: &ThreadState,
        _ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        if !self.config.enabled || !should_title(state) {
            return Ok(HookResult::proceed());
        }
        let first = state
            .messages
            .iter()
            .find(|m| m.is_genuine_human())
            .map(Message::content)
            .unwrap_or_default();
        Ok(HookResult::update(StateUpdate {
            title: Some(fallback_title(first, self.config.max_chars)),
            ..Default::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_empty_messages() {
        assert_eq!(fallback_title("  Plan a trip  ", 60), "Plan a trip");
        assert_eq!(fallback_title("   ", 60), DEFAULT_TITLE);
    }

    #[test]
    fn parse_title_trims_quotes_and_length() {
        assert_eq!(parse_title("\"Trip to Rome\"\n\nextra", 60), "Trip to Rome");
        assert_eq!(parse_title("<think>unclosed", 60), "");
        assert_eq!(parse_title("abcdefghijkl", 10), "abcdefghij");
    }
}
