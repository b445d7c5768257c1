//! `TitleMiddleware`: names a thread after its first exchange (reference §3.4).
//!
//! With `title.model_name` the title model is asked for a short title (at most `max_words`
//! words and `max_chars` characters, enforced on its answer too); without one, or when that
//! call fails, times out or answers nothing usable, the title is the start of the first user
//! message. The title call is not part of the run's event stream.
//!
//! With a checkpointer the state gets the first-message title at once and the model is asked
//! in the background; its title renames the thread's record (`GET /api/threads`, `/status`),
//! so the answer never waits for it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;

use crate::agent_api::shared::truncate_chars;
use crate::agent_api::{HookResult, Middleware, MiddlewareError};
use crate::agent_api::{MeteredModel, RunContext, UsageKind};
use crate::config::schema::TitleConfig;
use crate::model::background::TITLE_PROMPT_START;
use crate::model::{ChatModel, ModelError, ModelEvent, ModelRequest};
use antler_store::Checkpointer;
use antler_store::messages::Message;
use antler_store::state::{StateUpdate, ThreadState};

pub const DEFAULT_TITLE: &str = "New Conversation";
/// The fallback never keeps more than this many characters of the user's message.
const FALLBACK_MAX_CHARS: usize = 50;
/// How much of the first exchange the title model reads (each side).
const TITLE_CONTEXT_CHARS: usize = 500;
/// The run's answer is complete when titling starts; a slow title model must not hold it back
/// for long.
pub const TITLE_TIMEOUT: Duration = Duration::from_secs(20);

pub struct TitleMiddleware {
    config: TitleConfig,
    model: Option<Arc<dyn ChatModel>>,
    sink: Option<Arc<dyn Checkpointer>>,
}

impl TitleMiddleware {
    /// Titles from the first message only (no model call).
    pub fn new(config: TitleConfig) -> Self {
        Self {
            config,
            model: None,
            sink: None,
        }
    }

    /// Asks `model` for titles (`title.model_name`), with the local title as the fallback.
    pub fn with_model(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.model = Some(model);
        self
    }

    /// Where a title generated after the run lands (the thread's record): with one, the
    /// title model is asked in the background and the answer is not held back.
    pub fn with_sink(mut self, sink: Arc<dyn Checkpointer>) -> Self {
        self.sink = Some(sink);
        self
    }
}

/// The model's title, or `None` (logged) when there is no usable answer in time.
async fn model_title(
    model: &dyn ChatModel,
    config: &TitleConfig,
    user: &str,
    answer: &str,
    thread_id: &str,
) -> Option<String> {
    let request = ModelRequest {
        messages: vec![Message::human(title_prompt(user, answer, config.max_words))].into(),
        ..Default::default()
    };
    let raw = match tokio::time::timeout(TITLE_TIMEOUT, complete(model, request)).await {
        Ok(Ok(raw)) => raw,
        Ok(Err(error)) => {
            tracing::warn!(%error, model = model.name(), %thread_id, "The title model failed; the thread keeps the first message as its title");
            return None;
        }
        Err(_) => {
            tracing::warn!(model = model.name(), %thread_id, "The title model took too long; the thread keeps the first message as its title");
            return None;
        }
    };
    let title = limit_words(&parse_title(&raw, usize::MAX), config.max_words);
    let title = truncate_chars(&title, config.max_chars)
        .trim_end()
        .to_string();
    (!title.is_empty()).then_some(title)
}

/// DeerFlow's title prompt; each side of the exchange is cut to 500 characters.
pub fn title_prompt(user: &str, answer: &str, max_words: u32) -> String {
    format!(
        "{TITLE_PROMPT_START} (max {max_words} words) for this conversation.\nUser: {}\n\
         Assistant: {}\n\nReturn ONLY the title, no quotes, no explanation.",
        truncate_chars(user.trim(), TITLE_CONTEXT_CHARS),
        truncate_chars(answer.trim(), TITLE_CONTEXT_CHARS)
    )
}

/// The first `max_words` words of `title` (whitespace-separated), joined by single spaces.
pub fn limit_words(title: &str, max_words: u32) -> String {
    title
        .split_whitespace()
        .take(max_words.max(1) as usize)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Drains one completion and returns its text.
async fn complete(model: &dyn ChatModel, request: ModelRequest) -> Result<String, ModelError> {
    let mut stream = model.stream(&request).await?;
    while let Some(event) = stream.next().await {
        if let ModelEvent::Completed(message) = event? {
            return Ok(message.content.to_string());
        }
    }
    Err(ModelError::Stream {
        model: model.name().to_string(),
        detail: "the stream ended before the title was complete".into(),
    })
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

/// Cleans a title model's answer: drops `<think>…</think>` blocks, Markdown heading and bold
/// marks, a `Title:` prefix, surrounding quotes and whitespace, keeps the first line, and cuts
/// to `max_chars`.
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
    // Chat models often dress a title as Markdown ("# Title", "**Title:** Foo"); a title is
    // shown as plain text in sidebars and chat lists.
    let plain = line
        .trim_start_matches('#')
        .replace("**", "")
        .replace("__", "");
    let plain = plain.trim();
    let plain = match plain.get(..6) {
        Some(prefix) if prefix.eq_ignore_ascii_case("title:") => plain[6..].trim_start(),
        _ => plain,
    };
    let quotes: &[char] = &['"', '\'', '`', '“', '”', '‘', '’', '«', '»'];
    let title = plain.trim_matches(quotes).trim();
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

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn after_model(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
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
        let answer = state
            .last_ai()
            .map(|ai| ai.content.as_str())
            .unwrap_or_default();
        let fallback = fallback_title(first, self.config.max_chars);
        // Paid by the run's account like its own calls; over budget, no title call is made.
        let model = self
            .model
            .clone()
            .map(|model| MeteredModel::for_run(model, ctx.meter.as_ref(), UsageKind::Title));
        let title = match (&model, &self.sink) {
            (None, _) => fallback,
            // The answer is complete: the thread gets the local title now and the model's one
            // when (if) it comes, so a slow or failing title model never holds the answer back.
            (Some(model), Some(sink)) => {
                let (model, sink, config) = (model.clone(), sink.clone(), self.config.clone());
                let (user, answer) = (first.to_string(), answer.to_string());
                let thread_id = ctx.thread_id.clone();
                // Owned by whoever owns the runs: a title still being written at shutdown is
                // dropped (the first-message title stands) rather than written after the flush.
                ctx.background.spawn(async move {
                    let Some(title) =
                        model_title(model.as_ref(), &config, &user, &answer, &thread_id).await
                    else {
                        return;
                    };
                    if let Err(error) = sink.rename(&thread_id, &title).await {
                        tracing::warn!(%error, %thread_id, "Could not store the generated title");
                    }
                });
                fallback
            }
            // Nowhere to put a late title (an agent without a checkpointer): wait for it.
            (Some(model), None) => {
                let call = model_title(model.as_ref(), &self.config, first, answer, &ctx.thread_id);
                tokio::select! {
                    _ = ctx.cancel.cancelled() => None,
                    title = call => title,
                }
                .unwrap_or(fallback)
            }
        };
        Ok(HookResult::update(StateUpdate {
            title: Some(title),
            ..Default::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_title_request_is_recognised_as_one() {
        let request = ModelRequest {
            messages: vec![Message::human(title_prompt("hi", "hello", 6))].into(),
            ..Default::default()
        };
        assert_eq!(
            crate::model::background::background_call(&request),
            Some(crate::model::background::BackgroundCall::Title)
        );
    }
    /// What the title model reads, as a snapshot (`tests/prompts/`).
    #[test]
    fn the_title_request_snapshot() {
        expect_test::expect_file!["../../tests/prompts/title.txt"].assert_eq(&title_prompt(
            "hi",
            "Hello! How can I help?",
            6,
        ));
    }
    use crate::config::AppConfig;
    use crate::model::{ModelErrorKind, ScriptedModel, ScriptedTurn};

    fn first_exchange() -> ThreadState {
        ThreadState {
            messages: vec![
                Message::human("Please help me plan a week-long trip to Rome in the spring"),
                Message::ai("Sure! Here is a plan."),
            ]
            .into(),
            ..Default::default()
        }
    }

    async fn title_with(model: Option<Arc<ScriptedModel>>, config: TitleConfig) -> String {
        let mut middleware = TitleMiddleware::new(config);
        if let Some(model) = model {
            middleware = middleware.with_model(model);
        }
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let result = middleware
            .after_model(&first_exchange(), &ctx)
            .await
            .unwrap();
        result.update.title.unwrap()
    }

    #[tokio::test]
    async fn the_title_model_is_asked_and_its_answer_is_held_to_max_words_and_chars() {
        let model = Arc::new(
            ScriptedModel::new(
                "titler",
                [ScriptedTurn::Text(vec![
                    "<think>hmm</think>\"Spring Rome Trip Week Plan With Extras\"".into(),
                ])],
            )
            .with_background_script(),
        );
        let config = TitleConfig {
            max_words: 4,
            max_chars: 14,
            ..Default::default()
        };
        assert_eq!(
            title_with(Some(model.clone()), config).await,
            "Spring Rome Tr"
        );
        let prompt = model.requests()[0].messages[0].content().to_string();
        assert!(prompt.contains("(max 4 words)"), "{prompt}");
        assert!(prompt.contains("User: Please help me plan"), "{prompt}");
        assert!(
            prompt.contains("Assistant: Sure! Here is a plan."),
            "{prompt}"
        );
        let wide = TitleConfig {
            max_words: 3,
            ..Default::default()
        };
        let model = Arc::new(
            ScriptedModel::text("titler", "Spring Rome Trip Week").with_background_script(),
        );
        assert_eq!(title_with(Some(model), wide).await, "Spring Rome Trip");
    }

    #[tokio::test]
    async fn a_failing_or_empty_title_model_falls_back_to_the_first_message() {
        let failing = Arc::new(
            ScriptedModel::new("titler", [ScriptedTurn::Fail(ModelErrorKind::Status(500))])
                .with_background_script(),
        );
        let fallback = "Please help me plan a week-long trip to Rome in th...";
        assert_eq!(
            title_with(Some(failing), TitleConfig::default()).await,
            fallback
        );
        let empty = Arc::new(
            ScriptedModel::text("titler", "<think>only thinking").with_background_script(),
        );
        assert_eq!(
            title_with(Some(empty), TitleConfig::default()).await,
            fallback
        );
        assert_eq!(title_with(None, TitleConfig::default()).await, fallback);
    }

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

    #[test]
    fn parse_title_drops_markdown_dress() {
        assert_eq!(parse_title("# Trip to Rome", 60), "Trip to Rome");
        assert_eq!(
            parse_title("**Title:** \"Trip to Rome\"", 60),
            "Trip to Rome"
        );
        assert_eq!(parse_title("title: __Budget__ review", 60), "Budget review");
    }
}
