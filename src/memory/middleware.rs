//! `MemoryMiddleware`: after a run, queues the thread's conversation for a memory update of the
//! run's speaker — only what they typed and the assistant's final answers to them.
//!
//! Tool calls and results, harness-injected messages (reminders, memory itself) and the
//! `<current_uploads>` block are left out; a run whose user turns were only uploads, or that
//! produced no answer, queues nothing. The queue reads the conversation from the thread when
//! the update runs, so a turn hands over only the thread's name.

use async_trait::async_trait;

use crate::agent_api::taint;
use crate::agent_api::{HookResult, Middleware, MiddlewareError, RunContext};
use crate::memory::conversation::{Author, has_exchange};
use crate::memory::queue::MAX_MESSAGES;
use crate::memory::queue::{MemoryQueue, PendingConversation};
use crate::memory::repo::MemoryScope;
use antler_store::state::ThreadState;

pub struct MemoryMiddleware {
    queue: MemoryQueue,
}

impl MemoryMiddleware {
    pub fn new(queue: MemoryQueue) -> Self {
        Self { queue }
    }
}

#[async_trait]
impl Middleware for MemoryMiddleware {
    fn name(&self) -> &str {
        "MemoryMiddleware"
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn after_agent(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        // In a shared conversation only the speaker's own messages teach their memory.
        let author = Author {
            user_id: &ctx.users.speaker,
            owner_id: &ctx.users.owner,
        };
        if !has_exchange(&state.messages, author, MAX_MESSAGES) {
            return Ok(HookResult::proceed());
        }
        let agent = ctx
            .agent_name
            .as_deref()
            .or(ctx.options.agent_name.as_deref());
        let mut pending = PendingConversation::new(
            MemoryScope::new(ctx.users.speaker.clone(), agent),
            ctx.thread_id.clone(),
            ctx.options.model_name.clone(),
        );
        // What is learned from a context holding outside text waits for the user's word.
        pending.untrusted = taint::sources(state).iter().map(|s| s.label()).collect();
        if let Err(error) = self.queue.enqueue(pending) {
            // Memory is best effort: the answer is already given.
            tracing::warn!(%error, thread_id = %ctx.thread_id, "Could not queue the memory update");
        }
        Ok(HookResult::proceed())
    }
}

/// Gives memory the messages summarization is about to drop from a thread's context, so they
/// reach the next update before they are gone (the `DroppedMessagesSink` of the lead agent).
pub struct DroppedToMemory {
    queue: MemoryQueue,
}

impl DroppedToMemory {
    pub fn new(queue: MemoryQueue) -> Self {
        Self { queue }
    }
}

#[async_trait]
impl crate::agent_api::DroppedMessagesSink for DroppedToMemory {
    async fn dropped(&self, ctx: &RunContext, messages: &[antler_store::messages::Message]) {
        let agent = ctx
            .agent_name
            .as_deref()
            .or(ctx.options.agent_name.as_deref());
        let scope = MemoryScope::new(ctx.users.speaker.clone(), agent);
        let model = ctx.options.model_name.clone();
        let author = Author {
            user_id: &ctx.users.speaker,
            owner_id: &ctx.users.owner,
        };
        if let Err(error) =
            self.queue
                .enqueue_dropped(scope, &ctx.thread_id, model, author, messages)
        {
            tracing::warn!(%error, thread_id = %ctx.thread_id, "Could not queue the dropped messages for memory");
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::memory::conversation::{
        Author, conversation_of, has_exchange, recent_conversation_of,
    };
    use antler_store::messages::Message;
    use antler_store::messages::{AiMessage, HumanMessage, ToolCall, ToolMessage};

    #[test]
    fn only_user_inputs_and_final_answers_are_kept() {
        let mut hidden = HumanMessage {
            id: "m".into(),
            content: "<memory>x</memory>".into(),
            ..Default::default()
        };
        hidden.meta.hide_from_ui = true;
        let upload_only = Message::human("<current_uploads>\n- a.pdf\n</current_uploads>\n\n");
        let with_upload =
            Message::human("<current_uploads>\n- a.pdf\n</current_uploads>\n\nsum it up");
        let tool_call = Message::Ai(AiMessage {
            content: "let me look".into(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                args: serde_json::json!({}),
                args_error: None,
            }],
            ..Default::default()
        });
        let tool_result = Message::Tool(ToolMessage {
            tool_call_id: "c1".into(),
            content: "file text".into(),
            ..Default::default()
        });
        let messages = vec![
            Message::system("reminder"),
            Message::Human(hidden),
            upload_only,
            with_upload,
            tool_call,
            tool_result,
            Message::ai("It says hello."),
        ];
        let conversation = conversation_of(&messages, Author::alone("u"));
        let pairs: Vec<(&str, &str)> = conversation
            .iter()
            .map(|m| (m.role.as_str(), m.content.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [("user", "sum it up"), ("assistant", "It says hello.")]
        );
    }

    #[test]
    fn a_long_thread_gives_only_its_newest_entries_cut_to_size() {
        let mut messages = Vec::new();
        for i in 0..500 {
            messages.push(Message::human(format!("question {i} {}", "é".repeat(20))));
            messages.push(Message::ai(format!("answer {i}")));
        }
        let recent = recent_conversation_of(&messages, Author::alone("u"), 5, 12);
        let everything = conversation_of(&messages, Author::alone("u"));
        assert_eq!(recent.len(), 5);
        for (got, full) in recent.iter().zip(&everything[everything.len() - 5..]) {
            assert_eq!(got.role, full.role);
            let expected: String = full.content.chars().take(12).collect();
            assert_eq!(got.content, expected);
        }
        assert_eq!(recent[4].content, "answer 499");
    }

    #[test]
    fn an_exchange_needs_a_user_text_and_an_answer_among_the_newest_entries() {
        let question = Message::human("hello");
        let answer = Message::ai("hi");
        let upload_only = Message::human("<current_uploads>\n- a.pdf\n</current_uploads>");
        assert!(has_exchange(
            &[question.clone(), answer.clone()],
            Author::alone("u"),
            60
        ));
        assert!(!has_exchange(
            std::slice::from_ref(&question),
            Author::alone("u"),
            60
        ));
        assert!(!has_exchange(
            &[upload_only, answer.clone()],
            Author::alone("u"),
            60
        ));
        let mut long = vec![question];
        long.extend(std::iter::repeat_n(answer, 3));
        assert!(has_exchange(&long, Author::alone("u"), 4));
        assert!(
            !has_exchange(&long, Author::alone("u"), 3),
            "the question is past the window"
        );
    }
}
