//! Reading a chat command: recognised only as the first token, `/cmd@BotName` accepted.
//!
//! Anything that is not a known command (`/x`, `" /new"`, `/new@OtherBot`) is chat text, so
//! skill activation (`/skill-name task`) and ordinary slashes reach the agent untouched.

/// A recognised command and its argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Telegram's first-contact command.
    Start,
    New,
    Status,
    Models,
    /// `/model` shows the override, `/model NAME` sets it, `/model default` clears it.
    Model(Option<String>),
    /// `/agent` lists, `/agent NAME` switches, `/agent default` clears.
    Agent(Option<String>),
    /// `/agent history [NAME]`: the versions of an agent (the conversation's by default).
    AgentHistory(Option<String>),
    /// `/agent diff N [M]` (argument checked when run, so a typo gets the usage).
    AgentDiff(String),
    /// `/agent revert N` (argument checked when run).
    AgentRevert(String),
    /// `/bootstrap [NAME [what it is for]]`: set up a new agent (named now, or in the
    /// conversation).
    Bootstrap {
        name: Option<String>,
        purpose: Option<String>,
    },
    /// `/plan` shows, `/plan on|off` sets.
    Plan(Option<bool>),
    Cancel,
    /// Token usage today: everyone's for admins, one's own (and budget) for others.
    Usage,
    Help,
    /// `/memory` summarises, `/memory facts` lists facts with their ids.
    Memory {
        facts: bool,
    },
    /// `/memory history`: the kept versions of the user's memory.
    MemoryHistory,
    /// `/memory revert <n>` (argument checked when run, so a typo gets the usage).
    MemoryRevert(String),
    /// `/memory confirm <id>`: a fact learned from untrusted content is used from now on.
    MemoryConfirm(String),
    /// `/memory diff <n>`: what version n changed (argument checked when run, like revert).
    MemoryDiff(String),
    /// `/forget <id|all>` (empty: usage).
    Forget(String),
    /// The skills this conversation can activate.
    Skills,
    /// `/link` issues a one-time code, `/link CODE` joins this account to the code's user.
    Link(Option<String>),
    /// `/unlink`: this account back to its own user.
    Unlink,
    /// `/approve ID`: run a tool call that waits for approval (empty id: the usage).
    Approve(String),
    /// `/deny ID [reason]`: refuse it; the model is told, with the reason.
    Deny {
        id: String,
        reason: Option<String>,
    },
    /// `/schedules`: the person's scheduled tasks (an admin's: everyone's).
    Schedules,
    /// `/unschedule ID`: remove one (empty id: the usage).
    Unschedule(String),
    /// `/voice` shows whether answers are spoken here and what decides it, `/voice on|off`
    /// sets it for the conversation.
    Voice(Option<bool>),
}

pub const HELP_TEXT: &str = "Available commands:\n\
/new — Start a new conversation\n\
/status — Show the thread, agent and model of this chat\n\
/models — List available models\n\
/model NAME — Use a model in this chat (/model default to reset)\n\
/agent [NAME] — List your agents or switch this chat to one\n\
/agent history [NAME] — Who changed this chat's agent, and what (/agent diff N [M], /agent revert N)\n\
/bootstrap [NAME [what it is for]] — Set up a new agent\n\
/plan on|off — Turn plan mode on or off\n\
/cancel — Stop the running request\n\
/memory [facts] — What I remember about you (facts with their ids)\n\
/memory history — Earlier versions of your memory (/memory revert N puts one back)\n\
/memory diff N — What version N changed: facts added, removed and edited\n\
/memory confirm ID — Use a fact learned from untrusted content\n\
/forget ID|all — Delete a remembered fact, or everything\n\
/usage — Show today's token usage\n\
/skills — List the skills you can use here\n\
/link [CODE] — Get a code to use from your other account, or use one: one user across apps\n\
/unlink — Make this account its own user again\n\
/approve ID — Run a tool call that waits for your approval\n\
/deny ID [reason] — Refuse it (the agent is told why)\n\
/schedules — List your scheduled tasks\n\
/unschedule ID — Remove a scheduled task\n\
/voice on|off — Also speak my answers in this chat, as a voice message after the text\n\
/<skill-name> <task> — Activate an enabled skill for one turn\n\
/help — Show this help";

/// Parses `text` as a command; `None` means it is chat text.
pub fn parse_command(text: &str, bot_username: Option<&str>) -> Option<Command> {
    if !text.starts_with('/') {
        return None;
    }
    let (head, rest) = match text.find(char::is_whitespace) {
        Some(idx) => (&text[..idx], text[idx..].trim()),
        None => (text, ""),
    };
    let name = match head.split_once('@') {
        Some((name, target)) => {
            let ours = bot_username.is_some_and(|bot| bot.eq_ignore_ascii_case(target));
            if !ours {
                return None;
            }
            name
        }
        None => head,
    };
    let argument = (!rest.is_empty()).then(|| rest.to_string());
    let command = match name.to_ascii_lowercase().as_str() {
        "/start" => Command::Start,
        "/new" => Command::New,
        "/status" => Command::Status,
        "/models" => Command::Models,
        "/model" => Command::Model(argument),
        "/agent" => {
            let (sub, argument) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let argument = argument.trim().to_string();
            match sub.to_ascii_lowercase().as_str() {
                "history" => Command::AgentHistory((!argument.is_empty()).then_some(argument)),
                "diff" => Command::AgentDiff(argument),
                "revert" => Command::AgentRevert(argument),
                _ => Command::Agent((!rest.is_empty()).then(|| rest.to_string())),
            }
        }
        "/bootstrap" => {
            let (name, purpose) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let given = |text: &str| (!text.trim().is_empty()).then(|| text.trim().to_string());
            Command::Bootstrap {
                name: given(name),
                purpose: given(purpose),
            }
        }
        "/plan" => match rest.to_ascii_lowercase().as_str() {
            "" => Command::Plan(None),
            "on" | "true" | "yes" => Command::Plan(Some(true)),
            "off" | "false" | "no" => Command::Plan(Some(false)),
            _ => return None,
        },
        "/cancel" | "/stop" => Command::Cancel,
        "/usage" => Command::Usage,
        "/help" => Command::Help,
        "/memory" => {
            let (sub, argument) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            match sub.to_ascii_lowercase().as_str() {
                "" => Command::Memory { facts: false },
                "facts" => Command::Memory { facts: true },
                "history" if argument.is_empty() => Command::MemoryHistory,
                "revert" => Command::MemoryRevert(argument.trim().to_string()),
                "confirm" => Command::MemoryConfirm(argument.trim().to_string()),
                "diff" => Command::MemoryDiff(argument.trim().to_string()),
                _ => return None,
            }
        }
        "/forget" => Command::Forget(rest.to_string()),
        "/skills" => Command::Skills,
        "/link" => Command::Link(argument),
        "/unlink" => Command::Unlink,
        "/approve" => Command::Approve(rest.to_string()),
        "/deny" => {
            let (id, reason) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            Command::Deny {
                id: id.to_string(),
                reason: (!reason.trim().is_empty()).then(|| reason.trim().to_string()),
            }
        }
        "/schedules" => Command::Schedules,
        "/unschedule" => Command::Unschedule(rest.to_string()),
        "/voice" => match rest.to_ascii_lowercase().as_str() {
            "" => Command::Voice(None),
            "on" | "true" | "yes" => Command::Voice(Some(true)),
            "off" | "false" | "no" => Command::Voice(Some(false)),
            _ => return None,
        },
        _ => return None,
    };
    Some(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_of_commands() {
        let bot = Some("AntlerBot");
        let cases: Vec<(&str, Option<Command>)> = vec![
            ("/new", Some(Command::New)),
            ("/NEW", Some(Command::New)),
            ("/new@AntlerBot", Some(Command::New)),
            ("/new@antlerbot", Some(Command::New)),
            ("/new@OtherBot", None),
            (" /new", None),
            ("hello /new", None),
            ("/status", Some(Command::Status)),
            ("/models", Some(Command::Models)),
            ("/model gpt-4o", Some(Command::Model(Some("gpt-4o".into())))),
            ("/model", Some(Command::Model(None))),
            ("/agent", Some(Command::Agent(None))),
            ("/agent coder", Some(Command::Agent(Some("coder".into())))),
            ("/agent history", Some(Command::AgentHistory(None))),
            (
                "/agent HISTORY coder",
                Some(Command::AgentHistory(Some("coder".into()))),
            ),
            ("/agent diff 3", Some(Command::AgentDiff("3".into()))),
            (
                "/agent diff  3  5 ",
                Some(Command::AgentDiff("3  5".into())),
            ),
            ("/agent diff", Some(Command::AgentDiff(String::new()))),
            (
                "/agent@AntlerBot revert 2",
                Some(Command::AgentRevert("2".into())),
            ),
            ("/agent revert", Some(Command::AgentRevert(String::new()))),
            (
                "/agent historian",
                Some(Command::Agent(Some("historian".into()))),
            ),
            (
                "/bootstrap",
                Some(Command::Bootstrap {
                    name: None,
                    purpose: None,
                }),
            ),
            (
                "/bootstrap chef",
                Some(Command::Bootstrap {
                    name: Some("chef".into()),
                    purpose: None,
                }),
            ),
            (
                "/bootstrap chef  plans our  meals ",
                Some(Command::Bootstrap {
                    name: Some("chef".into()),
                    purpose: Some("plans our  meals".into()),
                }),
            ),
            ("/plan on", Some(Command::Plan(Some(true)))),
            ("/plan OFF", Some(Command::Plan(Some(false)))),
            ("/plan", Some(Command::Plan(None))),
            ("/plan maybe", None),
            ("/cancel", Some(Command::Cancel)),
            ("/help", Some(Command::Help)),
            ("/start", Some(Command::Start)),
            ("/memory", Some(Command::Memory { facts: false })),
            ("/schedules", Some(Command::Schedules)),
            ("/Schedules@AntlerBot", Some(Command::Schedules)),
            (
                "/unschedule 1a2b3c4d",
                Some(Command::Unschedule("1a2b3c4d".into())),
            ),
            ("/unschedule", Some(Command::Unschedule(String::new()))),
            ("/memory facts", Some(Command::Memory { facts: true })),
            ("/memory dump", None),
            ("/memory history", Some(Command::MemoryHistory)),
            ("/memory HISTORY", Some(Command::MemoryHistory)),
            ("/memory history 2", None),
            ("/memory revert 3", Some(Command::MemoryRevert("3".into()))),
            ("/memory revert", Some(Command::MemoryRevert(String::new()))),
            ("/memory diff 4", Some(Command::MemoryDiff("4".into()))),
            ("/memory DIFF  #2 ", Some(Command::MemoryDiff("#2".into()))),
            ("/memory diff", Some(Command::MemoryDiff(String::new()))),
            (
                "/memory confirm fact_1",
                Some(Command::MemoryConfirm("fact_1".into())),
            ),
            ("/forget fact_1", Some(Command::Forget("fact_1".into()))),
            ("/forget", Some(Command::Forget(String::new()))),
            ("/skills", Some(Command::Skills)),
            ("/link", Some(Command::Link(None))),
            (
                "/link ab2c-9xyz",
                Some(Command::Link(Some("ab2c-9xyz".into()))),
            ),
            ("/unlink", Some(Command::Unlink)),
            ("/approve ap_7k2x", Some(Command::Approve("ap_7k2x".into()))),
            (
                "/APPROVE@AntlerBot ap_7k2x ",
                Some(Command::Approve("ap_7k2x".into())),
            ),
            ("/approve", Some(Command::Approve(String::new()))),
            (
                "/deny ap_7k2x",
                Some(Command::Deny {
                    id: "ap_7k2x".into(),
                    reason: None,
                }),
            ),
            (
                "/deny ap_7k2x  not on the prod box ",
                Some(Command::Deny {
                    id: "ap_7k2x".into(),
                    reason: Some("not on the prod box".into()),
                }),
            ),
            (
                "/deny",
                Some(Command::Deny {
                    id: String::new(),
                    reason: None,
                }),
            ),
            ("/voice", Some(Command::Voice(None))),
            ("/voice on", Some(Command::Voice(Some(true)))),
            ("/Voice@AntlerBot OFF", Some(Command::Voice(Some(false)))),
            ("/voice loud", None),
            ("/weather-skill paris", None),
            ("/x", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_command(text, bot), expected, "{text:?}");
        }
    }

    #[test]
    fn every_command_name_is_reserved_for_skills() {
        let names = [
            "start",
            "new",
            "status",
            "models",
            "model",
            "agent",
            "bootstrap",
            "plan",
            "cancel",
            "stop",
            "usage",
            "help",
            "memory",
            "forget",
            "skills",
            "link",
            "unlink",
            "approve",
            "deny",
            "schedules",
            "unschedule",
            "voice",
        ];
        for name in names {
            assert!(
                parse_command(&format!("/{name}"), None).is_some(),
                "/{name}"
            );
            assert!(
                crate::skills::is_reserved_name(name),
                "/{name} is a chat command, so no skill may take its name"
            );
        }
    }
}
