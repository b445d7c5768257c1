//! What a bootstrap conversation sets up, and what the model is told about it.
//!
//! The name comes from whoever started the conversation (`context.agent_name` over the API,
//! `/bootstrap NAME` in a chat, the web chat's "Create an agent"), never from the model: then it
//! is fixed, and the model is told it. Without one the model asks the person for a name and
//! passes it to `setup_agent`, which checks it against the agent-name rules before anything is
//! written. `default` sets up the default agent's soul (admins only). The prompt's
//! `<bootstrap>` section (`agents::prompt`) tells the model which of these it is.

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
    fn the_opening_message_says_what_the_person_asked_for() {
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
