//! `AgentStore`: per-user custom agents on disk, with atomic, versioned writes.
//!
//! `{data_dir}/users/{user}/agents/{name}/` holds `config.yaml`, `SOUL.md` and `history/`. Every
//! overwrite first archives the current files, so an admin can list, diff and revert them. Writes
//! of one store are serialized by a lock; the two files are replaced one after the other (config
//! first), each atomically. Every write says who made it (`*_by`; the plain forms record an
//! unknown author) and leaves that with a summary of the change for the history
//! (`custom_agents::authorship`).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use chrono::Utc;

use crate::custom_agents::authorship::{VersionAuthor, WriteRecord, current_record, leave_record};
use crate::custom_agents::cache::{AgentCache, DEFAULT_CACHED_AGENTS, stamp};
use crate::custom_agents::changes::{AgentFiles, summarize};
use crate::custom_agents::config::{AgentConfig, AgentConfigError, ModelSettings, ReasoningEffort};
use crate::custom_agents::history::{History, is_version_id, read_optional, write_atomic};
use crate::custom_agents::{AgentNameError, normalize_agent_name};
use crate::paths::{PathError, validate_id};

pub use crate::custom_agents::history::VersionInfo;

pub use crate::custom_agents::file_names::{CONFIG_FILE, SOUL_FILE};
const HISTORY_DIR: &str = "history";
/// Where earlier versions of the default agent's soul are kept, under the data dir.
const DEFAULT_SOUL_HISTORY_DIR: &str = "soul-history";
/// Versions kept per agent unless configured otherwise.
pub const DEFAULT_HISTORY_LIMIT: usize = 20;
/// Names a new agent may not take: in a chat `/agent history|diff|revert` are subcommands, so
/// an agent named so could not be selected with `/agent NAME`.
pub const RESERVED_AGENT_NAMES: [&str; 3] = ["history", "diff", "revert"];

/// An agent's two files as bytes (SOUL.md, config.yaml), `None` where one is missing.
type FileBytes = (Option<Vec<u8>>, Option<Vec<u8>>);

#[derive(Debug, thiserror::Error)]
pub enum AgentStoreError {
    #[error(transparent)]
    InvalidName(#[from] AgentNameError),
    #[error(transparent)]
    InvalidUser(#[from] PathError),
    #[error("agent '{name}' already exists; choose another name or update the existing agent")]
    Exists { name: String },
    #[error("agent '{name}' does not exist; list the agents to see the available names")]
    NotFound { name: String },
    #[error("agent '{name}' has no version '{id}'; list its history to see the available versions")]
    VersionNotFound { name: String, id: String },
    #[error("soul content is empty; write at least one line of SOUL.md")]
    EmptySoul,
    #[error(
        "'{name}' is reserved for the chat command /agent {name}; choose another name for the agent"
    )]
    ReservedName { name: String },
    #[error("agent '{name}': {source}")]
    Config {
        name: String,
        #[source]
        source: AgentConfigError,
    },
    #[error(
        "could not {action} {}: {source}; check the data directory's permissions and free space",
        path.display()
    )]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An agent as stored: its config and the raw text of its SOUL.md (empty if the file is missing).
#[derive(Clone, Debug, PartialEq)]
pub struct StoredAgent {
    pub config: AgentConfig,
    pub soul: String,
}

/// A partial change; `None` leaves a field as it is. `skills: Some(vec![])` disables all skills.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentUpdate {
    pub soul: Option<String>,
    pub description: Option<String>,
    pub skills: Option<Vec<String>>,
    pub tool_groups: Option<Vec<String>>,
    pub model: Option<String>,
    pub model_settings: Option<ModelSettings>,
    pub thinking_enabled: Option<bool>,
    pub reasoning_effort: Option<ReasoningEffort>,
}

/// What an update changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changed {
    /// Names of the changed fields, in a fixed order (`soul`, `description`, `skills`, …).
    pub fields: Vec<&'static str>,
    /// The history entry holding the files as they were before, if anything was written.
    pub archived_version: Option<String>,
}

impl Changed {
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// The archived text of one version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionContent {
    pub soul: Option<String>,
    pub config_yaml: Option<String>,
}

impl VersionContent {
    pub(crate) fn from_bytes(files: &FileBytes) -> Self {
        let text = |bytes: &Option<Vec<u8>>| {
            bytes
                .as_deref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
        };
        Self {
            soul: text(&files.0),
            config_yaml: text(&files.1),
        }
    }

    /// Both files, as the change summary and the diff read them.
    pub fn files(&self) -> AgentFiles<'_> {
        AgentFiles {
            soul: self.soul.as_deref(),
            config_yaml: self.config_yaml.as_deref(),
        }
    }
}

/// Custom agents of every user under one data directory.
pub struct AgentStore {
    data_dir: PathBuf,
    history_limit: usize,
    /// Serializes writers so history ids and the two-file replace never interleave.
    write_lock: Mutex<()>,
    cache: AgentCache<StoredAgent>,
    #[cfg(test)]
    fail_soul_write: std::sync::atomic::AtomicBool,
}

impl AgentStore {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            history_limit: DEFAULT_HISTORY_LIMIT,
            write_lock: Mutex::new(()),
            cache: AgentCache::new(DEFAULT_CACHED_AGENTS),
            #[cfg(test)]
            fail_soul_write: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Keeps at most `capacity` parsed agents in memory (`cache.agents`).
    pub fn with_cache(mut self, capacity: usize) -> Self {
        self.cache = AgentCache::new(capacity);
        self
    }

    /// Keeps at most `limit` earlier versions per agent (0 disables history).
    pub fn with_history_limit(mut self, limit: usize) -> Self {
        self.history_limit = limit;
        self
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The directory of one agent; both ids are validated before the path is built.
    pub fn agent_dir(&self, user_id: &str, name: &str) -> Result<PathBuf, AgentStoreError> {
        let name = normalize_agent_name(name)?;
        Ok(self.agents_root(user_id)?.join(name))
    }

    /// Creates a new agent (author unknown); see [`AgentStore::create_by`].
    pub fn create(
        &self,
        user_id: &str,
        name: &str,
        config: &AgentConfig,
        soul: &str,
    ) -> Result<StoredAgent, AgentStoreError> {
        self.create_as(user_id, name, config, soul, None)
    }

    /// Creates a new agent written by `author`; refuses if it exists or its name is reserved.
    /// A failed create leaves no directory behind.
    pub fn create_by(
        &self,
        user_id: &str,
        name: &str,
        config: &AgentConfig,
        soul: &str,
        author: VersionAuthor,
    ) -> Result<StoredAgent, AgentStoreError> {
        self.create_as(user_id, name, config, soul, Some(author))
    }

    fn create_as(
        &self,
        user_id: &str,
        name: &str,
        config: &AgentConfig,
        soul: &str,
        author: Option<VersionAuthor>,
    ) -> Result<StoredAgent, AgentStoreError> {
        let name = normalize_agent_name(name)?;
        if RESERVED_AGENT_NAMES.contains(&name.as_str()) {
            return Err(AgentStoreError::ReservedName { name });
        }
        let root = self.agents_root(user_id)?;
        if soul.trim().is_empty() {
            return Err(AgentStoreError::EmptySoul);
        }
        let config = AgentConfig {
            name: name.clone(),
            ..config.clone()
        };
        let yaml = config_yaml(&config)?;
        let _guard = self.lock();
        let dir = root.join(&name);
        if dir.join(CONFIG_FILE).exists() {
            return Err(AgentStoreError::Exists { name });
        }
        std::fs::create_dir_all(&root).map_err(io("create", &root))?;
        // A directory without config.yaml may hold data of an earlier agent with this name
        // (e.g. memory); it is reused and, on failure, left as it was found.
        let created_dir = match std::fs::create_dir(&dir) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(io("create", &dir)(e)),
        };
        let written = self
            .write_file(&dir.join(CONFIG_FILE), yaml.as_bytes())
            .and_then(|()| self.write_soul(&dir.join(SOUL_FILE), soul.as_bytes()));
        if let Err(error) = written {
            if created_dir {
                if let Err(cleanup) = std::fs::remove_dir_all(&dir) {
                    tracing::warn!(error = %cleanup, dir = %dir.display(), "Could not remove the directory of a failed agent create");
                }
            } else {
                let _ = std::fs::remove_file(dir.join(CONFIG_FILE));
            }
            return Err(error);
        }
        self.record_write(
            &dir.join(HISTORY_DIR),
            author,
            &(None, None),
            (Some(soul.as_bytes()), Some(yaml.as_bytes())),
        );
        Ok(StoredAgent {
            config,
            soul: soul.to_string(),
        })
    }

    /// Applies a partial update (author unknown); see [`AgentStore::update_by`].
    pub fn update(
        &self,
        user_id: &str,
        name: &str,
        update: AgentUpdate,
    ) -> Result<Changed, AgentStoreError> {
        self.update_as(user_id, name, update, None)
    }

    /// Applies a partial update written by `author`; archives the current files first. No
    /// change ⇒ nothing written.
    pub fn update_by(
        &self,
        user_id: &str,
        name: &str,
        update: AgentUpdate,
        author: VersionAuthor,
    ) -> Result<Changed, AgentStoreError> {
        self.update_as(user_id, name, update, Some(author))
    }

    fn update_as(
        &self,
        user_id: &str,
        name: &str,
        update: AgentUpdate,
        author: Option<VersionAuthor>,
    ) -> Result<Changed, AgentStoreError> {
        let dir = self.agent_dir(user_id, name)?;
        let _guard = self.lock();
        let current = self.load(&dir)?;
        let mut config = current.config.clone();
        let mut fields = Vec::new();
        let mut set = |field: &'static str, changed: bool| {
            if changed {
                fields.push(field);
            }
        };
        if let Some(soul) = &update.soul {
            if soul.trim().is_empty() {
                return Err(AgentStoreError::EmptySoul);
            }
            set("soul", *soul != current.soul);
        }
        if let Some(v) = update.description {
            set("description", replace(&mut config.description, v));
        }
        if let Some(v) = update.skills {
            set("skills", replace(&mut config.skills, Some(v)));
        }
        if let Some(v) = update.tool_groups {
            set("tool_groups", replace(&mut config.tool_groups, Some(v)));
        }
        if let Some(v) = update.model {
            set("model", replace(&mut config.model, Some(v)));
        }
        if let Some(v) = update.model_settings {
            set("model_settings", replace(&mut config.model_settings, v));
        }
        if let Some(v) = update.thinking_enabled {
            set(
                "thinking_enabled",
                replace(&mut config.thinking_enabled, Some(v)),
            );
        }
        if let Some(v) = update.reasoning_effort {
            set(
                "reasoning_effort",
                replace(&mut config.reasoning_effort, Some(v)),
            );
        }
        if fields.is_empty() {
            return Ok(Changed::default());
        }
        let config_changed = fields.iter().any(|f| *f != "soul");
        let yaml = config_yaml(&config)?;
        let before = self.read_files(&dir)?;
        let archived_version = self.archive_current(&dir, &before)?;
        if config_changed {
            self.write_file(&dir.join(CONFIG_FILE), yaml.as_bytes())?;
        }
        let new_soul = update.soul.filter(|s| *s != current.soul);
        if let Some(soul) = &new_soul {
            self.write_soul(&dir.join(SOUL_FILE), soul.as_bytes())?;
        }
        let after = (
            new_soul
                .as_deref()
                .map(str::as_bytes)
                .or(before.0.as_deref()),
            if config_changed {
                Some(yaml.as_bytes())
            } else {
                before.1.as_deref()
            },
        );
        self.record_write(&dir.join(HISTORY_DIR), author, &before, after);
        Ok(Changed {
            fields,
            archived_version,
        })
    }

    /// The agent, or `None` if it has no config.yaml.
    pub fn get(&self, user_id: &str, name: &str) -> Result<Option<StoredAgent>, AgentStoreError> {
        let dir = self.agent_dir(user_id, name)?;
        match self.load(&dir) {
            Ok(agent) => Ok(Some(agent)),
            Err(AgentStoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The user's agents sorted by name; an unreadable config is skipped with a warning.
    pub fn list(&self, user_id: &str) -> Result<Vec<AgentConfig>, AgentStoreError> {
        let root = self.agents_root(user_id)?;
        let entries = match std::fs::read_dir(&root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("read", &root)(e)),
        };
        let mut agents = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io("read", &root))?;
            let dir_name = entry.file_name().to_string_lossy().into_owned();
            if normalize_agent_name(&dir_name).as_deref() != Ok(dir_name.as_str()) {
                continue;
            }
            match self.load(&entry.path()) {
                Ok(agent) => agents.push(agent.config),
                Err(AgentStoreError::NotFound { .. }) => {}
                Err(error) => {
                    tracing::warn!(%error, user_id, agent = %dir_name, "Skipping an unreadable agent")
                }
            }
        }
        agents.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(agents)
    }

    /// Removes the agent with its history.
    pub fn delete(&self, user_id: &str, name: &str) -> Result<(), AgentStoreError> {
        let dir = self.agent_dir(user_id, name)?;
        let _guard = self.lock();
        if !dir.join(CONFIG_FILE).exists() {
            return Err(not_found(&dir));
        }
        std::fs::remove_dir_all(&dir).map_err(io("remove", &dir))
    }

    fn agents_root(&self, user_id: &str) -> Result<PathBuf, AgentStoreError> {
        validate_id("user", user_id)?;
        Ok(self.data_dir.join("users").join(user_id).join("agents"))
    }

    fn existing_agent_dir(&self, user_id: &str, name: &str) -> Result<PathBuf, AgentStoreError> {
        let dir = self.agent_dir(user_id, name)?;
        if dir.join(CONFIG_FILE).exists() {
            Ok(dir)
        } else {
            Err(not_found(&dir))
        }
    }

    fn load(&self, dir: &Path) -> Result<StoredAgent, AgentStoreError> {
        let stamp = stamp(dir, [CONFIG_FILE, SOUL_FILE]);
        if let Some(agent) = self.cache.get(dir, stamp) {
            return Ok(agent);
        }
        let agent = self.load_files(dir)?;
        self.cache.put(dir, stamp, agent.clone());
        Ok(agent)
    }

    fn load_files(&self, dir: &Path) -> Result<StoredAgent, AgentStoreError> {
        let config_path = dir.join(CONFIG_FILE);
        let Some(bytes) = read_optional(&config_path).map_err(io("read", &config_path))? else {
            return Err(not_found(dir));
        };
        let mut config = AgentConfig::from_yaml(&String::from_utf8_lossy(&bytes))
            .map_err(|source| config_error(dir, source))?;
        config.name = dir_name(dir);
        let soul_path = dir.join(SOUL_FILE);
        let soul = read_optional(&soul_path)
            .map_err(io("read", &soul_path))?
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        Ok(StoredAgent { config, soul })
    }

    fn history_at(&self, agent_dir: &Path) -> History {
        History::new(agent_dir.join(HISTORY_DIR), self.history_limit)
    }

    /// The agent's files as they are on disk.
    pub(crate) fn read_files(&self, dir: &Path) -> Result<FileBytes, AgentStoreError> {
        let soul_path = dir.join(SOUL_FILE);
        let config_path = dir.join(CONFIG_FILE);
        let soul = read_optional(&soul_path).map_err(io("read", &soul_path))?;
        let config = read_optional(&config_path).map_err(io("read", &config_path))?;
        Ok((soul, config))
    }

    /// Archives `files` (the ones in place) with the record of their write, if it still
    /// describes them.
    fn archive_current(
        &self,
        dir: &Path,
        files: &FileBytes,
    ) -> Result<Option<String>, AgentStoreError> {
        let history_dir = dir.join(HISTORY_DIR);
        let (soul, config) = (files.0.as_deref(), files.1.as_deref());
        let written = current_record(&history_dir, (soul, config));
        self.history_at(dir)
            .archive(
                &[(SOUL_FILE, soul), (CONFIG_FILE, config)],
                written,
                Utc::now(),
            )
            .map_err(io("archive", &history_dir))
    }

    /// Leaves who wrote `after` (replacing `before`) and a summary of the change.
    fn record_write(
        &self,
        history_dir: &Path,
        author: Option<VersionAuthor>,
        before: &FileBytes,
        after: (Option<&[u8]>, Option<&[u8]>),
    ) {
        fn text(bytes: Option<&[u8]>) -> Option<std::borrow::Cow<'_, str>> {
            bytes.map(String::from_utf8_lossy)
        }
        let (old_soul, old_config) = (text(before.0.as_deref()), text(before.1.as_deref()));
        let (new_soul, new_config) = (text(after.0), text(after.1));
        let summary = summarize(
            AgentFiles {
                soul: old_soul.as_deref(),
                config_yaml: old_config.as_deref(),
            },
            AgentFiles {
                soul: new_soul.as_deref(),
                config_yaml: new_config.as_deref(),
            },
        );
        let record = WriteRecord::of(author, summary, after, Utc::now());
        leave_record(history_dir, &record);
    }

    fn write_file(&self, path: &Path, bytes: &[u8]) -> Result<(), AgentStoreError> {
        write_atomic(path, bytes).map_err(io("write", path))
    }

    fn write_soul(&self, path: &Path, bytes: &[u8]) -> Result<(), AgentStoreError> {
        #[cfg(test)]
        if self
            .fail_soul_write
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(io("write", path)(std::io::Error::other("injected failure")));
        }
        self.write_file(path, bytes)
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        // A panic while holding the lock cannot leave half-applied state behind the lock itself
        // (files are replaced atomically), so a poisoned lock is safe to reuse.
        self.write_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn replace<T: PartialEq>(slot: &mut T, value: T) -> bool {
    let changed = *slot != value;
    *slot = value;
    changed
}

fn config_yaml(config: &AgentConfig) -> Result<String, AgentStoreError> {
    config.to_yaml().map_err(|source| AgentStoreError::Config {
        name: config.name.clone(),
        source,
    })
}

fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn not_found(dir: &Path) -> AgentStoreError {
    AgentStoreError::NotFound {
        name: dir_name(dir),
    }
}

fn version_not_found(dir: &Path, id: &str) -> AgentStoreError {
    AgentStoreError::VersionNotFound {
        name: dir_name(dir),
        id: if is_version_id(id) {
            id.to_string()
        } else {
            format!("{id:?}")
        },
    }
}

fn config_error(dir: &Path, source: AgentConfigError) -> AgentStoreError {
    AgentStoreError::Config {
        name: dir_name(dir),
        source,
    }
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> AgentStoreError {
    let path = path.to_path_buf();
    move |source| AgentStoreError::Io {
        action,
        path,
        source,
    }
}

#[path = "store_versions.rs"]
mod versions;

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
