//! Which calls need approval and why: the patterns of `approvals.tools` and
//! `approvals.when_untrusted` (plus a custom agent's additions) matched against a call's tool,
//! what an `approve_conversation` grant covers, and the readable summary a request shows.

use serde_json::Value;

use crate::agent_api::approval::ApprovalReason;
use crate::agent_api::taint::TaintSource;
use crate::config::approvals::{ApprovalAdditions, ApprovalsConfig};

/// The tool group of MCP tools (`mcp::MCP_GROUP`; the agent parts sit above this layer).
pub const MCP_GROUP: &str = "mcp";

/// Why a call of `tool` (in `group`) needs approval, or `None` when it may run.
pub fn reason(
    config: &ApprovalsConfig,
    additions: &ApprovalAdditions,
    tool: &str,
    group: Option<&str>,
    untrusted: &[TaintSource],
) -> Option<ApprovalReason> {
    let listed = |patterns: &[String]| patterns.iter().any(|p| matches(p, tool, group));
    if listed(&config.tools) || listed(&additions.tools) {
        return Some(ApprovalReason::Always);
    }
    if !untrusted.is_empty()
        && (listed(&config.when_untrusted) || listed(&additions.when_untrusted))
    {
        return Some(ApprovalReason::Untrusted {
            sources: untrusted.iter().map(TaintSource::label).collect(),
        });
    }
    None
}

/// Whether `pattern` names the tool: `group:NAME` its group, `mcp:GLOB` an MCP tool's name,
/// anything else the name (exactly, or as a `*` glob).
pub fn matches(pattern: &str, tool: &str, group: Option<&str>) -> bool {
    if let Some(name) = pattern.strip_prefix("group:") {
        return group == Some(name);
    }
    if let Some(glob) = pattern.strip_prefix("mcp:") {
        return group == Some(MCP_GROUP) && glob_matches(glob, tool);
    }
    glob_matches(pattern, tool)
}

fn glob_matches(pattern: &str, name: &str) -> bool {
    if !pattern.contains(['*', '?', '[']) {
        return pattern == name;
    }
    globset::Glob::new(pattern)
        .map(|glob| glob.compile_matcher().is_match(name))
        .unwrap_or(false)
}

/// What an `approve_conversation` of this call also approves: calls with the same key. For
/// `bash` the command's prefix (its program, and its subcommand when the second word is one,
/// so `git status -s` grants `git status`, `ls -la /tmp` grants `ls`); a command that chains,
/// pipes, redirects or substitutes (`;`, `&`, `|`, `<`, `>`, `` ` ``, `$(`, a newline) has no
/// prefix and grants only itself. Every other tool: its name.
pub fn grant_key(tool: &str, args: &Value) -> Option<String> {
    if tool != "bash" {
        return Some(tool.to_string());
    }
    command_prefix(args.get("command")?.as_str()?)
}

/// The program and subcommand of a simple command; see [`grant_key`].
pub fn command_prefix(command: &str) -> Option<String> {
    const CONTROL: [&str; 9] = [";", "&", "|", "<", ">", "`", "$(", "\n", "\r"];
    if CONTROL.iter().any(|c| command.contains(c)) {
        return None;
    }
    let mut words = command
        .split_whitespace()
        // `FOO=bar cmd` runs `cmd`; the assignment is not part of what is approved.
        .skip_while(|word| is_assignment(word));
    let program = words.next()?;
    let is_subcommand = |word: &&str| {
        word.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && word
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    };
    Some(match words.next().filter(is_subcommand) {
        Some(subcommand) => format!("{program} {subcommand}"),
        None => program.to_string(),
    })
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// What the call would do, readable: the bash command, the URL, the file path, else the
/// arguments as JSON (cut to 300 characters).
pub fn summary(tool: &str, args: &Value) -> String {
    let field = |name: &str| args.get(name).and_then(Value::as_str).map(str::to_string);
    let text = match tool {
        "bash" => field("command"),
        "web_fetch" => field("url"),
        "web_search" => field("query"),
        "write_file" | "str_replace" | "read_file" | "ls" => field("path"),
        _ => None,
    }
    .unwrap_or_else(|| args.to_string());
    cut(&text, 300)
}

fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patterns_match_names_globs_mcp_tools_and_groups() {
        let table = [
            ("bash", "bash", None, true),
            ("bash", "bash_helper", None, false),
            ("write_*", "write_file", Some("file:write"), true),
            ("mcp:github_*", "github_create_issue", Some("mcp"), true),
            ("mcp:github_*", "github_create_issue", None, false),
            ("mcp:github_*", "jira_create", Some("mcp"), false),
            ("mcp:*", "jira_create", Some("mcp"), true),
            ("group:mcp", "jira_create", Some("mcp"), true),
            ("group:web", "web_fetch", Some("web"), true),
            ("group:web", "bash", Some("bash"), false),
        ];
        for (pattern, tool, group, expected) in table {
            assert_eq!(
                matches(pattern, tool, group),
                expected,
                "{pattern} vs {tool} ({group:?})"
            );
        }
    }

    #[test]
    fn a_reason_is_always_or_untrusted_with_its_sources() {
        let config = ApprovalsConfig {
            tools: vec!["write_file".into()],
            ..Default::default()
        };
        let none = ApprovalAdditions::default();
        let page = [TaintSource::new("web_fetch", "https://example.com/")];
        assert_eq!(
            reason(&config, &none, "write_file", None, &[]),
            Some(ApprovalReason::Always)
        );
        assert_eq!(reason(&config, &none, "bash", None, &[]), None);
        assert_eq!(
            reason(&config, &none, "bash", None, &page),
            Some(ApprovalReason::Untrusted {
                sources: vec!["web_fetch https://example.com/".into()]
            })
        );
        assert_eq!(reason(&config, &none, "read_file", None, &page), None);
        let agent = ApprovalAdditions {
            tools: vec!["read_file".into()],
            when_untrusted: Vec::new(),
        };
        assert_eq!(
            reason(&config, &agent, "read_file", None, &[]),
            Some(ApprovalReason::Always)
        );
    }

    #[test]
    fn a_bash_grant_covers_the_program_and_its_subcommand() {
        let table = [
            ("git status -s", Some("git status")),
            ("git   status", Some("git status")),
            ("ls -la /tmp", Some("ls")),
            ("python3 script.py", Some("python3")),
            ("LANG=C sort file.txt", Some("sort")),
            ("cargo build --release", Some("cargo build")),
            ("git status && rm -rf /", None),
            ("echo $(cat /etc/passwd)", None),
            ("curl x | sh", None),
            ("echo hi > /tmp/x", None),
            ("ls\nrm -rf /", None),
            ("   ", None),
        ];
        for (command, expected) in table {
            assert_eq!(command_prefix(command).as_deref(), expected, "{command:?}");
        }
        assert_eq!(
            grant_key("bash", &json!({"command": "git log"})).as_deref(),
            Some("git log")
        );
        assert_eq!(
            grant_key("write_file", &json!({"path": "/x"})).as_deref(),
            Some("write_file")
        );
    }

    #[test]
    fn summaries_show_what_the_call_would_do() {
        assert_eq!(summary("bash", &json!({"command": "ls /"})), "ls /");
        assert_eq!(
            summary("web_fetch", &json!({"url": "https://example.com"})),
            "https://example.com"
        );
        assert_eq!(
            summary(
                "write_file",
                &json!({"path": "/mnt/user-data/outputs/a.md", "content": "x"})
            ),
            "/mnt/user-data/outputs/a.md"
        );
        assert_eq!(
            summary("github_create", &json!({"title": "t"})),
            r#"{"title":"t"}"#
        );
        assert_eq!(
            summary("bash", &json!({"command": "x".repeat(400)}))
                .chars()
                .count(),
            301
        );
    }
}
