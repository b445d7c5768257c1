//! Where `antler agents` works: the agent store in the data dir, or the running daemon's
//! `/api/agents` routes over its local socket (the daemon owns the data dir while it runs).
//!
//! Both answer with the same domain types, so the CLI prints the same lines either way.

use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cli::agents::error::AgentsCliError;
use crate::cli::daemon_client::{DaemonClient, DaemonClientError, segment};
use crate::config::AppConfig;
use crate::custom_agents::{
    AgentConfig, AgentStore, AgentUpdate, KnownCapabilities, StoredAgent, VersionAuthor,
    VersionInfo,
};
use crate::skills::SkillCatalog;
use antler_store::MemoryStore;

/// What an update changed: field names and the history entry keeping the old files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct UpdateOutcome {
    #[serde(rename = "changed")]
    pub(crate) fields: Vec<String>,
    pub(crate) archived_version: Option<String>,
}

pub(crate) enum Backend<'a> {
    DataDir {
        store: AgentStore,
        config: &'a AppConfig,
    },
    /// Acting as the user the command is for (the socket's `x-antler-user`).
    Daemon(DaemonClient),
}

impl<'a> Backend<'a> {
    pub(crate) fn new(config: &'a AppConfig, daemon: Option<&DaemonClient>, user: &str) -> Self {
        match daemon {
            Some(daemon) => Backend::Daemon(daemon.clone().acting_as(user)),
            None => Backend::DataDir {
                store: AgentStore::new(config.data_dir()),
                config,
            },
        }
    }

    pub(crate) async fn list(&self, user: &str) -> Result<Vec<AgentConfig>, AgentsCliError> {
        match self {
            Backend::DataDir { store, .. } => Ok(store.list(user)?),
            Backend::Daemon(daemon) => {
                let body = daemon.send(Method::GET, "/api/agents", None).await?;
                decode(&body["agents"])
            }
        }
    }

    pub(crate) async fn get(
        &self,
        user: &str,
        name: &str,
    ) -> Result<Option<StoredAgent>, AgentsCliError> {
        match self {
            Backend::DataDir { store, .. } => Ok(store.get(user, name)?),
            Backend::Daemon(daemon) => {
                match daemon.send(Method::GET, &agent_path(name, ""), None).await {
                    Ok(body) => Ok(Some(stored(&body)?)),
                    Err(e) => match agent_error(name)(e) {
                        AgentsCliError::Store(
                            crate::custom_agents::AgentStoreError::NotFound { .. },
                        ) => Ok(None),
                        other => Err(other),
                    },
                }
            }
        }
    }

    pub(crate) async fn create(
        &self,
        user: &str,
        agent: &AgentConfig,
        soul: &str,
    ) -> Result<StoredAgent, AgentsCliError> {
        match self {
            Backend::DataDir { store, config } => {
                if let Some(model) = &agent.model {
                    check_model(config, model)?;
                }
                check_capabilities(
                    config,
                    user,
                    agent.tool_groups.as_deref(),
                    agent.skills.as_deref(),
                )?;
                Ok(store.create_by(user, &agent.name, agent, soul, cli(user))?)
            }
            Backend::Daemon(daemon) => {
                let body = json!({
                    "name": agent.name,
                    "description": agent.description,
                    "soul": soul,
                    "model": agent.model,
                    "tool_groups": agent.tool_groups,
                    "skills": agent.skills,
                });
                let created = daemon
                    .send(Method::POST, "/api/agents", Some(&body))
                    .await?;
                stored(&created)
            }
        }
    }

    pub(crate) async fn update(
        &self,
        user: &str,
        name: &str,
        update: AgentUpdate,
    ) -> Result<UpdateOutcome, AgentsCliError> {
        match self {
            Backend::DataDir { store, config } => {
                if let Some(model) = &update.model {
                    check_model(config, model)?;
                }
                check_capabilities(
                    config,
                    user,
                    update.tool_groups.as_deref(),
                    update.skills.as_deref(),
                )?;
                let changed = store.update_by(user, name, update, cli(user))?;
                Ok(UpdateOutcome {
                    fields: changed.fields.iter().map(|f| f.to_string()).collect(),
                    archived_version: changed.archived_version,
                })
            }
            Backend::Daemon(daemon) => {
                let mut body = serde_json::Map::new();
                let mut put = |key: &str, value: Option<Value>| {
                    if let Some(value) = value {
                        body.insert(key.to_string(), value);
                    }
                };
                put("soul", update.soul.map(Value::from));
                put("description", update.description.map(Value::from));
                put("model", update.model.map(Value::from));
                put("tool_groups", update.tool_groups.map(|v| json!(v)));
                put("skills", update.skills.map(|v| json!(v)));
                let answer = daemon
                    .send(
                        Method::PUT,
                        &agent_path(name, ""),
                        Some(&Value::Object(body)),
                    )
                    .await
                    .map_err(agent_error(name))?;
                decode(&answer)
            }
        }
    }

    pub(crate) async fn delete(&self, user: &str, name: &str) -> Result<(), AgentsCliError> {
        match self {
            Backend::DataDir { store, .. } => Ok(store.delete(user, name)?),
            Backend::Daemon(daemon) => {
                daemon
                    .send(Method::DELETE, &agent_path(name, ""), None)
                    .await
                    .map_err(agent_error(name))?;
                Ok(())
            }
        }
    }

    /// The kept versions, oldest first, and the files in place as a version (`None` from a
    /// daemon that does not report it).
    pub(crate) async fn history(
        &self,
        user: &str,
        name: &str,
    ) -> Result<(Vec<VersionInfo>, Option<VersionInfo>), AgentsCliError> {
        match self {
            Backend::DataDir { store, .. } => Ok((
                store.history(user, name)?,
                Some(store.current_version(user, name)?),
            )),
            Backend::Daemon(daemon) => {
                let body = daemon
                    .send(Method::GET, &agent_path(name, "/history"), None)
                    .await
                    .map_err(agent_error(name))?;
                let current = match &body["current"] {
                    Value::Null => None,
                    current => Some(decode(current)?),
                };
                Ok((decode(&body["versions"])?, current))
            }
        }
    }

    pub(crate) async fn revert(
        &self,
        user: &str,
        name: &str,
        version: &str,
    ) -> Result<Option<String>, AgentsCliError> {
        match self {
            Backend::DataDir { store, .. } => {
                Ok(store.revert_by(user, name, version, cli(user))?)
            }
            Backend::Daemon(daemon) => {
                let body = daemon
                    .send(
                        Method::POST,
                        &agent_path(name, "/revert"),
                        Some(&json!({"version": version})),
                    )
                    .await
                    .map_err(agent_error(name))?;
                Ok(body["archived_version"].as_str().map(str::to_string))
            }
        }
    }
}

/// The CLI working on the data dir, for this user, as the author of what it writes.
fn cli(user: &str) -> VersionAuthor {
    VersionAuthor::Cli {
        user_id: user.to_string(),
    }
}

pub(crate) fn check_model(config: &AppConfig, model: &str) -> Result<(), AgentsCliError> {
    if config.model(model).is_some() {
        return Ok(());
    }
    let names: Vec<&str> = config.models.iter().map(|m| m.name.as_str()).collect();
    Err(AgentsCliError::UnknownModel {
        model: model.to_string(),
        available: if names.is_empty() {
            "(no models are configured)".to_string()
        } else {
            names.join(", ")
        },
    })
}

/// Refuses tool groups and skills that do not exist (the daemon's API checks the same).
/// The skills are read from the config's skills directory and the user's own, without the
/// store (the CLI does not open it while working on agents).
fn check_capabilities(
    config: &AppConfig,
    user: &str,
    tool_groups: Option<&[String]>,
    skills: Option<&[String]>,
) -> Result<(), AgentsCliError> {
    let catalog = SkillCatalog::from_config(
        config,
        std::sync::Arc::new(MemoryStore::new()),
        Default::default(),
    );
    if let Some(known) = KnownCapabilities::of(config, &catalog, user) {
        known.check(tool_groups, skills)?;
    }
    Ok(())
}

/// The daemon's "no such agent" as the store's, so both backends fail alike.
fn agent_error(name: &str) -> impl FnOnce(DaemonClientError) -> AgentsCliError + '_ {
    move |error| match error {
        DaemonClientError::Api {
            status: 404, code, ..
        } if code == "agent_not_found" => {
            AgentsCliError::Store(crate::custom_agents::AgentStoreError::NotFound {
                name: name.to_ascii_lowercase(),
            })
        }
        other => other.into(),
    }
}

fn agent_path(name: &str, tail: &str) -> String {
    format!("/api/agents/{}{tail}", segment(name))
}

/// `{"agent": config, "soul": text}`, the shape of the agent routes' answers.
fn stored(body: &Value) -> Result<StoredAgent, AgentsCliError> {
    Ok(StoredAgent {
        config: decode(&body["agent"])?,
        soul: body["soul"].as_str().unwrap_or_default().to_string(),
    })
}

fn decode<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, AgentsCliError> {
    serde_json::from_value(value.clone())
        .map_err(|e| AgentsCliError::Daemon(DaemonClientError::Protocol(format!("{e} in {value}"))))
}
