//! Who wrote each version of an agent's files, and what the write changed.
//!
//! The history keeps the files a write replaced; who wrote them is only known at the time of
//! that earlier write. So every write leaves `history/current.json` beside the versions: its
//! author, time and one-line summary, with the hashes of the files it wrote. When a later write
//! archives those files, the record goes into the version's `version.json` — but only if the
//! hashes still match, so a hand edit on disk (or a crash between the files and the record) is
//! never credited to the last known writer: it reads as "unknown", like versions written before
//! authors were recorded.

use std::fmt;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::custom_agents::durable::{read_optional, sha256_hex, write_atomic};

/// The record of the files in place, under the agent's `history/` directory.
pub(crate) const CURRENT_RECORD: &str = "current.json";

/// Who or what wrote a version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum VersionAuthor {
    /// A person, from a chat (`/agent revert`).
    Person {
        user_id: String,
        /// Their name on the platform, when it gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// `setup_agent` in a bootstrap run, for the user it ran as.
    Bootstrap { run_id: String, user_id: String },
    /// `update_agent` in a run of the agent, for the user it ran as.
    UpdateAgent { run_id: String, user_id: String },
    /// `antler agents` (on the data dir, or through the daemon's local socket) for this user.
    Cli { user_id: String },
    /// `/api/agents` called by this user.
    Http { user_id: String },
    /// An earlier version put back (its id), by whoever asked for it.
    Revert {
        version: String,
        by: Box<VersionAuthor>,
    },
}

impl fmt::Display for VersionAuthor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Person {
                user_id,
                name: Some(name),
            } => write!(f, "{name} ({user_id})"),
            Self::Person { user_id, .. } => write!(f, "{user_id}"),
            Self::Bootstrap { run_id, user_id } => {
                write!(f, "bootstrap run {run_id} (setup_agent, for {user_id})")
            }
            Self::UpdateAgent { run_id, user_id } => {
                write!(f, "update_agent in run {run_id} (for {user_id})")
            }
            Self::Cli { user_id } => write!(f, "the CLI (as {user_id})"),
            Self::Http { user_id } => write!(f, "the HTTP API ({user_id})"),
            Self::Revert { version, by } => {
                write!(f, "revert to version {} by {by}", display_id(version))
            }
        }
    }
}

/// How an author (or its absence) reads in a listing.
pub fn author_label(author: Option<&VersionAuthor>) -> String {
    author.map_or_else(|| "unknown".to_string(), ToString::to_string)
}

/// A version id as people type it: `000012` → `12`.
pub fn display_id(id: &str) -> &str {
    let trimmed = id.trim_start_matches('0');
    if trimmed.is_empty() && !id.is_empty() {
        "0"
    } else {
        trimmed
    }
}

/// What a write left: who, when, what it changed, and the files it wrote (by hash).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WriteRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) author: Option<VersionAuthor>,
    pub(crate) written_at: DateTime<Utc>,
    pub(crate) summary: String,
    #[serde(default)]
    pub(crate) soul_sha256: Option<String>,
    #[serde(default)]
    pub(crate) config_sha256: Option<String>,
}

impl WriteRecord {
    /// The record of `files` (SOUL.md, config.yaml) as just written.
    pub(crate) fn of(
        author: Option<VersionAuthor>,
        summary: String,
        files: (Option<&[u8]>, Option<&[u8]>),
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            author,
            written_at: now,
            summary,
            soul_sha256: files.0.map(sha256_hex),
            config_sha256: files.1.map(sha256_hex),
        }
    }

    /// Whether this record describes exactly these files.
    pub(crate) fn describes(&self, files: (Option<&[u8]>, Option<&[u8]>)) -> bool {
        self.soul_sha256 == files.0.map(sha256_hex) && self.config_sha256 == files.1.map(sha256_hex)
    }
}

/// The record of the files in place, if there is one that still describes them.
pub(crate) fn current_record(
    history_dir: &Path,
    files: (Option<&[u8]>, Option<&[u8]>),
) -> Option<WriteRecord> {
    let bytes = read_optional(&history_dir.join(CURRENT_RECORD)).ok()??;
    serde_json::from_slice::<WriteRecord>(&bytes)
        .ok()
        .filter(|record| record.describes(files))
}

/// Leaves the record of a write; the files are already in place, so a failure here only
/// loses the author, which is logged rather than failing a write that happened.
pub(crate) fn leave_record(history_dir: &Path, record: &WriteRecord) {
    let written = std::fs::create_dir_all(history_dir).and_then(|()| {
        let bytes = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        write_atomic(&history_dir.join(CURRENT_RECORD), &bytes)
    });
    if let Err(error) = written {
        tracing::warn!(%error, dir = %history_dir.display(), "Could not record who wrote an agent's files");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authors_read_as_people_and_runs() {
        let person = VersionAuthor::Person {
            user_id: "telegram-7".into(),
            name: Some("Ann".into()),
        };
        let cases = [
            (person.clone(), "Ann (telegram-7)"),
            (
                VersionAuthor::Bootstrap {
                    run_id: "r1".into(),
                    user_id: "ann".into(),
                },
                "bootstrap run r1 (setup_agent, for ann)",
            ),
            (
                VersionAuthor::UpdateAgent {
                    run_id: "r2".into(),
                    user_id: "ann".into(),
                },
                "update_agent in run r2 (for ann)",
            ),
            (
                VersionAuthor::Cli {
                    user_id: "ann".into(),
                },
                "the CLI (as ann)",
            ),
            (
                VersionAuthor::Revert {
                    version: "000012".into(),
                    by: Box::new(person),
                },
                "revert to version 12 by Ann (telegram-7)",
            ),
        ];
        for (author, label) in cases {
            assert_eq!(author_label(Some(&author)), label);
            let json = serde_json::to_string(&author).unwrap();
            assert_eq!(
                serde_json::from_str::<VersionAuthor>(&json).unwrap(),
                author
            );
        }
        assert_eq!(author_label(None), "unknown");
        assert_eq!(display_id("000100"), "100");
    }

    #[test]
    fn a_record_only_describes_the_files_it_wrote() {
        let tmp = tempfile::tempdir().unwrap();
        let record = WriteRecord::of(None, "s".into(), (Some(b"soul"), None), Utc::now());
        leave_record(tmp.path(), &record);
        assert_eq!(
            current_record(tmp.path(), (Some(b"soul"), None)),
            Some(record)
        );
        assert_eq!(current_record(tmp.path(), (Some(b"edited"), None)), None);
    }
}
