//! The `setup_agent` (bootstrap) and `update_agent` (custom agent self-update) tools.
//!
//! A conversation can only create or change an agent of the user it runs as. The agent name comes
//! from the run (`update_agent`, and `setup_agent` in a conversation started with a name);
//! only a bootstrap started without one takes the name the person gives, checked like any
//! other before anything is written.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::agent_api::RunContext;
use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::custom_agents::authorship::VersionAuthor;
use crate::custom_agents::bootstrap::{DEFAULT_AGENT_KEYWORD, SetupTarget};
use crate::custom_agents::capabilities::{KnownCapabilities, UnknownCapabilities};
use crate::custom_agents::config::AgentConfig;
use crate::custom_agents::store::{AgentStore, AgentStoreError, AgentUpdate};
use crate::custom_agents::{AgentNameError, normalize_agent_name};
use crate::skills::SkillCatalog;
use antler_store::state::StateUpdate;

pub const SETUP_AGENT: &str = "setup_agent";
pub const UPDATE_AGENT: &str = "update_agent";
/// The state key (`state.extra`) that names the agent a bootstrap conversation created.
pub const CREATED_AGENT_NAME_KEY: &str = "created_agent_name";

/// Why an agent tool refused; the text is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum AgentToolError {
    #[error("soul content is empty; refusing to create agent with an empty SOUL.md")]
    EmptySoul,
    #[error(
        "soul content is empty; pass the full new SOUL.md, or omit soul to keep the current one"
    )]
    EmptyUpdateSoul,
    #[error(transparent)]
    InvalidName(#[from] AgentNameError),
    #[error("'default' names the default agent; ask the person for another name")]
    ReservedName,
    #[error(
        "update_agent is only available inside a custom agent's chat; to create a new agent use setup_agent instead"
    )]
    NotCustomAgent,
    #[error(
        "update_agent is not available on the webhook channel; change the agent from a chat instead"
    )]
    WebhookChannel,
    #[error(
        "no fields to update; pass at least one of soul, description, skills, tool_groups or model"
    )]
    NothingToUpdate,
    #[error("unknown model '{requested}'; use one of: {available}")]
    UnknownModel {
        requested: String,
        available: String,
    },
    #[error(transparent)]
    Unknown(#[from] UnknownCapabilities),
    #[error(transparent)]
    Store(#[from] AgentStoreError),
}

impl From<AgentToolError> for ToolError {
    fn from(error: AgentToolError) -> Self {
        ToolError::Failed(error.to_string())
    }
}

/// Arguments of `setup_agent`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetupAgentArgs {
    /// The complete SOUL.md of the new agent (Markdown).
    pub soul: String,
    /// One line saying what the agent is for.
    pub description: String,
    /// Skills the agent may use; omit for all enabled skills, [] for none.
    #[serde(default, deserialize_with = "nullish_list")]
    pub skills: Option<Vec<String>>,
}

/// Arguments of `setup_agent` when the conversation started without a name.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NamedSetupAgentArgs {
    /// The new agent's name, as the person chose it: 1 to 64 letters, digits and hyphens.
    pub name: String,
    /// The complete SOUL.md of the new agent (Markdown).
    pub soul: String,
    /// One line saying what the agent is for.
    pub description: String,
    /// Skills the agent may use; omit for all enabled skills, [] for none.
    #[serde(default, deserialize_with = "nullish_list")]
    pub skills: Option<Vec<String>>,
}

/// Arguments of `update_agent`; every field is optional and an omitted field keeps its value.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct UpdateAgentArgs {
    /// The complete replacement SOUL.md (not a diff). Omit to keep the current one.
    #[serde(default, deserialize_with = "nullish_text")]
    pub soul: Option<String>,
    /// New one-line description.
    #[serde(default, deserialize_with = "nullish_text")]
    pub description: Option<String>,
    /// Skills the agent may use; [] disables all skills.
    #[serde(default, deserialize_with = "nullish_list")]
    pub skills: Option<Vec<String>>,
    /// Tool groups the agent may use.
    #[serde(default, deserialize_with = "nullish_list")]
    pub tool_groups: Option<Vec<String>>,
    /// Name of a configured model to use by default.
    #[serde(default, deserialize_with = "nullish_text")]
    pub model: Option<String>,
}

/// Creates the agent a bootstrap conversation was started for, under the name it started with
/// or, without one, the name the person gives (or the default agent's soul).
pub struct SetupAgentTool {
    store: Arc<AgentStore>,
    /// The skills the `skills` argument is checked against (`None`: any skill name is taken).
    skills: Option<SkillCatalog>,
    target: SetupTarget,
    description: String,
}

impl SetupAgentTool {
    /// For a bootstrap run whose `agent_name` is `agent_name` (see [`SetupTarget::of`]).
    pub fn new(
        store: Arc<AgentStore>,
        skills: Option<SkillCatalog>,
        agent_name: Option<&str>,
    ) -> Self {
        Self::for_target(store, skills, SetupTarget::of(agent_name))
    }

    pub fn for_target(
        store: Arc<AgentStore>,
        skills: Option<SkillCatalog>,
        target: SetupTarget,
    ) -> Self {
        let what = match &target {
            SetupTarget::Named(name) => format!(
                "Create the agent \"{name}\" this conversation is setting up: saves its SOUL.md"
            ),
            SetupTarget::Unnamed => "Create the agent this conversation is setting up, under \
                 the name the person chose: saves its SOUL.md"
                .to_string(),
            SetupTarget::DefaultAgent => "Save the default agent's SOUL.md".to_string(),
        };
        let description = format!(
            "{what} (personality, values, working style) and a one-line description. Call it \
             once, at the end of the interview, with the complete SOUL.md."
        );
        Self {
            store,
            skills,
            target,
            description,
        }
    }
}

#[async_trait]
impl Tool for SetupAgentTool {
    fn name(&self) -> &str {
        SETUP_AGENT
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        match self.target {
            SetupTarget::Unnamed => schema_for::<NamedSetupAgentArgs>(),
            _ => schema_for::<SetupAgentArgs>(),
        }
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let (raw_name, args) = match &self.target {
            SetupTarget::Unnamed => {
                let args: NamedSetupAgentArgs = parse_args(args)?;
                let rest = SetupAgentArgs {
                    soul: args.soul,
                    description: args.description,
                    skills: args.skills,
                };
                (args.name.trim().to_string(), rest)
            }
            SetupTarget::Named(name) => (name.clone(), parse_args(args)?),
            SetupTarget::DefaultAgent => {
                let args: SetupAgentArgs = parse_args(args)?;
                if args.soul.trim().is_empty() {
                    return Err(AgentToolError::EmptySoul.into());
                }
                self.store
                    .set_default_soul_by(&args.soul, bootstrap_author(ctx.run))
                    .map_err(AgentToolError::from)?;
                return Ok(ToolOutput::text(
                    "The default agent's SOUL.md was saved successfully!",
                ));
            }
        };
        if args.soul.trim().is_empty() {
            return Err(AgentToolError::EmptySoul.into());
        }
        if raw_name.eq_ignore_ascii_case(DEFAULT_AGENT_KEYWORD) {
            return Err(AgentToolError::ReservedName.into());
        }
        let name = normalize_agent_name(&raw_name).map_err(AgentToolError::from)?;
        check_capabilities(ctx.run, self.skills.as_ref(), None, args.skills.as_deref())?;
        let mut config = AgentConfig::new(name.clone(), args.description.trim());
        config.skills = args.skills;
        self.store
            .create_by(
                &ctx.run.users.speaker,
                &name,
                &config,
                &args.soul,
                bootstrap_author(ctx.run),
            )
            .map_err(AgentToolError::from)?;
        tracing::info!(user_id = %ctx.run.users.speaker, agent = %name, "Agent created by setup_agent");
        let mut output = ToolOutput::text(format!("Agent '{name}' created successfully!"));
        output.update = StateUpdate {
            extra: [(CREATED_AGENT_NAME_KEY.to_string(), Value::String(name))].into(),
            ..Default::default()
        };
        Ok(output)
    }
}

/// Lets a custom agent change its own SOUL.md and configuration from its chat.
pub struct UpdateAgentTool {
    store: Arc<AgentStore>,
    /// The skills the `skills` argument is checked against (`None`: any skill name is taken).
    skills: Option<SkillCatalog>,
}

impl UpdateAgentTool {
    pub fn new(store: Arc<AgentStore>, skills: Option<SkillCatalog>) -> Self {
        Self { store, skills }
    }
}

#[async_trait]
impl Tool for UpdateAgentTool {
    fn name(&self) -> &str {
        UPDATE_AGENT
    }

    fn description(&self) -> &str {
        "Update this agent's own SOUL.md and configuration. Pass only the fields that change; \
         soul must be the complete new SOUL.md. Changes take effect on the next user turn."
    }

    fn parameters(&self) -> Value {
        schema_for::<UpdateAgentArgs>()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: UpdateAgentArgs = parse_args(args)?;
        if ctx.run.options.channel_name.as_deref() == Some("webhook") {
            return Err(AgentToolError::WebhookChannel.into());
        }
        let raw_name = run_agent_name(ctx.run).ok_or(AgentToolError::NotCustomAgent)?;
        let name = normalize_agent_name(raw_name).map_err(AgentToolError::from)?;
        let update = AgentUpdate {
            soul: args.soul,
            description: args.description.map(|d| d.trim().to_string()),
            skills: args.skills,
            tool_groups: args.tool_groups,
            model: args.model.map(|m| m.trim().to_string()),
            ..Default::default()
        };
        if update == AgentUpdate::default() {
            return Err(AgentToolError::NothingToUpdate.into());
        }
        if update.soul.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Err(AgentToolError::EmptyUpdateSoul.into());
        }
        if let Some(model) = &update.model {
            check_model(ctx.run, model)?;
        }
        check_capabilities(
            ctx.run,
            self.skills.as_ref(),
            update.tool_groups.as_deref(),
            update.skills.as_deref(),
        )?;
        let author = VersionAuthor::UpdateAgent {
            run_id: ctx.run.run_id.clone(),
            user_id: ctx.run.users.speaker.clone(),
        };
        let changed = self
            .store
            .update_by(&ctx.run.users.speaker, &name, update, author)
            .map_err(AgentToolError::from)?;
        if changed.is_empty() {
            return Ok(ToolOutput::text(format!(
                "No changes: agent '{name}' already has this configuration."
            )));
        }
        tracing::info!(user_id = %ctx.run.users.speaker, agent = %name, changed = ?changed.fields, "Agent updated by update_agent");
        Ok(ToolOutput::text(format!(
            "Agent '{name}' updated successfully. Changed: {}. The new configuration takes \
             effect on the next user turn.",
            changed.fields.join(", ")
        )))
    }
}

/// The bootstrap run as the author of what its `setup_agent` writes.
fn bootstrap_author(run: &RunContext) -> VersionAuthor {
    VersionAuthor::Bootstrap {
        run_id: run.run_id.clone(),
        user_id: run.users.speaker.clone(),
    }
}

/// The agent a run is for: the run's own name, else the request option.
fn run_agent_name(run: &RunContext) -> Option<&str> {
    run.agent_name
        .as_deref()
        .or(run.options.agent_name.as_deref())
        .filter(|n| !n.trim().is_empty())
}

/// Refuses tool groups and skills that do not exist, listing the ones that do, so the model
/// can call again with valid names instead of saving an agent without them.
fn check_capabilities(
    run: &RunContext,
    catalog: Option<&SkillCatalog>,
    tool_groups: Option<&[String]>,
    skills: Option<&[String]>,
) -> Result<(), AgentToolError> {
    let known = match catalog {
        Some(catalog) => KnownCapabilities::of(&run.config, catalog, &run.users.speaker),
        None => Some(KnownCapabilities {
            tool_groups: crate::tools::registry::configured_groups(&run.config),
            skills: skills.map(<[String]>::to_vec).unwrap_or_default(),
        }),
    };
    match known {
        Some(known) => Ok(known.check(tool_groups, skills)?),
        None => Ok(()),
    }
}

fn check_model(run: &RunContext, model: &str) -> Result<(), AgentToolError> {
    if run.config.models.iter().any(|m| m.name == model) {
        return Ok(());
    }
    let available: Vec<&str> = run.config.models.iter().map(|m| m.name.as_str()).collect();
    Err(AgentToolError::UnknownModel {
        requested: model.to_string(),
        available: if available.is_empty() {
            "(no models are configured)".to_string()
        } else {
            available.join(", ")
        },
    })
}

/// Models sometimes spell "no value" as a string; those mean "omitted", not a literal value.
fn is_nullish(text: &str) -> bool {
    matches!(
        text.trim().to_ascii_lowercase().as_str(),
        "null" | "none" | "undefined"
    )
}

fn nullish_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let value = Option::<String>::deserialize(deserializer)?;
    Ok(value.filter(|text| !is_nullish(text)))
}

fn nullish_list<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrText {
        List(Vec<String>),
        Text(String),
    }
    match Option::<ListOrText>::deserialize(deserializer)? {
        None => Ok(None),
        Some(ListOrText::List(items)) => Ok(Some(
            items
                .into_iter()
                .map(|item| item.trim().to_string())
                .filter(|item| !item.is_empty())
                .collect(),
        )),
        Some(ListOrText::Text(text)) if is_nullish(&text) => Ok(None),
        Some(ListOrText::Text(text)) => Err(serde::de::Error::custom(format!(
            "expected a list of names, got the string {text:?}; send a JSON array such as [\"a\", \"b\"]"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nullish_strings_mean_omitted() {
        let args: UpdateAgentArgs = serde_json::from_value(json!({
            "soul": "None", "description": "undefined", "skills": "null", "model": null,
            "tool_groups": ["web", " "]
        }))
        .unwrap();
        assert_eq!(args.soul, None);
        assert_eq!(args.description, None);
        assert_eq!(args.skills, None);
        assert_eq!(args.model, None);
        assert_eq!(args.tool_groups, Some(vec!["web".to_string()]));
        let empty: UpdateAgentArgs = serde_json::from_value(json!({"skills": []})).unwrap();
        assert_eq!(empty.skills, Some(vec![]));
    }

    #[test]
    fn schemas_describe_every_argument() {
        let schema = schema_for::<UpdateAgentArgs>();
        for field in ["soul", "description", "skills", "tool_groups", "model"] {
            assert!(schema["properties"][field].is_object(), "{field}");
        }
        let setup = schema_for::<SetupAgentArgs>();
        assert_eq!(setup["required"], json!(["soul", "description"]));
    }
}
