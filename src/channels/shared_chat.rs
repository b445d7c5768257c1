//! Moving a group conversation of the old kind (its thread owned by whoever spoke first) to the
//! chat that owns it now.
//!
//! A chat key alone does not say whether the chat is a group, so a record is migrated lazily,
//! at the next group message of its chat (or command), before the turn reads anything. Each
//! step is idempotent and the record changes last, by compare-and-set: a crash (or another
//! daemon) between the steps leaves a record of the old kind, whose next message finishes the
//! move.

use std::path::{Path, PathBuf};

use antler_channel::ChatKey;

use crate::channels::mapping::{ChatMap, ChatRecord, chat_owner};
use crate::paths::{PathError, ThreadPaths};
use antler_store::StoreError;
use antler_store::threads::{ThreadError, ThreadStore};

/// Why a group conversation could not be moved to its chat; the message is left pending and
/// its next attempt (or the chat's next message) tries again.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MigrateError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Thread(#[from] ThreadError),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(
        "could not move a group conversation's files to {}: {source}; check the data dir's permissions",
        target.display()
    )]
    Files {
        target: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the conversation of {chat} {what} while it was being moved to its chat; send the message again"
    )]
    Changed { chat: String, what: &'static str },
}

/// How often the record's compare-and-set is retried against concurrent writers before the
/// turn gives up (and the next message tries again).
const ATTEMPTS: usize = 5;

/// Moves the chat's current thread (its record and its files) to the chat's owner and marks the
/// record shared; returns the record as it is after the move.
pub(crate) fn migrate(
    chats: &ChatMap,
    threads: &ThreadStore,
    data_dir: &Path,
    key: &ChatKey,
) -> Result<ChatRecord, MigrateError> {
    let owner = chat_owner(key);
    for _ in 0..ATTEMPTS {
        let Some((bytes, record)) = chats.get_raw(key)? else {
            return Err(MigrateError::Changed {
                chat: key.to_string(),
                what: "disappeared",
            });
        };
        if record.shared {
            return Ok(record);
        }
        let previous = record.user_id.clone();
        if previous != owner {
            move_files(data_dir, &previous, &owner, &record.thread_id)?;
            match threads.transfer(&record.thread_id, &owner) {
                // A deleted thread has nothing left to move; the record still changes.
                Ok(_) | Err(ThreadError::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        let mut moved = record.clone();
        moved.user_id = owner.clone();
        moved.shared = true;
        moved.started_by = Some(record.starter().to_string());
        // Before, a group ran the speaker's agent of that name: the one who started the
        // conversation is the best guess at who chose it.
        if moved.agent.is_some() && moved.agent_set_by.is_none() {
            moved.agent_set_by = Some(previous.clone());
        }
        moved.updated_at = chrono::Utc::now();
        if chats.replace_if(key, bytes, &moved)? {
            tracing::info!(chat = %key, from = %previous, to = %owner, thread_id = %moved.thread_id, "Moved a group conversation to its chat");
            return Ok(moved);
        }
    }
    Err(MigrateError::Changed {
        chat: key.to_string(),
        what: "kept changing",
    })
}

/// Renames the thread's directory to the new owner's. Done already (or never created: a thread
/// without files) is fine; both present means something wrote under the new owner before the
/// move, which is left alone and logged rather than merged.
fn move_files(data_dir: &Path, from: &str, to: &str, thread_id: &str) -> Result<(), MigrateError> {
    let thread_dir = |user: &str| -> Result<PathBuf, MigrateError> {
        let paths = ThreadPaths::new(data_dir, user, thread_id)?;
        Ok(paths
            .user_data()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| paths.user_data().to_path_buf()))
    };
    let (source, target) = (thread_dir(from)?, thread_dir(to)?);
    if !source.exists() {
        return Ok(());
    }
    if target.exists() {
        tracing::warn!(source = %source.display(), target = %target.display(), "A group thread's files exist under both its old and its new owner; the old ones stay where they are");
        return Ok(());
    }
    let io = |source: std::io::Error| MigrateError::Files {
        target: target.clone(),
        source,
    };
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::rename(&source, &target).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_move_once_and_a_second_move_is_a_no_op() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = ThreadPaths::new(dir.path(), "slack-U1", "t1").expect("paths");
        old.ensure_dirs().expect("dirs");
        std::fs::write(old.outputs().join("plan.md"), "# plan").expect("write");
        move_files(dir.path(), "slack-U1", "chat-slack-abc", "t1").expect("move");
        let new = ThreadPaths::new(dir.path(), "chat-slack-abc", "t1").expect("paths");
        assert_eq!(
            std::fs::read_to_string(new.outputs().join("plan.md")).expect("moved"),
            "# plan"
        );
        assert!(!old.user_data().exists());
        move_files(dir.path(), "slack-U1", "chat-slack-abc", "t1").expect("again");
        assert!(new.outputs().join("plan.md").exists());
        // A thread that never had files.
        move_files(dir.path(), "slack-U1", "chat-slack-abc", "t2").expect("none");
    }
}
