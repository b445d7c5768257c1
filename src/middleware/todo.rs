//! `TodoMiddleware` and the `write_todos` tool (plan mode): a visible task list the model keeps.
//!
//! The tool replaces `state.todos` and announces the new list as a `todos_updated` run event
//! (chat status messages and the web chat draw it). When the call that wrote the list is no
//! longer in the context (summarization dropped it) the model gets one reminder of the list, and
//! a model that stops while items are still open is asked, once per run, to finish or explain.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, MemoSpec, Middleware, MiddlewareError, RunEvent};
use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, ToolRef, parse_args, schema_for};
use crate::middleware::support::hidden_human;
use antler_store::messages::Message;
use antler_store::state::{StateUpdate, ThreadState, Todo, TodoStatus};

pub const WRITE_TODOS: &str = "write_todos";
pub const TODO_REMINDER_NAME: &str = "todo_reminder";
pub const TODO_CONTINUE_NAME: &str = "todo_continue";
/// `state.extra` key holding the run id that already got the "keep going" nudge.
const CONTINUE_KEY: &str = "todo_continue_run";

#[derive(Debug, Default)]
pub struct TodoMiddleware;

impl TodoMiddleware {
    pub fn new() -> Self {
        Self
    }
}

/// The todo list as the model reads it: `- [status] content`.
pub fn format_todos(todos: &[Todo]) -> String {
    todos
        .iter()
        .map(|t| {
            let status = match t.status {
                TodoStatus::Pending => "pending",
                TodoStatus::InProgress => "in_progress",
                TodoStatus::Completed => "completed",
            };
            format!("- [{status}] {}", t.content)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The seed's reminder for a list whose `write_todos` call is no longer in the context.
pub fn context_loss_reminder(todos: &[Todo]) -> String {
    format!(
        "<system_reminder>\nYour todo list from earlier is no longer visible in the current context window,\nbut it is still active. Here is the current state:\n\n{}\n\nContinue tracking and updating this todo list as you work.\nCall `write_todos` whenever the status of any item changes.\n</system_reminder>",
        format_todos(todos)
    )
}

fn open_todos(state: &ThreadState) -> Option<&[Todo]> {
    state
        .todos
        .as_deref()
        .filter(|todos| todos.iter().any(|t| t.status != TodoStatus::Completed))
}

#[async_trait]
impl Middleware for TodoMiddleware {
    fn name(&self) -> &str {
        "TodoMiddleware"
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    fn tools(&self) -> Vec<ToolRef> {
        // Built once per process, like every registry tool's spec.
        static TOOL: LazyLock<ToolRef> = LazyLock::new(|| MemoSpec::wrap(Arc::new(WriteTodosTool)));
        vec![TOOL.clone()]
    }

    /// Re-shows the list once its `write_todos` call left the context (summarization dropped
    /// it): one persisted reminder, not repeated while it is itself still in the context.
    async fn before_model(
        &self,
        state: &ThreadState,
        _ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let Some(todos) = state.todos.as_deref().filter(|t| !t.is_empty()) else {
            return Ok(HookResult::proceed());
        };
        let in_context = state.messages.iter().any(|m| match m {
            Message::Ai(ai) => ai.tool_calls.iter().any(|c| c.name == WRITE_TODOS),
            Message::Human(h) => h.name.as_deref() == Some(TODO_REMINDER_NAME),
            _ => false,
        });
        if in_context {
            return Ok(HookResult::proceed());
        }
        Ok(HookResult::update(StateUpdate::message(Message::Human(
            hidden_human(TODO_REMINDER_NAME, context_loss_reminder(todos)),
        ))))
    }

    async fn after_model(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let ends = state.last_ai().is_some_and(|ai| ai.tool_calls.is_empty());
        let Some(open) = open_todos(state).filter(|_| ends) else {
            return Ok(HookResult::proceed());
        };
        let nudged = state.extra.get(CONTINUE_KEY).and_then(Value::as_str) == Some(&ctx.run_id);
        if nudged {
            return Ok(HookResult::proceed());
        }
        let mut update = StateUpdate::message(Message::Human(hidden_human(
            TODO_CONTINUE_NAME,
            format!(
                "<system-reminder>\nYou stopped while your todo list still has open items:\n{}\nContinue working on them, or update the list with write_todos if they are done or no longer needed, then give your final answer.\n</system-reminder>",
                format_todos(open)
            ),
        )));
        update
            .extra
            .insert(CONTINUE_KEY.to_string(), json!(ctx.run_id));
        Ok(HookResult::retry_model(update))
    }
}

/// The reference's usage rules for the tool, in full: when to keep a list, how to keep it,
/// and when a task counts as completed.
const WRITE_TODOS_DESCRIPTION: &str = "Create and update a structured task list for complex \
work, so the user sees your progress. Each call sends the complete list: it replaces the previous one.

Only use it for complex work (3 or more steps). For a simple request, just do the work.

When to use it:
1. Tasks with 3 or more distinct steps or actions.
2. Non-trivial tasks that need careful planning or several operations.
3. The user asks for a todo list or for tracking.
4. The user gives several tasks (numbered or comma-separated).
5. The plan may change with intermediate results.

When not to use it:
1. A straightforward task of fewer than 3 steps.
2. A trivial task where tracking adds nothing.
3. Conversation, or a purely informational answer.
4. It is clear what to do and you can just do it.

How to use it:
1. Mark a task in_progress before you start on it; when you first write the list, mark the \
first task in_progress at once.
2. Mark a task completed immediately after finishing it; never save completions for later.
3. Add tasks you discover, remove ones that no longer matter, reword them as you learn.
4. One call may change several tasks (complete one and start the next).
5. Until every task is completed, keep at least one in_progress.

States: pending (not started), in_progress (being worked on; several only when tasks really \
run in parallel), completed (fully done).

Mark a task completed only when it is fully done. Never when errors remain, the work is \
partial, a blocker stopped you, a file or dependency it needs is missing, or the result falls \
short of what was asked. If blocked, keep the task in_progress and add a task for what must be \
resolved.

Make tasks specific and actionable: `content` in the imperative (\"Run the tests\") and, \
optionally, `activeForm` in the present continuous (\"Running the tests\").

Remember: if a few tool calls finish the job and the way is clear, do it directly, without this tool.";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteTodosArgs {
    /// The complete, updated todo list (it replaces the previous one).
    pub todos: Vec<TodoItem>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TodoItem {
    /// What to do, in the imperative ("Run the tests").
    pub content: String,
    pub status: TodoItemStatus,
    /// The same in present continuous ("Running the tests"), shown while in progress.
    #[serde(default, rename = "activeForm")]
    pub active_form: Option<String>,
}

#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoItemStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(Debug, Default)]
pub struct WriteTodosTool;

#[async_trait]
impl Tool for WriteTodosTool {
    fn name(&self) -> &str {
        WRITE_TODOS
    }

    fn description(&self) -> &str {
        WRITE_TODOS_DESCRIPTION
    }

    fn parameters(&self) -> Value {
        schema_for::<WriteTodosArgs>()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: WriteTodosArgs = parse_args(args)?;
        let todos: Vec<Todo> = args
            .todos
            .into_iter()
            .map(|t| Todo {
                content: t.content,
                status: match t.status {
                    TodoItemStatus::Pending => TodoStatus::Pending,
                    TodoItemStatus::InProgress => TodoStatus::InProgress,
                    TodoItemStatus::Completed => TodoStatus::Completed,
                },
                active_form: t.active_form,
            })
            .collect();
        ctx.run.events.emit(RunEvent::TodosUpdated {
            todos: todos.clone(),
        });
        Ok(ToolOutput {
            content: format!("Updated todo list:\n{}", format_todos(&todos)),
            update: StateUpdate {
                todos: Some(todos),
                ..Default::default()
            },
            artifact: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_api::Flow;
    use crate::config::AppConfig;
    use antler_store::messages::AiMessage;

    fn todo(content: &str, status: TodoStatus) -> Todo {
        Todo {
            content: content.into(),
            status,
            active_form: None,
        }
    }

    #[tokio::test]
    async fn write_todos_replaces_the_list() {
        let run = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let state = ThreadState::default();
        let ctx = ToolContext {
            run: &run,
            state: &state,
            tool_call_id: "c",
        };
        let args = json!({"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]});
        let out = WriteTodosTool.call(args, &ctx).await.unwrap();
        let todos = out.update.todos.unwrap();
        assert_eq!(todos.len(), 2);
        assert_eq!(todos[0].status, TodoStatus::InProgress);
        assert!(out.content.contains("- [pending] b"));
        assert!(
            WriteTodosTool
                .call(json!({"todos": "x"}), &ctx)
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn asks_to_continue_once_per_run() {
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let mut state = ThreadState {
            messages: vec![Message::human("do it"), Message::ai("done?")].into(),
            todos: Some(vec![
                todo("a", TodoStatus::Completed),
                todo("b", TodoStatus::Pending),
            ]),
            ..Default::default()
        };
        let first = TodoMiddleware.after_model(&state, &ctx).await.unwrap();
        assert_eq!(first.flow, Flow::RetryModel);
        assert!(first.update.messages[0].content().contains("- [pending] b"));
        state.apply(first.update).unwrap();
        state.messages.push(Message::ai("really done"));
        let second = TodoMiddleware.after_model(&state, &ctx).await.unwrap();
        assert_eq!(second.flow, Flow::Continue);
    }

    #[tokio::test]
    async fn reminds_of_the_list_once_when_its_write_left_the_context() {
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let write = Message::Ai(AiMessage {
            tool_calls: vec![antler_store::messages::ToolCall {
                id: "w".into(),
                name: WRITE_TODOS.into(),
                args: json!({}),
                args_error: None,
            }],
            ..Default::default()
        });
        let mut state = ThreadState {
            messages: vec![Message::human("start"), write].into(),
            todos: Some(vec![
                todo("a", TodoStatus::InProgress),
                todo("b", TodoStatus::Pending),
            ]),
            ..Default::default()
        };
        let visible = TodoMiddleware.before_model(&state, &ctx).await.unwrap();
        assert_eq!(
            visible,
            HookResult::proceed(),
            "the call is still in the context"
        );
        // Summarization dropped the call.
        state.messages.remove(1);
        let first = TodoMiddleware.before_model(&state, &ctx).await.unwrap();
        let reminder = first.update.messages[0].as_human().unwrap().clone();
        assert_eq!(reminder.name.as_deref(), Some(TODO_REMINDER_NAME));
        assert_eq!(
            reminder.content,
            "<system_reminder>\nYour todo list from earlier is no longer visible in the current context window,\nbut it is still active. Here is the current state:\n\n- [in_progress] a\n- [pending] b\n\nContinue tracking and updating this todo list as you work.\nCall `write_todos` whenever the status of any item changes.\n</system_reminder>"
        );
        state.apply(first.update).unwrap();
        state.messages.push(Message::ai("working"));
        let again = TodoMiddleware.before_model(&state, &ctx).await.unwrap();
        assert_eq!(
            again,
            HookResult::proceed(),
            "one reminder, not one per call"
        );
    }

    #[tokio::test]
    async fn write_todos_announces_the_list() {
        let (events, mut rx) = crate::agent_api::EventSink::channel(false);
        let mut run = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        run.events = events;
        let state = ThreadState::default();
        let ctx = ToolContext {
            run: &run,
            state: &state,
            tool_call_id: "c",
        };
        let args =
            json!({"todos": [{"content": "a", "status": "in_progress", "activeForm": "Doing a"}]});
        WriteTodosTool.call(args, &ctx).await.unwrap();
        let Some(RunEvent::TodosUpdated { todos }) = rx.recv().await else {
            panic!("a todos event")
        };
        assert_eq!(todos[0].active_form.as_deref(), Some("Doing a"));
        assert!(WRITE_TODOS_DESCRIPTION.contains("fewer than 3 steps"));
    }

    #[tokio::test]
    async fn completed_lists_do_not_nudge() {
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let state = ThreadState {
            messages: vec![Message::human("do it"), Message::ai("done")].into(),
            todos: Some(vec![todo("a", TodoStatus::Completed)]),
            ..Default::default()
        };
        assert_eq!(
            TodoMiddleware.after_model(&state, &ctx).await.unwrap(),
            HookResult::proceed()
        );
    }
}
