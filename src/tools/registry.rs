//! The tool registry: builds the configured tools from a compile-time table of built-in kinds
//! and filters them by tool group.
//!
//! Precedence for duplicate names: configured tools, then always-present built-ins
//! (`present_files`, `view_image`), then externally added ones (MCP).
//!
//! Vision tools (`view_image`) are kept apart: only agents whose model has `supports_vision`
//! get them, through [`ToolRegistry::tools_for_model`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::agent_api::{MemoSpec, ToolRef, dedupe_tools};
use crate::config::sandbox::SandboxConfig;
use crate::config::{AppConfig, ToolConfig};
use crate::sandbox::SandboxProvider;
use crate::tools::builtin::{
    BashTool, GlobTool, GrepTool, HostLayout, LsTool, PresentFilesTool, ReadFileTool,
    SandboxAccess, StrReplaceTool, ToolMeta, ViewImageTool, WriteFileTool,
};
use crate::tools::builtin::{WebFetchTool, WebSearchTool};
use antler_convert::{Converter, Limits};

/// Built-in tool kinds a config entry's `use` may name: (kind, parameters it accepts).
pub const BUILTIN_KINDS: &[(&str, &[&str])] = &[
    ("bash", &["timeout_seconds", "max_output_chars"]),
    ("ls", &["max_output_chars"]),
    ("read_file", &["max_output_chars"]),
    ("write_file", &["max_bytes"]),
    ("str_replace", &[]),
    ("glob", &[]),
    ("grep", &[]),
    ("view_image", &[]),
    (
        "web_search",
        &[
            "provider",
            "api_key",
            "max_results",
            "base_url",
            "timeout_seconds",
        ],
    ),
    (
        "web_fetch",
        &["max_chars", "timeout_seconds", "allow_private_networks"],
    ),
];

/// Kinds only models with `supports_vision` are given.
pub const VISION_KINDS: &[&str] = &["view_image"];

/// Groups that exist when the config defines none.
pub const DEFAULT_TOOL_GROUPS: &[&str] = &["web", "file:read", "file:write", "bash"];

/// The reference's default tool list: (name = kind, group). The web tools run in the daemon,
/// not the sandbox, and `web_fetch` refuses private addresses, so they are on by default like
/// the reference's: without them the research skill and the citation rules have nothing to use.
const DEFAULT_TOOLS: &[(&str, &str)] = &[
    ("ls", "file:read"),
    ("read_file", "file:read"),
    ("glob", "file:read"),
    ("grep", "file:read"),
    ("write_file", "file:write"),
    ("str_replace", "file:write"),
    ("bash", "bash"),
    ("web_search", "web"),
    ("web_fetch", "web"),
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error("tools[{index}] ({name}): unknown `use: {kind}`; use one of {known}")]
    UnknownKind {
        index: usize,
        name: String,
        kind: String,
        known: String,
    },
    #[error(
        "tools[{index}] ({name}): unknown parameter `{param}` for `use: {kind}`; accepted: {accepted}"
    )]
    UnknownParam {
        index: usize,
        name: String,
        kind: String,
        param: String,
        accepted: String,
    },
    #[error("tools[{index}] ({name}): parameter `{param}` is invalid: {detail}")]
    InvalidParam {
        index: usize,
        name: String,
        param: String,
        detail: String,
    },
    #[error(
        "tools[{index}] ({name}): group `{group}` is not in tool_groups; add it there or fix the name"
    )]
    UnknownGroup {
        index: usize,
        name: String,
        group: String,
    },
}

/// Every tool an agent may be given, in precedence order.
pub struct ToolRegistry {
    tools: Vec<ToolRef>,
    /// Only for vision models; names never clash with `tools`.
    vision: Vec<ToolRef>,
    /// Names of the tools [`Self::add_external`] kept (what `tool_search` may defer).
    external: std::collections::BTreeSet<String>,
}

impl ToolRegistry {
    /// Builds `config.tools` (or the defaults when empty) plus `present_files`. Every problem is
    /// reported, not just the first. `web_fetch` converts pages with a converter of its own
    /// (this binary); the harness passes its shared one through [`Self::with_converter`].
    pub fn from_config(
        config: &AppConfig,
        provider: Arc<dyn SandboxProvider>,
    ) -> Result<Self, Vec<RegistryError>> {
        Self::with_converter(config, provider, &Converter::for_config(&config.conversion))
    }

    /// [`Self::from_config`] with the converter `web_fetch` turns pages into Markdown with.
    pub fn with_converter(
        config: &AppConfig,
        provider: Arc<dyn SandboxProvider>,
        converter: &Converter,
    ) -> Result<Self, Vec<RegistryError>> {
        let access = SandboxAccess::new(provider);
        let groups = configured_groups(config);
        let entries = configured_tools(config);
        let mut tools = Vec::new();
        let mut vision = Vec::new();
        let mut problems = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            if let Some(group) = &entry.group
                && !groups.contains(group)
            {
                problems.push(RegistryError::UnknownGroup {
                    index,
                    name: entry.name.clone(),
                    group: group.clone(),
                });
                continue;
            }
            match build_tool(index, entry, &access, config, converter) {
                Ok(tool) if VISION_KINDS.contains(&entry.use_kind.as_str()) => vision.push(tool),
                Ok(tool) => tools.push(tool),
                Err(error) => problems.push(error),
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        tools.push(Arc::new(PresentFilesTool::new(config.data_dir())) as ToolRef);
        vision.push(Arc::new(ViewImageTool::new(
            ToolMeta::new(crate::agent_api::shared::VIEW_IMAGE, None),
            access,
            HostLayout::from_config(config),
        )));
        let tools: Vec<ToolRef> = dedupe_tools(tools)
            .into_iter()
            .map(MemoSpec::wrap)
            .collect();
        let vision = dedupe_tools(vision)
            .into_iter()
            .filter(|v| !tools.iter().any(|t| t.name() == v.name()))
            .map(MemoSpec::wrap)
            .collect();
        Ok(Self {
            tools,
            vision,
            external: Default::default(),
        })
    }

    /// Adds tools from elsewhere (MCP); names already taken keep their existing tool.
    pub fn add_external(&mut self, tools: impl IntoIterator<Item = ToolRef>) {
        let vision = &self.vision;
        let external: Vec<ToolRef> = tools
            .into_iter()
            .filter(|t| !vision.iter().any(|v| v.name() == t.name()))
            .map(MemoSpec::wrap)
            .collect();
        let taken: std::collections::BTreeSet<String> =
            self.tools.iter().map(|t| t.name().to_string()).collect();
        self.external.extend(
            external
                .iter()
                .map(|t| t.name().to_string())
                .filter(|name| !taken.contains(name)),
        );
        let all = std::mem::take(&mut self.tools).into_iter().chain(external);
        self.tools = dedupe_tools(all);
    }

    /// Whether `name` is a tool added by [`Self::add_external`] (an MCP tool).
    pub fn is_external(&self, name: &str) -> bool {
        self.external.contains(name)
    }

    /// Every tool except the vision-only ones.
    pub fn all(&self) -> &[ToolRef] {
        &self.tools
    }

    /// The tools only vision models get (`view_image`, always present).
    pub fn vision_tools(&self) -> &[ToolRef] {
        &self.vision
    }

    /// What an agent sees: [`Self::tools_for_groups`], plus the vision tools (same group
    /// filter) when its model has `supports_vision`.
    pub fn tools_for_model(
        &self,
        groups: Option<&[String]>,
        supports_vision: bool,
    ) -> Vec<ToolRef> {
        let mut tools = self.tools_for_groups(groups);
        if supports_vision {
            tools.extend(filter_groups(&self.vision, groups));
        }
        tools
    }

    /// The tools an agent with this `tool_groups` whitelist sees (`None` = all);
    /// `present_files` and ungrouped built-ins are always included. Never the vision tools.
    pub fn tools_for_groups(&self, groups: Option<&[String]>) -> Vec<ToolRef> {
        filter_groups(&self.tools, groups)
    }
}

fn filter_groups(tools: &[ToolRef], groups: Option<&[String]>) -> Vec<ToolRef> {
    tools
        .iter()
        .filter(|tool| match (groups, tool.group()) {
            (None, _) | (_, None) => true,
            (Some(allowed), Some(group)) => allowed.iter().any(|g| g == group),
        })
        .cloned()
        .collect()
}

/// The tool groups agents may name: `tool_groups:`, or the defaults when it lists none; and
/// `schedule` (`schedule_task`, which the lead agent adds) while `scheduler.enabled`.
pub fn configured_groups(config: &AppConfig) -> Vec<String> {
    let mut groups: Vec<String> = if config.tool_groups.is_empty() {
        DEFAULT_TOOL_GROUPS.iter().map(|g| g.to_string()).collect()
    } else {
        config.tool_groups.iter().map(|g| g.name.clone()).collect()
    };
    let schedule = crate::config::scheduler::SCHEDULE_GROUP;
    if config.scheduler.enabled && !groups.iter().any(|g| g == schedule) {
        groups.push(schedule.to_string());
    }
    groups
}

/// The names of the tools every run may have: the `tools:` entries (or the defaults),
/// `present_files`, and `schedule_task` while `scheduler.enabled`. Without MCP tools, which
/// are known only once their servers answer.
pub fn configured_tool_names(config: &AppConfig) -> Vec<String> {
    let mut names: Vec<String> = configured_tools(config)
        .into_iter()
        .map(|entry| entry.name)
        .collect();
    names.push("present_files".to_string());
    if config.scheduler.enabled {
        names.push(crate::scheduler::tool::SCHEDULE_TASK.to_string());
    }
    names.sort();
    names.dedup();
    names
}

fn configured_tools(config: &AppConfig) -> Vec<ToolConfig> {
    if config.tools.is_empty() {
        default_tool_configs()
    } else {
        config.tools.clone()
    }
}

fn default_tool_configs() -> Vec<ToolConfig> {
    DEFAULT_TOOLS
        .iter()
        .map(|(name, group)| ToolConfig {
            name: name.to_string(),
            group: Some(group.to_string()),
            use_kind: name.to_string(),
            params: BTreeMap::new(),
        })
        .collect()
}

/// Builds one tool with its slice of the config: its entry's parameters, else the `sandbox:`
/// defaults, so a tool never reads the run's config while it works.
fn build_tool(
    index: usize,
    entry: &ToolConfig,
    access: &SandboxAccess,
    config: &AppConfig,
    converter: &Converter,
) -> Result<ToolRef, RegistryError> {
    let kind = checked_kind(index, entry)?;
    let params = Params { index, entry };
    let meta = ToolMeta::new(entry.name.clone(), entry.group.as_deref());
    let access = access.clone();
    match kind {
        "bash" | "ls" | "read_file" | "write_file" => {
            file_tool(kind, meta, access, &params, &config.sandbox)
        }
        "str_replace" => Ok(Arc::new(StrReplaceTool::new(meta, access))),
        "glob" => Ok(Arc::new(GlobTool::new(meta, access))),
        "grep" => Ok(Arc::new(GrepTool::new(meta, access))),
        "view_image" => Ok(Arc::new(ViewImageTool::new(
            meta,
            access,
            HostLayout::from_config(config),
        ))),
        "web_search" => Ok(Arc::new(
            WebSearchTool::from_params(
                meta,
                params.get("provider")?,
                params.get("api_key")?,
                params.get("max_results")?,
                params.get("base_url")?,
                params.get("timeout_seconds")?,
            )
            .map_err(|detail| params.invalid("provider", detail))?,
        )),
        _ => web_fetch_tool(meta, &params, config, converter),
    }
}

/// The entry's kind, when it is a built-in one and every parameter is one that kind takes: a
/// typo fails the load instead of being ignored.
fn checked_kind(index: usize, entry: &ToolConfig) -> Result<&'static str, RegistryError> {
    let Some((kind, accepted)) = BUILTIN_KINDS
        .iter()
        .find(|(kind, _)| *kind == entry.use_kind)
    else {
        return Err(RegistryError::UnknownKind {
            index,
            name: entry.name.clone(),
            kind: entry.use_kind.clone(),
            known: BUILTIN_KINDS
                .iter()
                .map(|(k, _)| *k)
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    if let Some(param) = entry
        .params
        .keys()
        .find(|p| !accepted.contains(&p.as_str()))
    {
        return Err(RegistryError::UnknownParam {
            index,
            name: entry.name.clone(),
            kind: kind.to_string(),
            param: param.clone(),
            accepted: if accepted.is_empty() {
                "none".into()
            } else {
                accepted.join(", ")
            },
        });
    }
    Ok(kind)
}

/// The sandbox tools with an output cap (and `bash` a timeout), defaulting to `sandbox:`'s.
fn file_tool(
    kind: &str,
    meta: ToolMeta,
    access: SandboxAccess,
    params: &Params<'_>,
    sandbox: &SandboxConfig,
) -> Result<ToolRef, RegistryError> {
    let tool: ToolRef = match kind {
        "bash" => {
            let seconds = params.get::<u64>("timeout_seconds")?;
            Arc::new(BashTool::new(
                meta,
                access,
                params
                    .get("max_output_chars")?
                    .unwrap_or(sandbox.bash_output_max_chars),
                Duration::from_secs(seconds.unwrap_or(sandbox.bash_command_timeout).max(1)),
            ))
        }
        "ls" => Arc::new(LsTool::new(
            meta,
            access,
            params
                .get("max_output_chars")?
                .unwrap_or(sandbox.ls_output_max_chars),
        )),
        "read_file" => Arc::new(ReadFileTool::new(
            meta,
            access,
            params
                .get("max_output_chars")?
                .unwrap_or(sandbox.read_file_output_max_chars),
        )),
        _ => Arc::new(WriteFileTool::new(
            meta,
            access,
            params
                .get("max_bytes")?
                .unwrap_or(sandbox.write_file_max_bytes),
        )),
    };
    Ok(tool)
}

/// `web_fetch`: its own limits, and the conversion limits for the pages it turns into text.
fn web_fetch_tool(
    meta: ToolMeta,
    params: &Params<'_>,
    config: &AppConfig,
    converter: &Converter,
) -> Result<ToolRef, RegistryError> {
    Ok(Arc::new(
        WebFetchTool::new(
            meta,
            params.get("max_chars")?,
            params.get("timeout_seconds")?,
            params
                .get::<bool>("allow_private_networks")?
                .unwrap_or(false),
            converter.clone(),
            Limits::from_config(&config.conversion),
        )
        .map_err(|detail| params.invalid("timeout_seconds", detail))?,
    ))
}

struct Params<'a> {
    index: usize,
    entry: &'a ToolConfig,
}

impl Params<'_> {
    fn invalid(&self, param: &str, detail: String) -> RegistryError {
        RegistryError::InvalidParam {
            index: self.index,
            name: self.entry.name.clone(),
            param: param.to_string(),
            detail,
        }
    }

    fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, RegistryError> {
        let Some(value) = self.entry.params.get(key) else {
            return Ok(None);
        };
        serde_json::from_value::<T>(Value::clone(value))
            .map(Some)
            .map_err(|e| RegistryError::InvalidParam {
                index: self.index,
                name: self.entry.name.clone(),
                param: key.to_string(),
                detail: e.to_string(),
            })
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
