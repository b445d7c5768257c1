//! The plan and sub-task board of a status message: the todo list (☐ pending, ▶ in progress,
//! ☑ done) and each sub-task with its short description and state, kept from run events.

use crate::agent_api::{RunEvent, TaskStatus};
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
    messages: usize,
}

impl Board {
    /// Takes in a run event (the plan and sub-task progress; others are ignored); `true` when
    /// the board changed.
    pub(crate) fn apply(&mut self, event: &RunEvent) -> bool {
        match event {
            RunEvent::TodosUpdated { todos } => {
                self.todos = todos.clone();
                true
            }
            RunEvent::TaskStarted {
                task_id,
                description,
                ..
            } => {
                self.tasks.push(SubTask {
                    id: task_id.clone(),
                    description: description.trim().chars().take(60).collect(),
                    state: "running",
                    messages: 0,
                });
                true
            }
            RunEvent::TaskRunning {
                task_id,
                message_index,
                ..
            } => self.update(task_id, |task| task.messages = *message_index),
            RunEvent::TaskEnded(end) => self.update(&end.task_id, |task| {
                task.state = match end.status {
                    TaskStatus::Completed => "done",
                    TaskStatus::Failed => "failed",
                    TaskStatus::TimedOut => "timed out",
                    TaskStatus::Cancelled => "cancelled",
                }
            }),
            _ => false,
        }
    }

    /// Changes the sub-task `id`; `false` for one the board never saw start.
    fn update(&mut self, id: &str, change: impl FnOnce(&mut SubTask)) -> bool {
        match self.tasks.iter_mut().find(|t| t.id == id) {
            Some(task) => {
                change(task);
                true
            }
            None => false,
        }
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
    use crate::agent_api::TaskEnd;
    use antler_store::messages::Message;

    fn todo(content: &str, status: TodoStatus, active_form: Option<&str>) -> Todo {
        Todo {
            content: content.into(),
            status,
            active_form: active_form.map(str::to_string),
        }
    }

    fn started(task_id: &str, description: &str) -> RunEvent {
        RunEvent::TaskStarted {
            task_id: task_id.into(),
            description: description.into(),
            subagent_type: "general-purpose".into(),
            prompt: String::new(),
        }
    }

    fn ended(task_id: &str, status: TaskStatus) -> RunEvent {
        RunEvent::TaskEnded(Box::new(TaskEnd {
            task_id: task_id.into(),
            subagent_type: "general-purpose".into(),
            status,
            stop_reason: None,
            model: None,
            token_usage: Default::default(),
            usage_by_model: Default::default(),
            result: None,
            error: None,
        }))
    }

    #[test]
    fn shows_todos_and_sub_tasks_as_they_change() {
        let mut board = Board::default();
        assert!(board.is_empty());
        let todos = RunEvent::TodosUpdated {
            todos: vec![
                todo("Read the data", TodoStatus::Completed, None),
                todo("Plot it", TodoStatus::InProgress, Some("Plotting it")),
                todo("Write it up", TodoStatus::Pending, None),
            ],
        };
        assert!(board.apply(&todos));
        assert!(board.apply(&started("c1", "Scan logs")));
        assert!(board.apply(&started("c2", "Run tests")));
        assert!(board.apply(&RunEvent::TaskRunning {
            task_id: "c1".into(),
            message: Message::ai("looking"),
            message_index: 2,
        }));
        assert!(board.apply(&ended("c2", TaskStatus::Failed)));
        assert!(!board.apply(&ended("unknown", TaskStatus::Completed)));
        assert!(!board.apply(&RunEvent::Custom {
            name: "task_completed".into(),
            data: serde_json::json!({"task_id": "c1"}),
        }));
        assert_eq!(
            board.render(),
            "☑ Read the data\n▶ Plotting it\n☐ Write it up\n⏳ Scan logs (running, step 2)\n✗ Run tests (failed)"
        );
    }
}
