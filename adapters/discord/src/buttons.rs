//! Messages with buttons (an action row of button components whose `custom_id` is the value)
//! and the `MESSAGE_COMPONENT` interactions their clicks send.
//!
//! Discord shows "This interaction failed" unless an interaction is answered within 3 s, so a
//! click is answered with a deferred update (callback type 6: nothing changes on screen yet)
//! before it is journalled (Discord never delivers an interaction again, and a follow-up needs
//! the interaction answered first); the daemon then settles the message (an edit without
//! components) and may leave the clicker a note as an ephemeral follow-up through the
//! interaction's token (valid 15 minutes). A click's message id is `ix:{interaction id}`, like
//! a slash command's: a replayed INTERACTION_CREATE lands on the same journal entry.

use antler_channel::{
    Button, ButtonClick, ButtonStyle, ChannelError, ChatKey, InboundMessage, SendButtons,
    SentMessage,
};
use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Value, json};
use serenity::model::application::{ComponentInteraction, ComponentInteractionDataKind};

use crate::api::Body;
use crate::commands::INTERACTION_PREFIX;
use crate::convert::Place;
use crate::markup::single;
use crate::send::{no_mentions, referable};
use crate::{CHANNEL_NAME, DISCORD_PROFILE, DiscordChannel};

/// Only the clicker sees a follow-up with this flag.
const EPHEMERAL: u64 = 1 << 6;
/// Discord's limits: five buttons a row, five rows, 80 characters a label.
const ROW_MAX: usize = 5;
const ROWS_MAX: usize = 5;
const LABEL_MAX: usize = 80;
/// Component and interaction callback types.
const ACTION_ROW: u64 = 1;
const BUTTON: u64 = 2;
const DEFERRED_UPDATE_MESSAGE: u64 = 6;

fn label(text: &str) -> String {
    if text.chars().count() <= LABEL_MAX {
        return text.to_string();
    }
    let mut clipped: String = text.chars().take(LABEL_MAX - 1).collect();
    clipped.push('…');
    clipped
}

/// The buttons as action rows: primary 1, secondary 2 (Discord's plain grey), danger 4.
pub(crate) fn components(buttons: &[Button]) -> Value {
    let rows: Vec<Value> = buttons
        .chunks(ROW_MAX)
        .take(ROWS_MAX)
        .map(|row| {
            let buttons: Vec<Value> = row
                .iter()
                .map(|button| {
                    let style = match button.style {
                        ButtonStyle::Primary => 1,
                        ButtonStyle::Default => 2,
                        ButtonStyle::Danger => 4,
                    };
                    json!({"type": BUTTON, "style": style, "label": label(&button.label),
                        "custom_id": button.value})
                })
                .collect();
            json!({"type": ACTION_ROW, "components": buttons})
        })
        .collect();
    Value::Array(rows)
}

/// The interaction handle of a click: `{application id}/{token}`, what a follow-up needs.
fn answer_handle(interaction: &ComponentInteraction) -> String {
    format!("{}/{}", interaction.application_id, interaction.token)
}

/// A button click as the message the daemon journals; `place` is `None` in DMs. `None` for
/// other components (select menus are not sent).
pub(crate) fn click_message(
    interaction: &ComponentInteraction,
    place: Option<&Place>,
) -> Option<InboundMessage> {
    if !matches!(interaction.data.kind, ComponentInteractionDataKind::Button)
        || interaction.data.custom_id.is_empty()
    {
        return None;
    }
    let channel_id = interaction.channel_id.to_string();
    let (chat_id, topic_id) = match place {
        Some(Place::Thread { parent }) => (parent.clone(), Some(channel_id)),
        _ => (channel_id, None),
    };
    let user = &interaction.user;
    Some(InboundMessage {
        channel: CHANNEL_NAME.into(),
        workspace_id: interaction.guild_id.map(|guild| guild.to_string()),
        chat_id,
        topic_id,
        user_id: user.id.to_string(),
        // The guild nickname wins, as for messages.
        display_name: interaction
            .member
            .as_ref()
            .and_then(|member| member.nick.clone())
            .or_else(|| user.global_name.clone())
            .or_else(|| Some(user.name.clone())),
        platform_message_id: format!("{INTERACTION_PREFIX}{}", interaction.id),
        text: String::new(),
        files: Vec::new(),
        is_direct: place.is_none(),
        mentions_bot: true,
        reply_to: None,
        thread_reply: false,
        is_bot: false,
        bot_id: None,
        context: Vec::new(),
        click: Some(ButtonClick {
            value: interaction.data.custom_id.clone(),
            message_id: interaction.message.id.to_string(),
            answer_handle: answer_handle(interaction),
        }),
    })
}

impl DiscordChannel {
    /// Answers a click at once with a deferred update: nothing changes on screen, and Discord
    /// shows no failure.
    pub(crate) async fn defer_click(
        &self,
        interaction: &ComponentInteraction,
    ) -> Result<(), ChannelError> {
        self.api
            .call(
                Method::POST,
                "interaction",
                &format!(
                    "interactions/{}/{}/callback",
                    interaction.id, interaction.token
                ),
                Body::Json(json!({"type": DEFERRED_UPDATE_MESSAGE})),
            )
            .await
            .map(|_| ())
            .map_err(|error| error.into_channel("answer a button click"))
    }

    /// Tells the clicker (only them) that the click was not taken.
    pub(crate) async fn click_not_taken(
        &self,
        interaction: &ComponentInteraction,
    ) -> Result<(), ChannelError> {
        self.followup(
            &interaction.application_id.to_string(),
            &interaction.token,
            "I could not take that click; please try again.",
        )
        .await
    }

    /// An ephemeral follow-up message through an interaction's token.
    async fn followup(
        &self,
        application: &str,
        token: &str,
        note: &str,
    ) -> Result<(), ChannelError> {
        let body = json!({"content": single(note, DISCORD_PROFILE.max_text_len),
            "flags": EPHEMERAL, "allowed_mentions": {"parse": []}});
        self.api
            .call(
                Method::POST,
                "followup",
                &format!("webhooks/{application}/{token}"),
                Body::Json(body),
            )
            .await
            .map(|_| ())
            .map_err(|error| error.into_channel("answer a button click"))
    }
}

#[async_trait]
impl SendButtons for DiscordChannel {
    async fn send_buttons(
        &self,
        chat: &ChatKey,
        text: &str,
        buttons: &[Button],
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let target = self.target(chat).await?;
        let mut body = json!({"content": single(text, DISCORD_PROFILE.max_text_len),
            "allowed_mentions": no_mentions(), "components": components(buttons)});
        if let Some(reference) = referable(chat, reply_to) {
            body["message_reference"] =
                json!({"message_id": reference, "fail_if_not_exists": false});
        }
        let sent = self
            .api
            .call(
                Method::POST,
                &format!("send:{target}"),
                &format!("channels/{target}/messages"),
                Body::Json(body),
            )
            .await
            .map_err(|error| error.into_channel("send a message with buttons"))?;
        sent["id"]
            .as_str()
            .map(|id| SentMessage {
                platform_message_id: id.to_string(),
            })
            .ok_or_else(|| ChannelError::Platform("discord sent no message id".into()))
    }

    /// Edits the message through the bot (not the interaction), so a decision made elsewhere
    /// (a timeout, the HTTP API) settles it too.
    async fn settle_buttons(
        &self,
        chat: &ChatKey,
        message_id: &str,
        text: &str,
    ) -> Result<(), ChannelError> {
        let target = self.target(chat).await?;
        let body = json!({"content": single(text, DISCORD_PROFILE.max_text_len),
            "components": [], "allowed_mentions": no_mentions()});
        self.api
            .call(
                Method::PATCH,
                &format!("edit:{target}"),
                &format!("channels/{target}/messages/{message_id}"),
                Body::Json(body),
            )
            .await
            .map(|_| ())
            .map_err(|error| error.into_channel("settle a message with buttons"))
    }

    /// An ephemeral follow-up only the clicker sees; without a note nothing (the deferred
    /// update already ended Discord's loading state).
    async fn answer_click(
        &self,
        _chat: &ChatKey,
        _user_id: &str,
        click: &ButtonClick,
        note: Option<&str>,
    ) -> Result<(), ChannelError> {
        let Some(note) = note else {
            return Ok(());
        };
        let Some((application, token)) =
            click
                .answer_handle
                .split_once('/')
                .filter(|(application, token)| {
                    !application.is_empty()
                        && application.chars().all(|c| c.is_ascii_digit())
                        && !token.is_empty()
                        && token
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
                })
        else {
            return Err(ChannelError::Platform(
                "the click carries no discord interaction token to answer it with".into(),
            ));
        };
        self.followup(application, token, note).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn click(guild: Option<&str>, component_type: u64) -> ComponentInteraction {
        let user = json!({"id": "7", "username": "alice", "global_name": "Alice",
            "discriminator": "0", "avatar": null});
        let mut value = json!({
            "id": "901", "application_id": "100", "type": 3, "token": "tok-en_1.x", "version": 1,
            "channel_id": "300", "locale": "en-US",
            "data": {"custom_id": "ap:42:a", "component_type": component_type, "values": []},
            "message": {"id": "555", "channel_id": "300", "content": "Run ls?",
                "author": {"id": "100", "username": "antler", "discriminator": "0",
                    "avatar": null, "bot": true},
                "timestamp": "2024-01-01T00:00:00.000000+00:00", "edited_timestamp": null,
                "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
                "attachments": [], "embeds": [], "pinned": false, "type": 0, "flags": 0,
                "components": []},
            "entitlements": [], "authorizing_integration_owners": {},
            "attachment_size_limit": 10485760
        });
        match guild {
            Some(guild) => {
                value["guild_id"] = json!(guild);
                value["member"] = json!({"user": user, "roles": [], "deaf": false,
                    "mute": false, "flags": 0, "joined_at": "2024-01-01T00:00:00.000000+00:00"});
            }
            None => value["user"] = user,
        }
        serde_json::from_value(value).expect("a component interaction")
    }

    #[test]
    fn a_button_click_becomes_one_click_message() {
        let thread = Place::Thread {
            parent: "200".into(),
        };
        let message = click_message(&click(Some("9"), 2), Some(&thread)).expect("a click");
        assert_eq!(message.chat_id, "200");
        assert_eq!(message.topic_id.as_deref(), Some("300"));
        assert_eq!(message.user_id, "7");
        assert_eq!(message.display_name.as_deref(), Some("Alice"));
        assert_eq!(message.workspace_id.as_deref(), Some("9"));
        assert_eq!(message.platform_message_id, "ix:901");
        assert!(message.text.is_empty() && !message.is_direct);
        let click_data = message.click.expect("click set");
        assert_eq!(click_data.value, "ap:42:a");
        assert_eq!(click_data.message_id, "555");
        assert_eq!(click_data.answer_handle, "100/tok-en_1.x");
        let dm = click_message(&click(None, 2), None).expect("a click in a DM");
        assert!(dm.is_direct && dm.topic_id.is_none() && dm.user_id == "7");
        assert!(
            click_message(&click(None, 3), None).is_none(),
            "a select menu"
        );
    }

    #[test]
    fn buttons_are_action_rows_of_five() {
        let buttons: Vec<Button> = (0..7)
            .map(|n| Button {
                label: if n == 6 {
                    "y".repeat(90)
                } else {
                    format!("B{n}")
                },
                value: format!("v{n}"),
                style: match n {
                    0 => ButtonStyle::Primary,
                    1 => ButtonStyle::Danger,
                    _ => ButtonStyle::Default,
                },
            })
            .collect();
        let rows = components(&buttons);
        assert_eq!(rows.as_array().map(Vec::len), Some(2));
        assert_eq!(rows[0]["type"], 1);
        assert_eq!(
            rows[0]["components"][0],
            json!({"type": 2, "style": 1, "label": "B0", "custom_id": "v0"})
        );
        assert_eq!(rows[0]["components"][1]["style"], 4);
        assert_eq!(rows[0]["components"][2]["style"], 2);
        let long = rows[1]["components"][1]["label"].as_str().expect("label");
        assert_eq!(long.chars().count(), LABEL_MAX);
    }
}
