//! Which skills an agent can use: a skill whose `allowed-tools` name a tool the agent does not
//! have is not advertised to it (the research skill without web tools, the bootstrap skill
//! without `setup_agent`), so the model is never sent down a workflow it cannot follow.

use crate::skills::activation::tool_name;

/// Tools a skill may list without needing them. Asking the user and presenting files belong
/// to a conversation (sub-agents hand their results to the lead instead), and `view_image`
/// only exists for models with vision; a skill works without them by design.
pub const OPTIONAL_SKILL_TOOLS: &[&str] = &["ask_clarification", "present_files", "view_image"];

/// The tools of `allowed_tools` that `has` lacks, optional ones left out; empty when the skill
/// fits (also when it lists none).
pub fn missing_tools(allowed_tools: Option<&[String]>, has: impl Fn(&str) -> bool) -> Vec<&str> {
    allowed_tools
        .unwrap_or_default()
        .iter()
        .map(|entry| tool_name(entry))
        .filter(|tool| {
            !OPTIONAL_SKILL_TOOLS
                .iter()
                .any(|optional| optional.eq_ignore_ascii_case(tool))
        })
        .filter(|tool| !has(tool))
        .collect()
}

/// Whether an agent with exactly `tools` can follow a skill with these `allowed-tools`.
pub fn fits(allowed_tools: Option<&[String]>, tools: &[&str]) -> bool {
    missing_tools(allowed_tools, |tool| {
        tools.iter().any(|have| have.eq_ignore_ascii_case(tool))
    })
    .is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_skill_fits_only_when_every_tool_it_needs_is_there() {
        let research = list(&["web_search", "WebFetch", "read_file", "present_files"]);
        assert!(fits(
            Some(&research),
            &["read_file", "web_search", "web_fetch"]
        ));
        assert!(!fits(Some(&research), &["read_file", "web_search"]));
        assert_eq!(
            missing_tools(Some(&research), |tool| tool == "read_file"),
            ["web_search", "web_fetch"]
        );
        // No list: nothing needed.
        assert!(fits(None, &[]));
    }

    #[test]
    fn conversation_and_vision_tools_are_optional() {
        let analysis = list(&["bash", "ask_clarification", "present_files", "view_image"]);
        assert!(fits(Some(&analysis), &["bash"]));
        assert!(!fits(Some(&analysis), &["ask_clarification", "view_image"]));
    }
}
