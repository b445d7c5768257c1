//! `approvals.*`: which tool calls wait for a person's yes (always, or once the thread's context
//! holds untrusted content), who may give it, and how long a request waits before it is denied.
//! Read from the live config at every tool call.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::ConfigProblem;

/// The tool groups when `tool_groups:` lists none (the tool registry's defaults, which this
/// layer cannot import; `tools::registry` checks the two agree).
pub const DEFAULT_GROUPS: [&str; 4] = ["web", "file:read", "file:write", "bash"];

/// Minutes a request may wait at most (a week).
pub const MAX_TIMEOUT_MINUTES: u64 = 7 * 24 * 60;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ApprovalsConfig {
    /// Tools that always need approval: a tool name (`bash`), a `*` glob (`write_*`), an MCP
    /// pattern matched against MCP tools only (`mcp:github_*`; `mcp:*` = every MCP tool) or a
    /// tool group (`group:web`; `group:mcp` = every MCP tool).
    pub tools: Vec<String>,
    /// Tools (same patterns as `tools`) that need approval once the thread's context holds
    /// untrusted content: a fetched page, a search result, an untrusted MCP server's output,
    /// another person's words or upload.
    pub when_untrusted: Vec<String>,
    /// Who may decide: `requester` (the person whose turn asked), `admins` (`admins` and the
    /// channels' admins), or a list of Antler user ids. Admins may always decide.
    pub approvers: ApproversSetting,
    /// Minutes a request waits for a decision; then it is denied as timed out (1–10080).
    pub timeout_minutes: u64,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            tools: Vec::new(),
            when_untrusted: [
                "bash",
                "web_fetch",
                "group:mcp",
                "write_file",
                "str_replace",
            ]
            .map(String::from)
            .to_vec(),
            approvers: ApproversSetting::default(),
            timeout_minutes: 60,
        }
    }
}

/// `approvers:` as written: a keyword or a list of user ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ApproversSetting {
    /// `requester` or `admins`.
    Named(ApproverKind),
    /// Antler user ids.
    Users(Vec<String>),
}

impl Default for ApproversSetting {
    fn default() -> Self {
        ApproversSetting::Named(ApproverKind::Requester)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApproverKind {
    /// The person whose turn parked the call.
    Requester,
    /// The daemon's admins.
    Admins,
}

/// What a custom agent's `config.yaml` may add to the policy (`approvals:` there); it never
/// removes anything the daemon's config gates.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalAdditions {
    /// Added to `approvals.tools`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Added to `approvals.when_untrusted`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub when_untrusted: Vec<String>,
}

impl ApprovalAdditions {
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.when_untrusted.is_empty()
    }
}

impl ApprovalsConfig {
    /// Every problem of the section, by key path, against the config's tool groups.
    pub fn problems_in(&self, config: &crate::config::AppConfig) -> Vec<ConfigProblem> {
        let groups: Vec<String> = if config.tool_groups.is_empty() {
            DEFAULT_GROUPS.iter().map(|g| g.to_string()).collect()
        } else {
            config.tool_groups.iter().map(|g| g.name.clone()).collect()
        };
        self.problems(&groups)
    }

    /// Every problem of the section, by key path; `groups` are the tool groups a `group:`
    /// pattern may name.
    pub fn problems(&self, groups: &[String]) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        for (list, patterns) in [
            ("tools", &self.tools),
            ("when_untrusted", &self.when_untrusted),
        ] {
            for (index, pattern) in patterns.iter().enumerate() {
                if let Err(message) = check_pattern(pattern, groups) {
                    problems.push(ConfigProblem::new(
                        format!("approvals.{list}[{index}]"),
                        message,
                    ));
                }
            }
        }
        if let ApproversSetting::Users(users) = &self.approvers {
            if users.is_empty() {
                problems.push(ConfigProblem::new(
                    "approvals.approvers",
                    "lists nobody; write `requester`, `admins` or at least one user id",
                ));
            }
            for (index, user) in users.iter().enumerate() {
                if user.trim().is_empty() {
                    problems.push(ConfigProblem::new(
                        format!("approvals.approvers[{index}]"),
                        "is empty; write an Antler user id (`antler users list` shows them)",
                    ));
                }
            }
        }
        if !(1..=MAX_TIMEOUT_MINUTES).contains(&self.timeout_minutes) {
            problems.push(ConfigProblem::new(
                "approvals.timeout_minutes",
                format!("must be between 1 and {MAX_TIMEOUT_MINUTES} minutes"),
            ));
        }
        problems
    }
}

/// Why `pattern` can never match, if it cannot.
pub fn check_pattern(pattern: &str, groups: &[String]) -> Result<(), String> {
    if pattern.trim().is_empty() {
        return Err("is empty; write a tool name, a `*` glob, `mcp:…` or `group:…`".into());
    }
    if let Some(group) = pattern.strip_prefix("group:") {
        if group != "mcp" && !groups.iter().any(|g| g == group) {
            return Err(format!(
                "names no tool group `{group}`; use one of {} or mcp",
                groups.join(", ")
            ));
        }
    }
    if pattern == "mcp:" {
        return Err("names no MCP tools; write `mcp:*` or `mcp:SERVER_*`".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(config: &ApprovalsConfig) -> Vec<String> {
        config
            .problems(&["web".into(), "bash".into()])
            .into_iter()
            .map(|p| p.path)
            .collect()
    }

    #[test]
    fn defaults_are_valid_and_gate_the_acting_tools_once_untrusted() {
        let config = ApprovalsConfig::default();
        assert!(paths(&config).is_empty());
        assert!(config.tools.is_empty());
        assert_eq!(
            config.when_untrusted,
            [
                "bash",
                "web_fetch",
                "group:mcp",
                "write_file",
                "str_replace"
            ]
        );
        assert_eq!(config.timeout_minutes, 60);
        assert_eq!(config.approvers, ApproversSetting::default());
    }

    #[test]
    fn approvers_read_as_a_keyword_or_a_list() {
        let read = |text: &str| -> ApproversSetting { serde_json::from_str(text).expect("parses") };
        assert_eq!(
            read(r#""admins""#),
            ApproversSetting::Named(ApproverKind::Admins)
        );
        assert_eq!(
            read(r#"["alice", "bob"]"#),
            ApproversSetting::Users(vec!["alice".into(), "bob".into()])
        );
    }

    #[test]
    fn problems_name_their_keys() {
        let config = ApprovalsConfig {
            tools: vec!["bash".into(), "group:nope".into(), " ".into()],
            when_untrusted: vec!["group:mcp".into(), "mcp:".into()],
            approvers: ApproversSetting::Users(Vec::new()),
            timeout_minutes: 0,
        };
        assert_eq!(
            paths(&config),
            [
                "approvals.tools[1]",
                "approvals.tools[2]",
                "approvals.when_untrusted[1]",
                "approvals.approvers",
                "approvals.timeout_minutes",
            ]
        );
    }
}
