//! `channels.webhook`: named endpoints other systems POST to (`POST /hooks/{endpoint}`), each
//! verified by its signature, starting a run as one Antler user and answering in a chat.

use std::collections::BTreeMap;

use antler_channel::Secret;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::ConfigProblem;

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct WebhookConfig {
    /// Endpoints by name: `POST /hooks/{name}`. No endpoint, no route answers but 404.
    pub endpoints: BTreeMap<String, WebhookEndpoint>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookEndpoint {
    /// The shared secret of the signature, e.g. `$ALERTS_WEBHOOK_SECRET`. Required.
    pub secret: Secret,
    /// How deliveries are signed: `antler` (`X-Antler-Signature: sha256=<hex of
    /// HMAC-SHA256(secret, timestamp + "." + body)>` with `X-Antler-Timestamp`, Unix seconds,
    /// within 5 minutes) or `github` (`X-Hub-Signature-256` over the raw body).
    #[serde(default)]
    pub signature: SignatureScheme,
    /// The Antler user the runs act as (`alice`, `slack-U024BE7LH`): their budget, memory,
    /// custom agents; the threads are theirs over the API.
    pub user: String,
    /// The agent that answers (one of `user`'s custom agents); unset = the lead agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// The question asked, a template: `{{body}}` is the whole payload as JSON,
    /// `{{body.alerts.0.labels.alertname}}` one value by path. Values reach the model as
    /// untrusted quoted content, never as instructions.
    pub prompt: String,
    /// Where the answer goes: `thread_only`, or `{channel: slack, chat: "C0123", thread: "…"}`
    /// (a Telegram chat id, a Discord channel id, a Feishu chat id; `thread` optional; both may
    /// be templates like the prompt).
    #[serde(default)]
    pub deliver_to: DeliverTo,
    /// The header naming a delivery, so a redelivery is the same run; unset =
    /// `X-Antler-Delivery`, or `X-GitHub-Delivery` with `signature: github`. A delivery without
    /// it is deduplicated by a digest of its body.
    #[serde(default)]
    pub dedupe_header: Option<String>,
    /// Larger bodies are refused with 413 before anything is parsed.
    #[serde(default = "default_max_body_kb")]
    pub max_body_kb: u32,
    /// `per_delivery`: every delivery starts a conversation of its own; `per_key`: deliveries
    /// whose `key` renders the same continue one thread.
    #[serde(default)]
    pub conversation: ConversationMode,
    /// With `conversation: per_key`: the template whose value names the conversation, e.g.
    /// `{{body.alerts.0.fingerprint}}`.
    #[serde(default)]
    pub key: Option<String>,
}

fn default_max_body_kb() -> u32 {
    256
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SignatureScheme {
    #[default]
    Antler,
    Github,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConversationMode {
    #[default]
    PerDelivery,
    PerKey,
}

/// Where a delivery's answer goes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "DeliverToWire", into = "DeliverToWire")]
pub enum DeliverTo {
    /// Only the thread (`thread_only`): read it over the API.
    #[default]
    ThreadOnly,
    /// A chat of a configured channel, through that channel's outbox.
    Chat {
        channel: String,
        chat: String,
        thread: Option<String>,
    },
}

/// `deliver_to` as written: `thread_only`, or the chat.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
enum DeliverToWire {
    /// `thread_only`.
    Only(String),
    Chat {
        /// `telegram`, `slack`, `discord` or `feishu`.
        channel: String,
        /// The platform's chat id (a Slack channel `C0123`, a Telegram chat id, a Discord
        /// channel id, a Feishu `oc_…`).
        chat: String,
        /// The platform thread to answer in (a Slack `thread_ts`, a Telegram topic id).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
    },
}

impl TryFrom<DeliverToWire> for DeliverTo {
    type Error = String;

    fn try_from(wire: DeliverToWire) -> Result<Self, String> {
        match wire {
            DeliverToWire::Only(text) if text == "thread_only" => Ok(DeliverTo::ThreadOnly),
            DeliverToWire::Only(text) => Err(format!(
                "`{text}` is not a destination; use `thread_only` or {{channel, chat, thread}}"
            )),
            DeliverToWire::Chat {
                channel,
                chat,
                thread,
            } => Ok(DeliverTo::Chat {
                channel,
                chat,
                thread,
            }),
        }
    }
}

impl From<DeliverTo> for DeliverToWire {
    fn from(to: DeliverTo) -> Self {
        match to {
            DeliverTo::ThreadOnly => DeliverToWire::Only("thread_only".into()),
            DeliverTo::Chat {
                channel,
                chat,
                thread,
            } => DeliverToWire::Chat {
                channel,
                chat,
                thread,
            },
        }
    }
}

impl WebhookEndpoint {
    /// The header carrying the delivery id.
    pub fn dedupe_header(&self) -> &str {
        match (&self.dedupe_header, self.signature) {
            (Some(header), _) => header,
            (None, SignatureScheme::Github) => "X-GitHub-Delivery",
            (None, SignatureScheme::Antler) => "X-Antler-Delivery",
        }
    }
}

impl WebhookConfig {
    /// Problems, each naming its key (`channels.webhook.endpoints.{name}.user`, …).
    pub fn problems(&self) -> Vec<ConfigProblem> {
        // lane hooks fills them.
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliver_to_is_thread_only_or_a_chat() {
        let only: DeliverTo = serde_json::from_value(serde_json::json!("thread_only")).unwrap();
        assert_eq!(only, DeliverTo::ThreadOnly);
        let chat: DeliverTo =
            serde_json::from_value(serde_json::json!({"channel": "slack", "chat": "C0123"}))
                .unwrap();
        assert_eq!(
            chat,
            DeliverTo::Chat {
                channel: "slack".into(),
                chat: "C0123".into(),
                thread: None
            }
        );
        assert!(serde_json::from_value::<DeliverTo>(serde_json::json!("nowhere")).is_err());
    }
}
