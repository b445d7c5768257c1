//! Block Kit buttons on the bot's messages, checked like Slack checks them (`invalid_blocks`),
//! and the `block_actions` payloads a click on one sends: through the socket as an
//! `interactive` envelope, or posted to the webhook by [`super::SlackEventsClient`].

use serde_json::{Value, json};

use super::{FAKE_SLACK_TEAM, FakeSlack, PostedMessage, socket};

/// Every button in `blocks`, with the `block_id` of the block holding it.
pub(crate) fn buttons(blocks: &[Value]) -> Vec<(String, Value)> {
    blocks
        .iter()
        .filter(|block| block["type"] == "actions")
        .flat_map(|block| {
            let block_id = block["block_id"].as_str().unwrap_or("").to_string();
            block["elements"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|element| element["type"] == "button")
                .map(move |button| (block_id.clone(), button))
        })
        .collect()
}

/// Slack's limits on the blocks the bot uses: why they are `invalid_blocks`, if they are.
pub(crate) fn check_blocks(blocks: &[Value]) -> Result<(), String> {
    let chars = |value: &Value| value.as_str().map_or(0, |text| text.chars().count());
    let mut action_ids = std::collections::HashSet::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("section") if chars(&block["text"]["text"]) > 3000 => {
                return Err("section text longer than 3000".into());
            }
            Some("actions") => {
                let elements = block["elements"].as_array().cloned().unwrap_or_default();
                if elements.is_empty() || elements.len() > 25 {
                    return Err("an actions block holds 1 to 25 elements".into());
                }
                for element in elements {
                    if element["text"]["type"] != "plain_text"
                        || chars(&element["text"]["text"]) > 75
                    {
                        return Err("a button's text is plain_text of at most 75".into());
                    }
                    if chars(&element["value"]) > 2000 {
                        return Err("a button's value is at most 2000".into());
                    }
                    let action_id = element["action_id"].as_str().unwrap_or("").to_string();
                    if !action_id.is_empty() && !action_ids.insert(action_id) {
                        return Err("action_id must be unique in a message".into());
                    }
                    if let Some(style) = element["style"].as_str()
                        && style != "primary"
                        && style != "danger"
                    {
                        return Err(format!("unknown button style {style:?}"));
                    }
                }
            }
            Some("section" | "rich_text" | "context" | "divider" | "header") => {}
            other => return Err(format!("unknown block type {other:?}")),
        }
    }
    Ok(())
}

impl FakeSlack {
    /// The `block_actions` payload of `user` clicking the button with `value` on the bot's
    /// message `ts`, as Slack builds it (a fresh `action_ts`). Panics when the message shows
    /// no such button: people can only click what is there.
    pub fn click_payload(&self, user: &str, ts: &str, value: &str) -> Value {
        let (message, action_ts) = {
            let mut state = self.shared.lock();
            let message = state.messages.iter().find(|m| m.ts == ts).cloned();
            (message, state.ts())
        };
        let Some(message) = message else {
            panic!("fake slack: no message {ts} to click on")
        };
        let Some((block_id, button)) = buttons(&message.blocks)
            .into_iter()
            .find(|(_, button)| button["value"] == value)
        else {
            panic!("fake slack: message {ts} shows no button with value {value:?}: {message:?}")
        };
        let PostedMessage {
            channel, thread_ts, ..
        } = &message;
        let mut container = json!({"type": "message", "message_ts": ts, "channel_id": channel,
            "is_ephemeral": false});
        let mut posted = json!({"type": "message", "user": super::FAKE_SLACK_BOT_USER,
            "bot_id": "B0FAKE01", "ts": ts, "text": message.text, "blocks": message.blocks});
        if let Some(thread) = thread_ts {
            container["thread_ts"] = json!(thread);
            posted["thread_ts"] = json!(thread);
        }
        let mut action = button.clone();
        action["block_id"] = json!(block_id);
        action["action_ts"] = json!(action_ts);
        json!({"type": "block_actions",
            "user": {"id": user, "username": user.to_lowercase(), "name": user.to_lowercase(),
                "team_id": FAKE_SLACK_TEAM},
            "api_app_id": "A0FAKE01", "token": "verification-token", "container": container,
            "trigger_id": format!("{action_ts}.trigger"),
            "team": {"id": FAKE_SLACK_TEAM, "domain": "fake"}, "enterprise": null,
            "is_enterprise_install": false,
            "channel": {"id": channel, "name": if channel.starts_with('D') { "directmessage" } else { "general" }},
            "message": posted, "state": {"values": {}},
            "response_url": format!("{}/actions/{action_ts}", self.shared.base()),
            "actions": [action]})
    }

    /// `user` clicks the button with `value` on message `ts`: the payload goes out through the
    /// socket as an `interactive` envelope. Returns the payload (to deliver it again).
    pub fn click(&self, user: &str, ts: &str, value: &str) -> Value {
        let payload = self.click_payload(user, ts, value);
        self.deliver_interaction(payload.clone(), 0);
        payload
    }

    /// Sends an interactivity payload in a new `interactive` envelope; `retry_attempt` > 0 is
    /// Slack's redelivery of one it saw no acknowledgement for.
    pub fn deliver_interaction(&self, payload: Value, retry_attempt: u32) {
        socket::enqueue(&self.shared, "interactive", payload, retry_attempt);
    }
}
