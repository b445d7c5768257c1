//! Where a thread's files live on the host, and the virtual paths the model sees instead.
//!
//! Ids are validated before any path is built so a crafted user or thread id can never
//! traverse out of the data directory.

use std::path::{Path, PathBuf};

/// The virtual paths are defined with the thread state that records them (in the store crate);
/// this module maps them onto the host.
pub use antler_store::virtual_paths::{
    VIRTUAL_OUTPUTS, VIRTUAL_ROOT, VIRTUAL_UPLOADS, VIRTUAL_WORKSPACE,
};

/// Longest accepted user or thread id.
pub const MAX_ID_LEN: usize = 64;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    #[error("invalid {kind} id {value:?}: use 1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'")]
    InvalidId { kind: &'static str, value: String },
}

/// Host directories of one (user, thread): `{data_dir}/users/{user}/threads/{thread}/user-data/*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadPaths {
    user_data: PathBuf,
}

impl ThreadPaths {
    /// Validates both ids (`^[A-Za-z0-9_-]{1,64}$`) and computes the paths; creates nothing.
    pub fn new(data_dir: &Path, user_id: &str, thread_id: &str) -> Result<Self, PathError> {
        validate_id("user", user_id)?;
        validate_id("thread", thread_id)?;
        let user_data = data_dir
            .join("users")
            .join(user_id)
            .join("threads")
            .join(thread_id)
            .join("user-data");
        Ok(Self { user_data })
    }

    pub fn user_data(&self) -> &Path {
        &self.user_data
    }

    pub fn workspace(&self) -> PathBuf {
        self.user_data.join("workspace")
    }

    pub fn uploads(&self) -> PathBuf {
        self.user_data.join("uploads")
    }

    pub fn outputs(&self) -> PathBuf {
        self.user_data.join("outputs")
    }

    /// The spoken answers (`voice.speech`): in the thread's directory but outside `user-data`,
    /// so the sandbox never shows them, none counts as a file the agent made, and they take
    /// nothing of the thread's disk quota; created when the first one is written.
    pub fn voice(&self) -> PathBuf {
        match self.user_data.parent() {
            Some(thread_dir) => thread_dir.join("voice"),
            None => self.user_data.join("voice"),
        }
    }

    /// What a chat message's files became (`channels::received`): outside `user-data` like
    /// `voice`, so the agent never sees this bookkeeping.
    pub fn received(&self) -> PathBuf {
        match self.user_data.parent() {
            Some(thread_dir) => thread_dir.join("received"),
            None => self.user_data.join("received"),
        }
    }

    /// Creates the three directories (idempotent).
    pub fn ensure_dirs(&self) -> std::io::Result<()> {
        for dir in [self.workspace(), self.uploads(), self.outputs()] {
            std::fs::create_dir_all(dir)?;
        }
        Ok(())
    }
}

/// What the user ids owning group chats' conversations start with
/// (`channels::mapping::chat_owner`): config refuses it for a person (an API token's user), so
/// no person's id is ever a chat's.
pub const CHAT_OWNER_PREFIX: &str = "chat-";

/// Checks an id against `^[A-Za-z0-9_-]{1,64}$` (by hand: no regex engine needed for this).
pub fn validate_id(kind: &'static str, value: &str) -> Result<(), PathError> {
    let valid = !value.is_empty()
        && value.len() <= MAX_ID_LEN
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(PathError::InvalidId {
            kind,
            value: value.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_paths_under_the_data_dir() {
        let paths = ThreadPaths::new(Path::new("/data"), "alice", "t-1").unwrap();
        assert_eq!(
            paths.uploads(),
            PathBuf::from("/data/users/alice/threads/t-1/user-data/uploads")
        );
    }

    #[test]
    fn rejects_bad_ids_before_building_paths() {
        for bad in ["", "..", "a/b", "é", "a b", &"x".repeat(65)] {
            let err = ThreadPaths::new(Path::new("/data"), "u", bad).unwrap_err();
            assert!(
                matches!(err, PathError::InvalidId { kind: "thread", .. }),
                "{bad}"
            );
        }
        assert!(ThreadPaths::new(Path::new("/d"), "../x", "t").is_err());
        assert!(ThreadPaths::new(Path::new("/d"), &"A_-9".repeat(16), "t").is_ok());
    }

    #[test]
    fn ensure_dirs_creates_all_three() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = ThreadPaths::new(tmp.path(), "u", "t").unwrap();
        paths.ensure_dirs().unwrap();
        paths.ensure_dirs().unwrap();
        assert!(paths.workspace().is_dir() && paths.uploads().is_dir() && paths.outputs().is_dir());
    }
}
