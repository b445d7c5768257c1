//! `SummarizationMiddleware`: condenses a long thread (reference §3.1 item 18).
//!
//! Before a model call, when the thread reaches any `summarization.trigger` (estimated tokens,
//! messages, or a fraction of the model's `context_window`), the messages before the kept end
//! (`summarization.keep`) are summarized by the summary model and replaced by one hidden
//! `summary` message; the summary is also stored in `summary_text`. The cut never separates an
//! AI message from the tool results answering it, and dynamic context (the date reminder, the
//! memory block) is never summarized: it stays, ahead of the summary. The [`DroppedMessagesSink`] (memory) hears
//! about the dropped messages first. A failing summary model leaves the thread as it was.
//!
//! Token counts are an estimate (see [`estimate_tokens`]): no tokenizer crate covers every
//! provider this runs against, and the triggers need only be roughly right.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;

use crate::agent_api::{
    DroppedMessagesSink, HookResult, MeteredModel, Middleware, MiddlewareError, RunContext,
    RunEvent, UsageKind,
};
use crate::config::summarization::{ContextMeasure, ContextSize, SummarizationConfig};
use crate::middleware::dynamic_context::is_dynamic_context;
use crate::middleware::support::hidden_human;
use crate::model::{ChatModel, ModelError, ModelEvent, ModelRequest};
use antler_store::messages::{Message, sender_label};
use antler_store::state::{StateUpdate, ThreadState};

/// The `name` of the summary message.
pub const SUMMARY_NAME: &str = "summary";
pub const SUMMARY_PREFIX: &str = "Here is a summary of the conversation to date:\n\n";
/// Tokens counted for a message besides its text (role, separators).
const MESSAGE_OVERHEAD: u64 = 4;

/// Estimated tokens of `text`: a token per 4 ASCII characters (English and code average about
/// that with the GPT and Claude tokenizers) and one per other character (CJK characters are
/// mostly a token each, and this errs on the high side for accented Latin text).
///
/// Counted over bytes, not decoded characters: every character but ASCII starts with a byte of
/// `0xC0` or more and continues with bytes below it, so the counts are the same, and the byte
/// loop vectorizes. It runs over the whole thread before every model call.
pub fn estimate_tokens(text: &str) -> u64 {
    let (ascii, other) = text.bytes().fold((0u64, 0u64), |(a, o), b| {
        (a + u64::from(b < 0x80), o + u64::from(b >= 0xC0))
    });
    ascii.div_ceil(4) + other
}

/// Estimated tokens of one message as the model sees it (text, tool calls, overhead).
pub fn message_tokens(message: &Message) -> u64 {
    let calls = match message {
        Message::Ai(ai) => ai
            .tool_calls
            .iter()
            .map(|c| estimate_tokens(&c.name) + estimate_tokens(&c.args.to_string()))
            .sum(),
        _ => 0,
    };
    estimate_tokens(message.content()) + calls + MESSAGE_OVERHEAD
}

pub struct SummarizationMiddleware {
    config: SummarizationConfig,
    model: Arc<dyn ChatModel>,
    /// The run model's context window, for `fraction` triggers.
    context_window: Option<u64>,
    sink: Option<Arc<dyn DroppedMessagesSink>>,
}

impl SummarizationMiddleware {
    pub fn new(config: SummarizationConfig, model: Arc<dyn ChatModel>) -> Self {
        Self {
            config,
            model,
            context_window: None,
            sink: None,
        }
    }

    pub fn with_context_window(mut self, window: Option<u64>) -> Self {
        self.context_window = window;
        self
    }

    pub fn with_sink(mut self, sink: Option<Arc<dyn DroppedMessagesSink>>) -> Self {
        self.sink = sink;
        self
    }

    fn triggered(&self, messages: &[Message]) -> bool {
        // Counted once, and only when a trigger needs it (a message count does not).
        let tokens = std::cell::OnceCell::new();
        let tokens = || *tokens.get_or_init(|| messages.iter().map(message_tokens).sum::<u64>());
        self.config.trigger.iter().any(|t| match t.measure {
            ContextMeasure::Tokens => tokens() as f64 >= t.value,
            ContextMeasure::Messages => messages.len() as f64 >= t.value,
            ContextMeasure::Fraction => self
                .context_window
                .is_some_and(|window| tokens() as f64 >= t.value * window as f64),
        })
    }

    /// The summary; what writing it cost is shown to the run's event stream as a `Summarized`
    /// event (recorded by the run's account through the metered model).
    async fn summarize(&self, older: &[Message], ctx: &RunContext) -> Result<String, ModelError> {
        let request = ModelRequest {
            messages: vec![Message::human(summary_prompt(
                older,
                self.config.trim_tokens_to_summarize,
            ))]
            .into(),
            ..Default::default()
        };
        // Paid by the run's account: over budget the summary is skipped (the thread keeps
        // its messages) and the run's next call stops at the budget.
        let model = MeteredModel::for_run(
            self.model.clone(),
            ctx.meter.as_ref(),
            UsageKind::Summarization,
        );
        let mut stream = model.stream(&request).await?;
        while let Some(event) = stream.next().await {
            if let ModelEvent::Completed(message) = event? {
                if let Some(usage) = message.usage {
                    ctx.events.emit(RunEvent::Summarized {
                        model: self.model.name().to_string(),
                        usage,
                    });
                }
                return Ok(message.content.trim().to_string());
            }
        }
        Err(ModelError::Stream {
            model: self.model.name().to_string(),
            detail: "the stream ended before the summary was complete".into(),
        })
    }
}

/// Where the kept end starts: `keep` messages (or tokens) from the end, moved back so that no
/// tool result is kept without the AI message that asked for it. `0` = nothing to summarize.
pub fn cutoff(messages: &[Message], keep: ContextSize) -> usize {
    let mut cut = match keep.measure {
        ContextMeasure::Tokens => {
            let mut kept = 0u64;
            let mut at = messages.len();
            while at > 0 {
                let next = kept + message_tokens(&messages[at - 1]);
                if next as f64 > keep.value {
                    break;
                }
                kept = next;
                at -= 1;
            }
            at
        }
        _ => messages.len().saturating_sub(keep.value.max(1.0) as usize),
    };
    while cut > 0 && matches!(messages.get(cut), Some(Message::Tool(_))) {
        cut -= 1;
    }
    cut
}

/// What the summary model is told: the reference's (LangChain's) context extraction, with what
/// must survive named one by one.
const SUMMARY_INSTRUCTIONS: &str = "<role>
Context Extraction Assistant
</role>

<primary_objective>
Extract the most important context from the conversation history below. What you write replaces that history: anything you leave out is lost for the rest of the conversation.
</primary_objective>

<instructions>
Keep, explicitly and with specifics:
- the user's goals and requests, what is done and what is still to do (so no finished step is repeated);
- decisions taken with their reasons, and approaches that failed;
- open questions: what was asked and not yet answered, by either side;
- files and paths created, changed or read (/mnt/user-data/...), URLs and sources used, and the results that matter;
- the user's preferences, constraints and corrections;
- names, numbers and exact values needed later.
Carry an earlier summary over into yours. Drop pleasantries, repetition and tool output that no longer matters. Write in the conversation's language.
Respond ONLY with the extracted context, with nothing before or after it.
</instructions>

";

/// The summary request: [`SUMMARY_INSTRUCTIONS`] over the older messages, of which at most
/// `max_tokens` (the most recent ones) are included.
pub fn summary_prompt(older: &[Message], max_tokens: u64) -> String {
    let mut lines = Vec::new();
    let mut used = 0u64;
    for message in older.iter().rev() {
        let line = format_message(message);
        let cost = estimate_tokens(&line);
        if used + cost > max_tokens && !lines.is_empty() {
            break;
        }
        used += cost;
        lines.push(line);
    }
    lines.reverse();
    format!(
        "{SUMMARY_INSTRUCTIONS}<messages>\nMessages to summarize:\n{}\n</messages>",
        lines.join("\n")
    )
}

fn format_message(message: &Message) -> String {
    match message {
        Message::System(m) => format!("System: {}", m.content),
        Message::Human(m) if m.name.as_deref() == Some(SUMMARY_NAME) => {
            format!(
                "Earlier summary: {}",
                m.content.trim_start_matches(SUMMARY_PREFIX)
            )
        }
        // In a shared conversation the summary must still say who said what.
        Message::Human(m) => match m.shared_sender() {
            Some(sender) => format!("Human [{}]: {}", sender_label(sender.name), m.content),
            None => format!("Human: {}", m.content),
        },
        Message::Ai(m) => {
            let calls: Vec<String> = m
                .tool_calls
                .iter()
                .map(|c| format!("{}({})", c.name, c.args))
                .collect();
            if calls.is_empty() {
                format!("AI: {}", m.content)
            } else {
                format!("AI: {} [tool calls: {}]", m.content, calls.join(", "))
            }
        }
        Message::Tool(m) => format!("Tool {}: {}", m.name, m.content),
    }
}

#[async_trait]
impl Middleware for SummarizationMiddleware {
    fn name(&self) -> &str {
        "SummarizationMiddleware"
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn before_model(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        if !self.triggered(&state.messages) {
            return Ok(HookResult::proceed());
        }
        let cut = cutoff(&state.messages, self.config.keep);
        let (older, kept) = state.messages.split_at(cut);
        // The date reminder and the memory block are context, not conversation: they stay as
        // they are, ahead of the summary (DeerFlow's `_preserve_dynamic_context_reminders`).
        // Folded into the summary they were gone for good: the recorded date kept them from
        // being injected again.
        let (context, older): (Vec<Message>, Vec<Message>) =
            older.iter().cloned().partition(is_dynamic_context);
        // Nothing older, or only an earlier summary: summarizing again would gain nothing.
        let only_summary = matches!(older.as_slice(), [Message::Human(h)] if h.name.as_deref() == Some(SUMMARY_NAME));
        if older.is_empty() || only_summary {
            return Ok(HookResult::proceed());
        }
        if let Some(sink) = &self.sink {
            sink.dropped(ctx, &older).await;
        }
        let summary = tokio::select! {
            _ = ctx.cancel.cancelled() => return Ok(HookResult::proceed()),
            summary = self.summarize(&older, ctx) => summary,
        };
        let summary = match summary {
            Ok(summary) if !summary.is_empty() => summary,
            Ok(_) => {
                tracing::warn!(thread_id = %ctx.thread_id, "The summary model answered nothing; the thread keeps its messages");
                return Ok(HookResult::proceed());
            }
            Err(error) => {
                tracing::warn!(%error, thread_id = %ctx.thread_id, "Summarization failed; the thread keeps its messages");
                return Ok(HookResult::proceed());
            }
        };
        let note = hidden_human(SUMMARY_NAME, format!("{SUMMARY_PREFIX}{summary}"));
        let mut messages = Vec::with_capacity(context.len() + kept.len() + 1);
        messages.extend(context);
        messages.push(Message::Human(note));
        messages.extend(kept.iter().cloned());
        Ok(HookResult::update(StateUpdate {
            remove_all_messages: true,
            messages,
            summary_text: Some(summary),
            ..Default::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use antler_store::messages::{AiMessage, ToolCall, ToolMessage};

    fn pair(id: &str) -> [Message; 2] {
        let call = ToolCall {
            id: id.into(),
            name: "lookup".into(),
            args: json!({}),
            args_error: None,
        };
        let ai = Message::Ai(AiMessage {
            tool_calls: vec![call.clone()],
            ..Default::default()
        });
        [ai, Message::Tool(ToolMessage::success(&call, "r"))]
    }

    #[test]
    fn estimates_count_ascii_by_fours_and_other_characters_singly() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("你好世界"), 4);
        // Two-, three- and four-byte characters count once each, ASCII by fours.
        assert_eq!(estimate_tokens("héllo wörld 😀"), 3 + 3);
        for text in ["naïve café", "日本語 text", "emoji 🎉🎉 end", "plain"] {
            let ascii = text.chars().filter(char::is_ascii).count() as u64;
            let other = text.chars().count() as u64 - ascii;
            assert_eq!(estimate_tokens(text), ascii.div_ceil(4) + other, "{text}");
        }
        assert_eq!(
            message_tokens(&Message::human("abcd")),
            1 + MESSAGE_OVERHEAD
        );
    }

    #[test]
    fn the_cut_never_keeps_a_tool_result_without_its_call() {
        let [call, result] = pair("c1");
        let messages = vec![
            Message::human("a"),
            Message::ai("b"),
            call,
            result,
            Message::ai("c"),
        ];
        let keep = |measure, value| ContextSize { measure, value };
        // Keeping 2 would start at the tool result: the call comes along.
        assert_eq!(cutoff(&messages, keep(ContextMeasure::Messages, 2.0)), 2);
        assert_eq!(cutoff(&messages, keep(ContextMeasure::Messages, 1.0)), 4);
        assert_eq!(cutoff(&messages, keep(ContextMeasure::Messages, 9.0)), 0);
        // By tokens: each short message is 5 tokens.
        assert_eq!(cutoff(&messages, keep(ContextMeasure::Tokens, 5.0)), 4);
        assert_eq!(cutoff(&messages, keep(ContextMeasure::Tokens, 11.0)), 2);
    }

    #[test]
    fn the_prompt_keeps_the_most_recent_older_messages_within_its_budget() {
        let older = vec![
            Message::human("x".repeat(400)),
            Message::ai("the latest answer"),
        ];
        let prompt = summary_prompt(&older, 20);
        assert!(prompt.contains("AI: the latest answer"), "{prompt}");
        assert!(!prompt.contains("xxxx"), "{prompt}");
    }

    /// What the summary model reads, as a snapshot (`tests/prompts/`).
    #[test]
    fn the_summary_request_snapshot() {
        let call = ToolCall {
            id: "c1".into(),
            name: "web_search".into(),
            args: json!({"query": "log databases"}),
            args_error: None,
        };
        let older = vec![
            Message::human("Compare databases for our application logs; we keep them 30 days."),
            Message::Ai(AiMessage {
                tool_calls: vec![call.clone()],
                ..Default::default()
            }),
            Message::Tool(ToolMessage::success(
                &call,
                "Loki: https://grafana.com/oss/loki/",
            )),
            Message::ai("Loki fits: cheap storage, label queries. Shall I write a report?"),
            Message::human("Yes, as Markdown."),
        ];
        expect_test::expect_file!["../../tests/prompts/summarization.txt"]
            .assert_eq(&summary_prompt(&older, 4000));
    }
}
