//! The versions side of [`AgentStore`]: listing them with their authors, reading one,
//! putting one back, and the default agent's soul (versioned the same way).

use chrono::Utc;

use super::*;
use crate::custom_agents::authorship::{VersionAuthor, current_record};
use crate::custom_agents::changes::summarize;
use crate::custom_agents::history::hash_file;

impl AgentStore {
    /// Archived versions, oldest first. A version archived without a summary (before they
    /// were recorded) gets one computed against the version before it, when that is kept.
    pub fn history(&self, user_id: &str, name: &str) -> Result<Vec<VersionInfo>, AgentStoreError> {
        let dir = self.existing_agent_dir(user_id, name)?;
        let history_dir = dir.join(HISTORY_DIR);
        let mut versions = self
            .history_at(&dir)
            .list((SOUL_FILE, CONFIG_FILE))
            .map_err(io("read", &history_dir))?;
        for idx in 1..versions.len() {
            if versions[idx].summary.is_none() {
                let before = self.read_version(user_id, name, &versions[idx - 1].id)?;
                let after = self.read_version(user_id, name, &versions[idx].id)?;
                versions[idx].summary = Some(summarize(before.files(), after.files()));
            }
        }
        Ok(versions)
    }

    /// The files in place as a version: the id they will be archived under, who wrote them
    /// (if the record of their write still describes them) and what that write changed.
    pub fn current_version(
        &self,
        user_id: &str,
        name: &str,
    ) -> Result<VersionInfo, AgentStoreError> {
        let dir = self.existing_agent_dir(user_id, name)?;
        let history_dir = dir.join(HISTORY_DIR);
        let history = self.history_at(&dir);
        let id = history.next_id().map_err(io("read", &history_dir))?;
        let files = self.read_files(&dir)?;
        let written = current_record(&history_dir, (files.0.as_deref(), files.1.as_deref()));
        let summary = match &written {
            Some(record) => Some(record.summary.clone()),
            // Unrecorded: what changed since the last kept version, if there is one.
            None => match history.list((SOUL_FILE, CONFIG_FILE)) {
                Ok(versions) => match versions.last() {
                    Some(last) => {
                        let before = self.read_version(user_id, name, &last.id)?;
                        let now = VersionContent::from_bytes(&files);
                        Some(summarize(before.files(), now.files()))
                    }
                    None => None,
                },
                Err(source) => return Err(io("read", &history_dir)(source)),
            },
        };
        let config_path = dir.join(CONFIG_FILE);
        let modified = std::fs::metadata(&config_path)
            .and_then(|meta| meta.modified())
            .map(chrono::DateTime::<Utc>::from)
            .unwrap_or(chrono::DateTime::<Utc>::UNIX_EPOCH);
        Ok(VersionInfo {
            id,
            created_at: written.as_ref().map_or(modified, |w| w.written_at),
            soul_sha256: hash_file(&dir.join(SOUL_FILE)).map_err(io("read", &dir))?,
            config_sha256: hash_file(&config_path).map_err(io("read", &dir))?,
            author: written.as_ref().and_then(|w| w.author.clone()),
            written_at: written.as_ref().map(|w| w.written_at),
            summary,
        })
    }

    /// The files in place, as text.
    pub fn current_files(
        &self,
        user_id: &str,
        name: &str,
    ) -> Result<VersionContent, AgentStoreError> {
        let dir = self.existing_agent_dir(user_id, name)?;
        Ok(VersionContent::from_bytes(&self.read_files(&dir)?))
    }

    pub fn read_version(
        &self,
        user_id: &str,
        name: &str,
        id: &str,
    ) -> Result<VersionContent, AgentStoreError> {
        let dir = self.existing_agent_dir(user_id, name)?;
        let history = self.history_at(&dir);
        if !history.exists(id) {
            return Err(version_not_found(&dir, id));
        }
        let read = |file: &str| {
            history
                .read(id, file)
                .map(|bytes| bytes.map(|b| String::from_utf8_lossy(&b).into_owned()))
                .map_err(io("read", &dir.join(HISTORY_DIR).join(id)))
        };
        Ok(VersionContent {
            soul: read(SOUL_FILE)?,
            config_yaml: read(CONFIG_FILE)?,
        })
    }

    /// Restores an earlier version (author unknown); see [`AgentStore::revert_by`].
    pub fn revert(
        &self,
        user_id: &str,
        name: &str,
        id: &str,
    ) -> Result<Option<String>, AgentStoreError> {
        self.revert_as(user_id, name, id, None)
    }

    /// Restores the exact bytes of an earlier version, archiving the current files first; the
    /// restored files are a new write, recorded as a revert by `by`. Returns the id under which
    /// the replaced files were archived.
    pub fn revert_by(
        &self,
        user_id: &str,
        name: &str,
        id: &str,
        by: VersionAuthor,
    ) -> Result<Option<String>, AgentStoreError> {
        let author = VersionAuthor::Revert {
            version: id.to_string(),
            by: Box::new(by),
        };
        self.revert_as(user_id, name, id, Some(author))
    }

    fn revert_as(
        &self,
        user_id: &str,
        name: &str,
        id: &str,
        author: Option<VersionAuthor>,
    ) -> Result<Option<String>, AgentStoreError> {
        let dir = self.existing_agent_dir(user_id, name)?;
        let _guard = self.lock();
        let history = self.history_at(&dir);
        if !history.exists(id) {
            return Err(version_not_found(&dir, id));
        }
        let version_dir = dir.join(HISTORY_DIR).join(id);
        // Read before archiving: archiving may prune the very version being restored.
        let soul = history
            .read(id, SOUL_FILE)
            .map_err(io("read", &version_dir))?;
        let config = history
            .read(id, CONFIG_FILE)
            .map_err(io("read", &version_dir))?;
        if let Some(bytes) = &config {
            AgentConfig::from_yaml(&String::from_utf8_lossy(bytes))
                .map_err(|source| config_error(&dir, source))?;
        }
        let before = self.read_files(&dir)?;
        let archived = self.archive_current(&dir, &before)?;
        if let Some(bytes) = &config {
            self.write_file(&dir.join(CONFIG_FILE), bytes)?;
        }
        if let Some(bytes) = &soul {
            self.write_soul(&dir.join(SOUL_FILE), bytes)?;
        }
        let after = (
            soul.as_deref().or(before.0.as_deref()),
            config.as_deref().or(before.1.as_deref()),
        );
        self.record_write(&dir.join(HISTORY_DIR), author, &before, after);
        Ok(archived)
    }

    /// The default agent's soul (`{data_dir}/SOUL.md`), if present.
    pub fn default_soul(&self) -> Result<Option<String>, AgentStoreError> {
        let path = self.data_dir.join(SOUL_FILE);
        read_optional(&path)
            .map(|bytes| bytes.map(|b| String::from_utf8_lossy(&b).into_owned()))
            .map_err(io("read", &path))
    }

    /// Replaces the default agent's soul (author unknown); see
    /// [`AgentStore::set_default_soul_by`].
    pub fn set_default_soul(&self, soul: &str) -> Result<(), AgentStoreError> {
        self.set_default_soul_as(soul, None)
    }

    /// Replaces the default agent's soul, written by `author`; the previous one is kept in
    /// `{data_dir}/soul-history/`.
    pub fn set_default_soul_by(
        &self,
        soul: &str,
        author: VersionAuthor,
    ) -> Result<(), AgentStoreError> {
        self.set_default_soul_as(soul, Some(author))
    }

    fn set_default_soul_as(
        &self,
        soul: &str,
        author: Option<VersionAuthor>,
    ) -> Result<(), AgentStoreError> {
        if soul.trim().is_empty() {
            return Err(AgentStoreError::EmptySoul);
        }
        let _guard = self.lock();
        std::fs::create_dir_all(&self.data_dir).map_err(io("create", &self.data_dir))?;
        let path = self.data_dir.join(SOUL_FILE);
        let previous = read_optional(&path).map_err(io("read", &path))?;
        if previous.as_deref() == Some(soul.as_bytes()) {
            return Ok(());
        }
        let history_dir = self.data_dir.join(DEFAULT_SOUL_HISTORY_DIR);
        let written = current_record(&history_dir, (previous.as_deref(), None));
        History::new(history_dir.clone(), self.history_limit)
            .archive(&[(SOUL_FILE, previous.as_deref())], written, Utc::now())
            .map_err(io("archive", &history_dir))?;
        self.write_soul(&path, soul.as_bytes())?;
        self.record_write(
            &history_dir,
            author,
            &(previous, None),
            (Some(soul.as_bytes()), None),
        );
        Ok(())
    }
}
