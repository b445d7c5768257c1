//! Thread state and its reducers: how an update from a hook, a tool or the model is merged.
//!
//! The merge rules are the contract the middlewares rely on (reference §4): messages upsert by id,
//! artifacts dedupe keeping order, `todos: Some([])` clears, `viewed_images: Some({})` clears,
//! and a sandbox id can never silently change.

mod changes;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::messages::{History, Message};

pub use changes::StateChanges;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadState {
    #[serde(default)]
    pub messages: History,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_data: Option<ThreadData>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default)]
    pub artifacts: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todos: Option<Vec<Todo>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uploaded_files: Vec<UploadedFile>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub viewed_images: BTreeMap<String, ViewedImage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_text: Option<String>,
    /// Free-form values owned by individual middlewares (e.g. the dynamic-context date).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Value>,
    /// Deferred tools `tool_search` made callable in this thread (see `mcp::deferred`).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub promoted_tools: BTreeSet<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxState {
    pub sandbox_id: String,
}

/// The thread's directories as the model and every client see them (`/mnt/user-data/*`). The
/// state is served by `/state` and streamed in events, so it never holds a host path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ThreadData {
    pub workspace_path: String,
    pub uploads_path: String,
    pub outputs_path: String,
}

impl ThreadData {
    /// The only value a thread's data can have: the virtual directories.
    pub fn virtual_paths() -> Self {
        Self {
            workspace_path: crate::virtual_paths::VIRTUAL_WORKSPACE.into(),
            uploads_path: crate::virtual_paths::VIRTUAL_UPLOADS.into(),
            outputs_path: crate::virtual_paths::VIRTUAL_OUTPUTS.into(),
        }
    }
}

impl<'de> Deserialize<'de> for ThreadData {
    /// Checkpoints written by older versions hold host paths here; whatever was stored, reading
    /// yields the virtual paths, so an old thread's `/state` cannot leak the data directory.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer)?;
        Ok(Self::virtual_paths())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    pub content: String,
    pub status: TodoStatus,
    #[serde(
        default,
        rename = "activeForm",
        skip_serializing_if = "Option::is_none"
    )]
    pub active_form: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadedFile {
    pub filename: String,
    pub size: u64,
    /// Virtual path, `/mnt/user-data/uploads/<name>`.
    pub path: String,
    #[serde(default)]
    pub is_image: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewedImage {
    pub mime_type: String,
    pub size: u64,
    pub actual_path: String,
}

/// A partial change to a [`ThreadState`]. `None` fields leave the state untouched.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StateUpdate {
    /// Appended, or replacing the message with the same id.
    pub messages: Vec<Message>,
    /// Ids of messages to remove (applied before `messages`).
    pub remove_messages: Vec<String>,
    /// Drop every message first (applied before `remove_messages` and `messages`).
    pub remove_all_messages: bool,
    pub sandbox: Option<SandboxState>,
    pub thread_data: Option<ThreadData>,
    pub title: Option<String>,
    pub artifacts: Vec<String>,
    pub todos: Option<Vec<Todo>>,
    pub uploaded_files: Option<Vec<UploadedFile>>,
    pub viewed_images: Option<BTreeMap<String, ViewedImage>>,
    pub summary_text: Option<String>,
    /// Set (or, with `Value::Null`, remove) middleware-owned values.
    pub extra: BTreeMap<String, Value>,
    /// Deferred tools to make callable (added to the set).
    pub promoted_tools: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateError {
    #[error(
        "thread already uses sandbox {existing} and an update tried to switch it to {requested}; release the old sandbox first"
    )]
    SandboxConflict { existing: String, requested: String },
}

impl StateUpdate {
    /// Field by field (destructured, so a new field must be added here): comparing with a
    /// freshly built default cost ~230 instructions and was asked ~80 times a turn.
    pub fn is_empty(&self) -> bool {
        let StateUpdate {
            messages,
            remove_messages,
            remove_all_messages,
            sandbox,
            thread_data,
            title,
            artifacts,
            todos,
            uploaded_files,
            viewed_images,
            summary_text,
            extra,
            promoted_tools,
        } = self;
        messages.is_empty()
            && remove_messages.is_empty()
            && !remove_all_messages
            && sandbox.is_none()
            && thread_data.is_none()
            && title.is_none()
            && artifacts.is_empty()
            && todos.is_none()
            && uploaded_files.is_none()
            && viewed_images.is_none()
            && summary_text.is_none()
            && extra.is_empty()
            && promoted_tools.is_empty()
    }

    pub fn message(message: Message) -> Self {
        Self {
            messages: vec![message],
            ..Default::default()
        }
    }

    /// Folds `later` into `self` so that applying the result equals applying both in order.
    pub fn merge(&mut self, later: StateUpdate) {
        if later.remove_all_messages {
            self.messages.clear();
            self.remove_messages.clear();
            self.remove_all_messages = true;
        }
        for id in later.remove_messages {
            self.messages.retain(|m| m.id() != id);
            self.remove_messages.push(id);
        }
        for message in later.messages {
            upsert_message(&mut self.messages, message);
        }
        if later.sandbox.is_some() {
            self.sandbox = later.sandbox;
        }
        if later.thread_data.is_some() {
            self.thread_data = later.thread_data;
        }
        if later.title.is_some() {
            self.title = later.title;
        }
        merge_artifacts(&mut self.artifacts, later.artifacts);
        if later.todos.is_some() {
            self.todos = later.todos;
        }
        if later.uploaded_files.is_some() {
            self.uploaded_files = later.uploaded_files;
        }
        if let Some(images) = later.viewed_images {
            // A clear followed by additions folds into just the additions; callers that need
            // "clear, then add" in one step send two updates.
            if images.is_empty() {
                self.viewed_images = Some(BTreeMap::new());
            } else {
                self.viewed_images
                    .get_or_insert_with(BTreeMap::new)
                    .extend(images);
            }
        }
        if later.summary_text.is_some() {
            self.summary_text = later.summary_text;
        }
        self.extra.extend(later.extra);
        for name in later.promoted_tools {
            if !self.promoted_tools.contains(&name) {
                self.promoted_tools.push(name);
            }
        }
    }
}

impl ThreadState {
    /// About how many bytes the state takes as JSON: enough to size a buffer once instead of
    /// doubling (and copying) it a dozen times for a long history.
    pub fn json_size_hint(&self) -> usize {
        crate::messages::json_size_hint(&self.messages) + 1024
    }

    /// Applies an update with the reducer rules. On error the state is left unchanged.
    pub fn apply(&mut self, update: StateUpdate) -> Result<(), StateError> {
        if let (Some(existing), Some(requested)) = (&self.sandbox, &update.sandbox)
            && existing.sandbox_id != requested.sandbox_id
        {
            return Err(StateError::SandboxConflict {
                existing: existing.sandbox_id.clone(),
                requested: requested.sandbox_id.clone(),
            });
        }
        if update.remove_all_messages {
            self.messages.clear();
        }
        if !update.remove_messages.is_empty() {
            self.messages
                .retain(|m| !update.remove_messages.iter().any(|id| id == m.id()));
        }
        for message in update.messages {
            upsert_message(&mut self.messages, message);
        }
        if update.sandbox.is_some() {
            self.sandbox = update.sandbox;
        }
        if update.thread_data.is_some() {
            self.thread_data = update.thread_data;
        }
        if update.title.is_some() {
            self.title = update.title;
        }
        merge_artifacts(&mut self.artifacts, update.artifacts);
        if update.todos.is_some() {
            self.todos = update.todos;
        }
        if let Some(files) = update.uploaded_files {
            self.uploaded_files = files;
        }
        if let Some(images) = update.viewed_images {
            if images.is_empty() {
                self.viewed_images.clear();
            } else {
                self.viewed_images.extend(images);
            }
        }
        if update.summary_text.is_some() {
            self.summary_text = update.summary_text;
        }
        for (key, value) in update.extra {
            if value.is_null() {
                self.extra.remove(&key);
            } else {
                self.extra.insert(key, value);
            }
        }
        self.promoted_tools.extend(update.promoted_tools);
        Ok(())
    }

    pub fn last_message(&self) -> Option<&Message> {
        self.messages.last()
    }

    /// The most recent AI message, if the last message is one.
    pub fn last_ai(&self) -> Option<&crate::messages::AiMessage> {
        self.messages.last().and_then(Message::as_ai)
    }

    /// Index of the last human message a person typed; the current turn starts there.
    pub fn current_turn_start(&self) -> Option<usize> {
        self.messages.iter().rposition(Message::is_genuine_human)
    }
}

fn upsert_message(messages: &mut Vec<Message>, message: Message) {
    match messages
        .iter_mut()
        .find(|m| crate::messages::same_id(m.id(), message.id()))
    {
        Some(slot) => *slot = message,
        None => messages.push(message),
    }
}

fn merge_artifacts(existing: &mut Vec<String>, new: Vec<String>) {
    for path in new {
        if !existing.contains(&path) {
            existing.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::Message;

    #[test]
    fn an_update_is_empty_only_when_every_field_is() {
        assert!(StateUpdate::default().is_empty());
        let changes: Vec<fn(&mut StateUpdate)> = vec![
            |u| u.messages.push(Message::human("hi")),
            |u| u.remove_messages.push("m".into()),
            |u| u.remove_all_messages = true,
            |u| {
                u.sandbox = Some(SandboxState {
                    sandbox_id: "s".into(),
                })
            },
            |u| u.thread_data = Some(ThreadData::virtual_paths()),
            |u| u.title = Some("t".into()),
            |u| u.artifacts.push("/mnt/user-data/outputs/a".into()),
            |u| u.todos = Some(Vec::new()),
            |u| u.uploaded_files = Some(Vec::new()),
            |u| u.viewed_images = Some(BTreeMap::new()),
            |u| u.summary_text = Some(String::new()),
            |u| {
                u.extra.insert("k".into(), Value::Null);
            },
            |u| u.promoted_tools.push("t".into()),
        ];
        for (index, change) in changes.iter().enumerate() {
            let mut update = StateUpdate::default();
            change(&mut update);
            assert!(!update.is_empty(), "change {index} left it empty");
            assert_ne!(update, StateUpdate::default());
        }
    }

    fn images(paths: &[&str]) -> BTreeMap<String, ViewedImage> {
        paths
            .iter()
            .map(|p| {
                (
                    p.to_string(),
                    ViewedImage {
                        mime_type: "image/png".into(),
                        size: 1,
                        actual_path: p.to_string(),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn artifacts_dedupe_preserving_order() {
        let mut state = ThreadState::default();
        state
            .apply(StateUpdate {
                artifacts: vec!["/a".into(), "/b".into()],
                ..Default::default()
            })
            .unwrap();
        state
            .apply(StateUpdate {
                artifacts: vec!["/b".into(), "/c".into(), "/a".into()],
                ..Default::default()
            })
            .unwrap();
        assert_eq!(state.artifacts, vec!["/a", "/b", "/c"]);
    }

    #[test]
    fn todos_none_keeps_and_empty_list_replaces() {
        let mut state = ThreadState {
            todos: Some(vec![Todo {
                content: "x".into(),
                status: TodoStatus::Pending,
                active_form: None,
            }]),
            ..Default::default()
        };
        state.apply(StateUpdate::default()).unwrap();
        assert_eq!(state.todos.as_ref().unwrap().len(), 1);
        state
            .apply(StateUpdate {
                todos: Some(vec![]),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(state.todos, Some(vec![]));
    }

    #[test]
    fn viewed_images_merge_and_empty_map_clears() {
        let mut state = ThreadState::default();
        for batch in [&["/a.png"][..], &["/b.png"][..]] {
            state
                .apply(StateUpdate {
                    viewed_images: Some(images(batch)),
                    ..Default::default()
                })
                .unwrap();
        }
        assert_eq!(state.viewed_images.len(), 2);
        state
            .apply(StateUpdate {
                viewed_images: Some(BTreeMap::new()),
                ..Default::default()
            })
            .unwrap();
        assert!(state.viewed_images.is_empty());
    }

    #[test]
    fn sandbox_same_id_is_idempotent_and_conflict_is_error() {
        let mut state = ThreadState::default();
        let sb = |id: &str| StateUpdate {
            sandbox: Some(SandboxState {
                sandbox_id: id.into(),
            }),
            title: Some("t".into()),
            ..Default::default()
        };
        state.apply(sb("s1")).unwrap();
        state.apply(sb("s1")).unwrap();
        let before = state.clone();
        let err = state.apply(sb("s2")).unwrap_err();
        assert!(matches!(err, StateError::SandboxConflict { .. }));
        assert_eq!(state, before, "a failed update changes nothing");
    }

    #[test]
    fn messages_upsert_by_id_and_remove() {
        let mut state = ThreadState::default();
        let mut m = Message::ai("first");
        let id = m.id().to_string();
        state.apply(StateUpdate::message(m.clone())).unwrap();
        if let Message::Ai(ai) = &mut m {
            ai.content = "replaced".into();
        }
        state.apply(StateUpdate::message(m)).unwrap();
        assert_eq!(state.messages.len(), 1);
        assert_eq!(state.messages[0].content(), "replaced");
        state
            .apply(StateUpdate {
                remove_messages: vec![id],
                ..Default::default()
            })
            .unwrap();
        assert!(state.messages.is_empty());
    }

    #[test]
    fn merged_update_equals_sequential_application() {
        let a = StateUpdate {
            messages: vec![Message::human("a")],
            artifacts: vec!["/x".into()],
            viewed_images: Some(images(&["/1.png"])),
            ..Default::default()
        };
        let b = StateUpdate {
            artifacts: vec!["/y".into(), "/x".into()],
            viewed_images: Some(images(&["/2.png"])),
            todos: Some(vec![]),
            ..Default::default()
        };
        let mut sequential = ThreadState::default();
        sequential.apply(a.clone()).unwrap();
        sequential.apply(b.clone()).unwrap();
        let mut merged = a;
        merged.merge(b);
        let mut folded = ThreadState::default();
        folded.apply(merged).unwrap();
        assert_eq!(sequential, folded);
    }
}
