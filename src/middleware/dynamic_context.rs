//! `DynamicContextMiddleware`: gives the model today's date (and the user's memory) as hidden
//! system messages, so the static system prompt stays the same for every user and turn.
//!
//! It works in `before_agent`, which runs once per run after the user's message was appended and
//! whose update is checkpointed with the run, so the context is persisted once and replayed
//! verbatim on later turns. The coalescing middleware merges these messages into the system
//! prompt of each request: the model reads the date and the `<memory>` block there, apart from
//! anything a person wrote.
//!
//! A thread without a date reminder (its first run, or one whose reminder an older version
//! summarized away): before the current human message it inserts a system `<system-reminder>`
//! with `<current_date>` and, when memory is available and the thread has no memory block yet, a
//! system `<memory>` block. Later runs: when the local date differs from the reminder's (a
//! midnight crossing), the reminder is rewritten in place with the new date, so the model always
//! reads exactly one current date; extra date reminders an older version added are removed.
//!
//! Messages are upserted by id and new ids append, so "insert before" is done as DeerFlow does
//! it: the current human message and everything after it are removed and re-added behind the
//! reminder; the reminder takes the human message's original id and the message gets
//! `<id>__user`. Summarization keeps every message carrying [`DYNAMIC_CONTEXT_MARKER`] out of
//! what it summarizes ([`is_dynamic_context`]).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{Local, NaiveDate};
use serde_json::{Map, Value};

use crate::agent_api::RunContext;
use crate::agent_api::shared::{MEMORY_LOAD_TIMEOUT, MemorySource};
use crate::agent_api::{HookResult, Middleware, MiddlewareError};
use antler_store::messages::{Message, MessageMeta, SystemMessage};
use antler_store::state::{StateUpdate, ThreadState};

/// `state.extra` key holding the date (`YYYY-MM-DD`) the model was last told.
pub const REMINDER_DATE_KEY: &str = "reminder_date";
/// Marker in `meta.extra` of every message this middleware injects.
pub const DYNAMIC_CONTEXT_MARKER: &str = "dynamic_context_reminder";

/// Today's local date; injectable so midnight crossings are testable.
pub trait Clock: Send + Sync {
    fn today(&self) -> NaiveDate;
}

/// The machine's local calendar date.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn today(&self) -> NaiveDate {
        Local::now().date_naive()
    }
}

pub struct DynamicContextMiddleware {
    clock: Arc<dyn Clock>,
    memory: Option<Arc<dyn MemorySource>>,
}

impl Default for DynamicContextMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl DynamicContextMiddleware {
    /// Date only, from the system clock.
    pub fn new() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            memory: None,
        }
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub fn with_memory(mut self, memory: Arc<dyn MemorySource>) -> Self {
        self.memory = Some(memory);
        self
    }

    async fn load_memory(&self, ctx: &RunContext) -> Option<String> {
        let source = self.memory.as_ref()?;
        let agent = ctx
            .agent_name
            .as_deref()
            .or(ctx.options.agent_name.as_deref());
        match tokio::time::timeout(
            MEMORY_LOAD_TIMEOUT,
            source.memory_for(&ctx.users.speaker, agent),
        )
        .await
        {
            Ok(memory) => memory.filter(|m| !m.trim().is_empty()),
            Err(_) => {
                tracing::warn!(user_id = %ctx.users.speaker, thread_id = %ctx.thread_id, "Memory took too long to load; this turn goes on without it");
                None
            }
        }
    }
}

/// `2026-05-08, Friday`
pub fn format_reminder_date(date: NaiveDate) -> String {
    date.format("%Y-%m-%d, %A").to_string()
}

/// The reminder text for a date.
pub fn date_reminder(date: NaiveDate) -> String {
    format!(
        "<system-reminder>\n<current_date>{}</current_date>\n</system-reminder>",
        format_reminder_date(date)
    )
}

/// The first line of the `<memory>` block: what it is, and that it may be outdated.
pub const MEMORY_HEADER: &str = "What you remember about the user from earlier conversations \
     (it may be outdated; what the user says now wins):";

/// The `<memory>` block around the remembered text.
pub fn memory_block(memory: &str) -> String {
    format!("<memory>\n{MEMORY_HEADER}\n{}\n</memory>", memory.trim())
}

/// Whether `message` is dynamic context (a date reminder or a memory block) rather than part of
/// the conversation: summarization keeps it as it is.
pub fn is_dynamic_context(message: &Message) -> bool {
    message
        .meta()
        .extra
        .get(DYNAMIC_CONTEXT_MARKER)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The date (`YYYY-MM-DD`) a date reminder carries; `None` for every other message.
fn reminder_date(message: &Message) -> Option<&str> {
    if !matches!(message, Message::System(_)) || !is_dynamic_context(message) {
        return None;
    }
    message.meta().extra.get(REMINDER_DATE_KEY)?.as_str()
}

#[async_trait]
impl Middleware for DynamicContextMiddleware {
    fn name(&self) -> &str {
        "DynamicContextMiddleware"
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn before_agent(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let Some(turn_start) = state.current_turn_start() else {
            return Ok(HookResult::proceed());
        };
        let today = self.clock.today();
        let today_key = today.format("%Y-%m-%d").to_string();
        let reminders: Vec<(&Message, &str)> = state
            .messages
            .iter()
            .filter_map(|m| reminder_date(m).map(|date| (m, date)))
            .collect();
        let update = match reminders.as_slice() {
            [] => self.first_context(state, turn_start, today, ctx).await,
            [(_, date)] if *date == today_key => return Ok(HookResult::proceed()),
            [(kept, _), extra @ ..] => redate(kept, extra, today),
        };
        let Some(mut update) = update else {
            return Ok(HookResult::proceed());
        };
        update
            .extra
            .insert(REMINDER_DATE_KEY.to_string(), Value::String(today_key));
        Ok(HookResult::update(update))
    }
}

impl DynamicContextMiddleware {
    /// The date reminder (and the memory block, unless the thread has one) before the current
    /// human message.
    async fn first_context(
        &self,
        state: &ThreadState,
        turn_start: usize,
        today: NaiveDate,
        ctx: &RunContext,
    ) -> Option<StateUpdate> {
        let tail = &state.messages[turn_start..];
        let Some(Message::Human(human)) = tail.first() else {
            return None;
        };
        let today_key = today.format("%Y-%m-%d").to_string();
        let mut injected = vec![Message::System(SystemMessage {
            id: human.id.clone(),
            content: date_reminder(today).into(),
            meta: marker_meta(Some(&today_key)),
        })];
        let has_memory = state
            .messages
            .iter()
            .any(|m| is_dynamic_context(m) && reminder_date(m).is_none());
        if !has_memory && let Some(memory) = self.load_memory(ctx).await {
            injected.push(Message::System(SystemMessage {
                id: format!("{}__memory", human.id).into(),
                content: memory_block(&memory).into(),
                meta: marker_meta(None),
            }));
        }
        let mut moved = tail.to_vec();
        moved[0].set_id(format!("{}__user", human.id));
        injected.extend(moved);
        Some(StateUpdate {
            remove_messages: tail.iter().map(|m| m.id().to_string()).collect(),
            messages: injected,
            ..Default::default()
        })
    }
}

/// The first date reminder rewritten in place with `today`, the others removed.
fn redate(kept: &Message, extra: &[(&Message, &str)], today: NaiveDate) -> Option<StateUpdate> {
    let today_key = today.format("%Y-%m-%d").to_string();
    Some(StateUpdate {
        remove_messages: extra.iter().map(|(m, _)| m.id().to_string()).collect(),
        messages: vec![Message::System(SystemMessage {
            id: kept.id().to_string().into(),
            content: date_reminder(today).into(),
            meta: marker_meta(Some(&today_key)),
        })],
        ..Default::default()
    })
}

fn marker_meta(reminder_date: Option<&str>) -> MessageMeta {
    let mut extra = Map::new();
    extra.insert(DYNAMIC_CONTEXT_MARKER.to_string(), Value::Bool(true));
    if let Some(date) = reminder_date {
        extra.insert(
            REMINDER_DATE_KEY.to_string(),
            Value::String(date.to_string()),
        );
    }
    MessageMeta {
        hide_from_ui: true,
        extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AppConfig;
    use antler_store::messages::HumanMessage;

    struct Fixed(NaiveDate);

    impl Clock for Fixed {
        fn today(&self) -> NaiveDate {
            self.0
        }
    }

    fn middleware() -> DynamicContextMiddleware {
        let date = NaiveDate::from_ymd_opt(2026, 5, 8).unwrap();
        DynamicContextMiddleware::new().with_clock(Arc::new(Fixed(date)))
    }

    #[test]
    fn date_format_is_iso_date_and_weekday() {
        let date = NaiveDate::from_ymd_opt(2026, 7, 1).unwrap();
        assert_eq!(format_reminder_date(date), "2026-07-01, Wednesday");
    }

    #[tokio::test]
    async fn nothing_happens_without_a_genuine_human_message() {
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let mut hidden = HumanMessage {
            id: "h".into(),
            content: "context".into(),
            ..Default::default()
        };
        hidden.meta.hide_from_ui = true;
        let state = ThreadState {
            messages: vec![Message::system("s"), Message::Human(hidden)].into(),
            ..Default::default()
        };
        let result = middleware().before_agent(&state, &ctx).await.unwrap();
        assert!(result.update.is_empty());
    }

    #[tokio::test]
    async fn messages_after_the_current_human_keep_their_order() {
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let mut state = ThreadState::default();
        let mut user = Message::human("hi");
        user.set_id("h1".into());
        let mut note = Message::human("note");
        note.set_id("n1".into());
        if let Message::Human(h) = &mut note {
            h.name = Some("upload_note".into());
        }
        state.messages = vec![user, note].into();
        let result = middleware().before_agent(&state, &ctx).await.unwrap();
        state.apply(result.update).unwrap();
        let ids: Vec<&str> = state.messages.iter().map(Message::id).collect();
        assert_eq!(ids, ["h1", "h1__user", "n1"]);
    }
}
