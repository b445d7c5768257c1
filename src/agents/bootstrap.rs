//! What a bootstrap conversation sets up, and what the model is told about it.
//!
//! The name comes from whoever started the conversation (`context.agent_name` over the API,
//! `/bootstrap NAME` in a chat, the web chat's "Create an agent"), never from the model: then it
//! is fixed, and the model is told it. Without one the model asks the person for a name and
//! passes it to `setup_agent`, which checks it against the agent-name rules before anything is
//! written. `default` sets up the default agent's soul (admins only).

use crate::agents::prompt::escape_html;

/// The name that stands for the default agent (as in `/agent default`).
pub const DEFAULT_AGENT_KEYWORD: &str = "default";

/// What `setup_agent` creates in this conversation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SetupTarget {
    /// The agent named when the conversation started (validated again when it is created).
    Named(String),
    /// No name yet: the person gives one during the conversation.
    Unnamed,
    /// The default agent's SOUL.md, shared by everyone on the install.
    DefaultAgent,
}

impl SetupTarget {
    /// The target for a bootstrap run's `agent_name` (blank or `None`: unnamed).
    pub fn of(agent_name: Option<&str>) -> Self {
        match agent_name.map(str::trim).filter(|name| !name.is_empty()) {
            None => Self::Unnamed,
            Some(name) if name.eq_ignore_ascii_case(DEFAULT_AGENT_KEYWORD) => Self::DefaultAgent,
            Some(name) => Self::Named(name.to_string()),
        }
    }

    /// The `<bootstrap>` section of the system prompt: which agent the conversation creates.
    pub fn prompt_section(&self) -> String {
        let body = match self {
            Self::Named(name) => format!(
                "This conversation sets up a new agent named \"{}\". The name is fixed: do not \
                 ask for another one (you may ask how the agent should introduce itself). \
                 `setup_agent` creates it under this name.",
                escape_html(name)
            ),
            Self::Unnamed => "This conversation sets up a new agent that has no name yet. In \
                 your first round, ask the person what to call it: 1 to 64 letters, digits and \
                 hyphens, no spaces, dots or underscores (e.g. release-helper). If an answer \
                 breaks these rules, say why and ask again before you go on. Pass the name to \
                 `setup_agent` as `name`."
                .to_string(),
            Self::DefaultAgent => "This conversation sets up the default agent: the one \
                 everyone on this install talks to when they choose no agent. `setup_agent` \
                 saves its SOUL.md; it needs no name."
                .to_string(),
        };
        format!("<bootstrap>\n{body}\n</bootstrap>")
    }
}

/// The message a chat's `/bootstrap` command sends for the person: the agent and what it is
/// for, as they typed them.
pub fn opening_text(target: &SetupTarget, purpose: Option<&str>) -> String {
    let mut text = match target {
        SetupTarget::Named(name) => format!("Set up a new agent named {name}."),
        SetupTarget::Unnamed => "Set up a new agent.".to_string(),
        SetupTarget::DefaultAgent => "Set up the default agent.".to_string(),
    };
    if let Some(purpose) = purpose.map(str::trim).filter(|p| !p.is_empty()) {
        text.push_str(&format!(" What it is for: {purpose}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_name_decides_the_target() {
        assert_eq!(SetupTarget::of(None), SetupTarget::Unnamed);
        assert_eq!(SetupTarget::of(Some("  ")), SetupTarget::Unnamed);
        assert_eq!(SetupTarget::of(Some("Default")), SetupTarget::DefaultAgent);
        assert_eq!(
            SetupTarget::of(Some("coder")),
            SetupTarget::Named("coder".into())
        );
    }

    #[test]
    fn the_prompt_names_the_agent_or_asks_for_a_name() {
        let named = SetupTarget::Named("coder".into()).prompt_section();
        assert!(named.contains("named \"coder\"") && named.contains("The name is fixed"));
        let unnamed = SetupTarget::Unnamed.prompt_section();
        assert!(
            unnamed.contains("ask the person what to call it"),
            "{unnamed}"
        );
        assert!(unnamed.contains("`setup_agent` as `name`"), "{unnamed}");
        assert_eq!(
            opening_text(&SetupTarget::Named("coder".into()), Some(" reviews PRs ")),
            "Set up a new agent named coder. What it is for: reviews PRs"
        );
        assert_eq!(
            opening_text(&SetupTarget::Unnamed, None),
            "Set up a new agent."
        );
    }
}
