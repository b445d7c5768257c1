//! The plan and sub-task board of a status message: the todo list (☐ pending, ▶ in progress,
//! ☑ done) and each sub-task with its short description and state, kept from run events.

use serde_json::Value;

use crate::middleware::todo::TODOS_UPDATED;
use crate::subagents::report::{
    TASK_CANCELLED, TASK_COMPLETED, TASK_FAILED, TASK_RUNNING, TASK_STARTED, TASK_TIMED_OUT,
};
use antler_store::state::{Todo, TodoStatus};

#[derive(Debug, Default)]
pub(crate) struct Board {
    todos: Vec<Todo>,
    tasks: Vec<SubTask>,
}

#[derive(Debug)]
struct SubTask {
    id: String,
    description: String,
    state: &'static str,
    messages: u64,
}

impl Board {
    /// Takes in a custom run event; `true` when the board changed.
    pub(crate) fn apply(&mut self, name: &str, data: &Value) -> bool {
        if name == TODOS_UPDATED {
            return match serde_json::from_value::<Vec<Todo>>(data["todos"].clone()) {
                Ok(todos) => {
                    self.todos = todos;
                    true
                }
                Err(_) => false,
            };
        }
        let Some(id) = data["task_id"].as_str() else {
            return false;
        };
        if name == TASK_STARTED {
            let description = data["description"].as_str().unwrap_or("sub-task").trim();
            self.tasks.push(SubTask {
                id: id.to_string(),
                description: description.chars().take(60).collect(),
                state: "running",
                messages: 0,
            });
            return true;
        }
        let Some(task) = self.tasks.iter_mut().find(|t| t.id == id) else {
            return false;
        };
        match name {
            TASK_RUNNING => task.messages = data["message_index"].as_u64().unwrap_or(0),
            TASK_COMPLETED => task.state = "done",
            TASK_FAILED => task.state = "failed",
            TASK_TIMED_OUT => task.state = "timed out",
            TASK_CANCELLED => task.state = "cancelled",
            _ => return false,
        }
        true
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.todos.is_empty() && self.tasks.is_empty()
    }

    pub(crate) fn render(&self) -> String {
        let todos = self.todos.iter().map(|todo| match todo.status {
            TodoStatus::Pending => format!("☐ {}", todo.content),
            TodoStatus::InProgress => {
                format!("▶ {}", todo.active_form.as_deref().unwrap_or(&todo.content))
            }
            TodoStatus::Completed => format!("☑ {}", todo.content),
        });
        let tasks = self.tasks.iter().map(|task| {
            let mark = match task.state {
                "running" => "⏳",
                "done" => "✓",
                _ => "✗",
            };
            let steps = if task.state == "running" && task.messages > 0 {
                format!(", step {}", task.messages)
            } else {
                String::new()
            };
            format!("{mark} {} ({}{steps})", task.description, task.state)
        });
        todos.chain(tasks).collect::<Vec<_>>().join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shows_todos_and_sub_tasks_as_they_change() {
        let mut board = Board::default();
        assert!(board.is_empty());
        let todos = json!({"todos": [
            {"content": "Read the data", "status": "completed"},
            {"content": "Plot it", "status": "in_progress", "activeForm": "Plotting it"},
            {"content": "Write it up", "status": "pending"},
        ]});
        assert!(board.apply(TODOS_UPDATED, &todos));
        assert!(board.apply(
            TASK_STARTED,
            &json!({"task_id": "c1", "description": "Scan logs"})
        ));
        assert!(board.apply(
            TASK_STARTED,
            &json!({"task_id": "c2", "description": "Run tests"})
        ));
        assert!(board.apply(TASK_RUNNING, &json!({"task_id": "c1", "message_index": 2})));
        assert!(board.apply(TASK_FAILED, &json!({"task_id": "c2"})));
        assert!(!board.apply(TASK_COMPLETED, &json!({"task_id": "unknown"})));
        assert_eq!(
            board.render(),
            "☑ Read the data\n▶ Plotting it\n☐ Write it up\n⏳ Scan logs (running, step 2)\n✗ Run tests (failed)"
        );
    }
}
