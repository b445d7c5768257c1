//! Chat commands as Discord slash commands: registered once per session (when
//! `application_commands` is on), and each use turned into the text command it stands for
//! (`/model fast`) for the daemon, which answers in the channel like any message.
//!
//! An interaction must be answered within 3 s, so it is acknowledged (only the person sees
//! the acknowledgement) right after the daemon journalled the command; the daemon's answer
//! follows as an ordinary message. Its message id is `ix:{interaction id}`: it cannot be
//! replied or reacted to.

use antler_channel::{ChannelError, InboundMessage};
use reqwest::Method;
use serde_json::{Value, json};
use serenity::model::application::{CommandDataOptionValue, CommandInteraction};

use crate::api::Body;
use crate::convert::Place;
use crate::{CHANNEL_NAME, DiscordChannel};

/// Message ids of slash commands start with this.
pub(crate) const INTERACTION_PREFIX: &str = "ix:";
/// Only the person who used the command sees the acknowledgement.
const EPHEMERAL: u64 = 1 << 6;

/// `(name, description, option)`: the option is `(name, description, choices)`.
type Spec = (
    &'static str,
    &'static str,
    Option<(&'static str, &'static str, &'static [&'static str])>,
);

const COMMANDS: [Spec; 10] = [
    ("new", "Start a new conversation", None),
    ("cancel", "Stop the running request", None),
    (
        "status",
        "Show the thread, agent and model of this chat",
        None,
    ),
    ("models", "List available models", None),
    (
        "model",
        "Show or set this chat's model",
        Some(("name", "A model name, or `default`", &[])),
    ),
    (
        "agent",
        "List your agents or switch this chat to one",
        Some(("name", "An agent name, or `default`", &[])),
    ),
    (
        "plan",
        "Show or set plan mode",
        Some(("mode", "on or off", &["on", "off"])),
    ),
    (
        "bootstrap",
        "Start a bootstrap session (agent setup)",
        Some(("text", "What to set up", &[])),
    ),
    (
        "voice",
        "Also speak my answers here, as audio after the text",
        Some(("mode", "on or off", &["on", "off"])),
    ),
    ("help", "Show the commands", None),
];

/// The body of `PUT /applications/{id}/commands`: every command, usable in guilds and DMs.
pub(crate) fn definitions() -> Value {
    let commands: Vec<Value> = COMMANDS
        .iter()
        .map(|(name, description, option)| {
            let mut command = json!({"name": name, "description": description, "type": 1,
                "contexts": [0, 1], "integration_types": [0]});
            if let Some((option_name, option_description, choices)) = option {
                let mut option = json!({"type": 3, "name": option_name,
                    "description": option_description, "required": false});
                if !choices.is_empty() {
                    option["choices"] = choices
                        .iter()
                        .map(|choice| json!({"name": choice, "value": choice}))
                        .collect();
                }
                command["options"] = json!([option]);
            }
            command
        })
        .collect();
    Value::Array(commands)
}

/// The text command a slash command stands for (`/model fast`).
pub(crate) fn command_text(interaction: &CommandInteraction) -> String {
    let mut text = format!("/{}", interaction.data.name);
    for option in &interaction.data.options {
        match &option.value {
            CommandDataOptionValue::String(value) => {
                text.push(' ');
                text.push_str(value.trim());
            }
            CommandDataOptionValue::Integer(value) => text.push_str(&format!(" {value}")),
            CommandDataOptionValue::Boolean(value) => {
                text.push_str(if *value { " on" } else { " off" })
            }
            _ => {}
        }
    }
    text
}

/// The command as a message the daemon journals; `place` is `None` in DMs. A command is
/// addressed to the bot; in a thread it concerns the thread's conversation, in a channel the
/// channel's.
pub(crate) fn command_message(
    interaction: &CommandInteraction,
    place: Option<&Place>,
) -> InboundMessage {
    let channel_id = interaction.channel_id.to_string();
    let (chat_id, topic_id) = match place {
        Some(Place::Thread { parent }) => (parent.clone(), Some(channel_id)),
        _ => (channel_id, None),
    };
    let user = &interaction.user;
    InboundMessage {
        channel: CHANNEL_NAME.into(),
        workspace_id: interaction.guild_id.map(|guild| guild.to_string()),
        chat_id,
        topic_id,
        user_id: user.id.to_string(),
        display_name: Some(
            user.global_name
                .clone()
                .unwrap_or_else(|| user.name.clone()),
        ),
        platform_message_id: format!("{INTERACTION_PREFIX}{}", interaction.id),
        text: command_text(interaction),
        files: Vec::new(),
        is_direct: place.is_none(),
        mentions_bot: true,
        reply_to: None,
        thread_reply: false,
        is_bot: false,
        bot_id: None,
        context: Vec::new(),
        click: None,
    }
}

impl DiscordChannel {
    /// Registers the slash commands for `application_id` (replacing the application's global
    /// commands, as Discord's bulk overwrite does).
    pub(crate) async fn register_commands(&self, application_id: &str) -> Result<(), ChannelError> {
        self.api
            .call(
                Method::PUT,
                "commands",
                &format!("applications/{application_id}/commands"),
                Body::Json(definitions()),
            )
            .await
            .map(|_| ())
            .map_err(|error| error.into_channel("register the slash commands"))
    }

    /// Acknowledges an interaction with a note only its user sees.
    pub(crate) async fn acknowledge(
        &self,
        interaction: &CommandInteraction,
        note: &str,
    ) -> Result<(), ChannelError> {
        let body = json!({"type": 4, "data": {"content": note, "flags": EPHEMERAL,
            "allowed_mentions": {"parse": []}}});
        self.api
            .call(
                Method::POST,
                "interaction",
                &format!(
                    "interactions/{}/{}/callback",
                    interaction.id, interaction.token
                ),
                Body::Json(body),
            )
            .await
            .map(|_| ())
            .map_err(|error| error.into_channel("answer a slash command"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interaction(name: &str, options: Value, guild: Option<&str>) -> CommandInteraction {
        let mut value = json!({
            "id": "900", "application_id": "100", "type": 2, "token": "tok", "version": 1,
            "channel_id": "300", "locale": "en-US",
            "user": {"id": "7", "username": "person", "discriminator": "0", "avatar": null},
            "data": {"id": "1", "name": name, "type": 1, "options": options},
            "entitlements": [], "authorizing_integration_owners": {},
            "attachment_size_limit": 10485760
        });
        if let Some(guild) = guild {
            value["guild_id"] = json!(guild);
        }
        serde_json::from_value(value).expect("an interaction")
    }

    #[test]
    fn slash_commands_become_text_commands() {
        let model = interaction(
            "model",
            json!([{"name": "name", "type": 3, "value": "fast"}]),
            Some("9"),
        );
        assert_eq!(command_text(&model), "/model fast");
        let thread = Place::Thread {
            parent: "200".into(),
        };
        let message = command_message(&model, Some(&thread));
        assert_eq!(message.chat_id, "200");
        assert_eq!(message.topic_id.as_deref(), Some("300"));
        assert_eq!(message.platform_message_id, "ix:900");
        assert!(message.mentions_bot && !message.is_direct);
        let new = interaction("new", json!([]), None);
        let dm = command_message(&new, None);
        assert_eq!((dm.text.as_str(), dm.is_direct), ("/new", true));
    }

    #[test]
    fn definitions_cover_the_chat_commands() {
        let definitions = definitions();
        let names: Vec<&str> = definitions
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert!(names.contains(&"new") && names.contains(&"cancel") && names.contains(&"help"));
        assert_eq!(definitions[6]["options"][0]["choices"][1]["value"], "off");
    }
}
