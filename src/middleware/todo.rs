//! `TodoMiddleware` and the `write_todos` tool (plan mode): a visible task list the model keeps.
//!
//! The tool replaces `state.todos`. When the call that wrote the list has scrolled out of the
//! recent history the model is reminded of the list (request-only), and a model that stops while
//! items are still open is asked, once per run, to carry on.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, Middleware, MiddlewareError, ModelNext};
use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, ToolRef, parse_args, schema_for};
use crate::messages::{AiMessage, Message};
use crate::middleware::support::hidden_human;
use crate::model::{ModelError, ModelRequest};
use crate::state::{StateUpdate, ThreadState, Todo, TodoStatus};

pub const WRITE_TODOS: &str = "write_todos";
/// The list is re-shown when no `write_todos` call is among this many most recent messages.
pub const REMINDER_WINDOW: usize = 20;
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

    fn tools(&self) -> Vec<ToolRef> {
        vec![Arc::new(WriteTodosTool)]
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        state: &ThreadState,
        _ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        if let Some(todos) = state.todos.as_deref().filter(|t| !t.is_empty()) {
            let recent = request.messages.len().saturating_sub(REMINDER_WINDOW);
            let visible = request.messages[recent..].iter().any(|m| {
                m.as_ai()
                    .is_some_and(|ai| ai.tool_calls.iter().any(|c| c.name == WRITE_TODOS))
            });
            if !visible {
                request.messages.push(Message::Human(hidden_human(
                    TODO_REMINDER_NAME,
                    format!(
                        "<system-reminder>\nYour current todo list (update it with write_todos as you progress):\n{}\n</system-reminder>",
                        format_todos(todos)
                    ),
                )));
            }
        }
        next.call(request).await
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
        "Create or update the todo list for a complex task. Use it only for tasks with 3 or more \
         distinct steps. Send the whole list each time; keep exactly one item in_progress while \
         working and mark items completed as soon as they are done."
    }

    fn parameters(&self) -> Value {
        schema_for::<WriteTodosArgs>()
    }

    async fn call(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
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
            messages: vec![Message::human("do it"), Message::ai("done?")],
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
    async fn reminds_of_the_list_once_the_write_scrolled_out() {
        use crate::model::{ScriptedModel, ScriptedTurn};
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let state = ThreadState {
            todos: Some(vec![todo("a", TodoStatus::InProgress)]),
            ..Default::default()
        };
        let mut messages = vec![Message::human("start")];
        messages.extend((0..REMINDER_WINDOW).map(|i| Message::ai(format!("step {i}"))));
        let model = ScriptedModel::new("m", [ScriptedTurn::Text(vec!["ok".into()])]);
        let request = ModelRequest {
            messages,
            ..Default::default()
        };
        TodoMiddleware
            .wrap_model_call(
                request,
                &state,
                &ctx,
                ModelNext::new(&[], &model, &state, &ctx),
            )
            .await
            .unwrap();
        let sent = model.requests().pop().unwrap();
        let reminder = sent.messages.last().unwrap().as_human().unwrap();
        assert_eq!(reminder.name.as_deref(), Some(TODO_REMINDER_NAME));
        assert!(reminder.content.contains("- [in_progress] a"));
    }

    #[tokio::test]
    async fn completed_lists_do_not_nudge() {
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let state = ThreadState {
            messages: vec![Message::human("do it"), Message::ai("done")],
            todos: Some(vec![todo("a", TodoStatus::Completed)]),
            ..Default::default()
        };
        assert_eq!(
            TodoMiddleware.after_model(&state, &ctx).await.unwrap(),
            HookResult::proceed()
        );
    }
}
