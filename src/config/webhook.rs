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

/// The largest `max_body_kb`: 10 MiB.
pub const MAX_BODY_KB_LIMIT: u32 = 10 * 1024;

impl WebhookConfig {
    /// Problems, each naming its key (`channels.webhook.endpoints.{name}.user`, …).
    pub fn problems(&self) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        for (name, endpoint) in &self.endpoints {
            let key = |field: &str| format!("channels.webhook.endpoints.{name}.{field}");
            if !is_endpoint_name(name) {
                problems.push(ConfigProblem::new(
                    format!("channels.webhook.endpoints.{name}"),
                    "an endpoint's name is its URL path (POST /hooks/NAME): use letters, digits, `-` and `_` only",
                ));
            }
            let mut problem = |field: &str, message: String| {
                problems.push(ConfigProblem::new(key(field), message));
            };
            if endpoint.secret.expose().trim().is_empty() {
                problem(
                    "secret",
                    "is empty; set a long random string (e.g. `openssl rand -hex 32`) and sign deliveries with it".into(),
                );
            }
            if endpoint.user.trim().is_empty() {
                problem(
                    "user",
                    "is empty; name the Antler user the runs act as (e.g. `alice`)".into(),
                );
            }
            if endpoint.prompt.trim().is_empty() {
                problem(
                    "prompt",
                    "is empty; say what the agent should do with a delivery, e.g. `Look at this alert: {{body}}`".into(),
                );
            }
            if endpoint.max_body_kb == 0 || endpoint.max_body_kb > MAX_BODY_KB_LIMIT {
                problem(
                    "max_body_kb",
                    format!(
                        "must be between 1 and {MAX_BODY_KB_LIMIT} (10 MiB), not {}",
                        endpoint.max_body_kb
                    ),
                );
            }
            match (&endpoint.conversation, &endpoint.key) {
                (ConversationMode::PerKey, None) => problem(
                    "key",
                    "is required with `conversation: per_key`; e.g. `{{body.alerts.0.fingerprint}}`".into(),
                ),
                (ConversationMode::PerKey, Some(key)) if key.trim().is_empty() => problem(
                    "key",
                    "is empty; with `conversation: per_key` name the value that identifies a conversation, e.g. `{{body.alerts.0.fingerprint}}`".into(),
                ),
                _ => {}
            }
            let mut templates = vec![("prompt", endpoint.prompt.as_str())];
            if let Some(key) = &endpoint.key {
                templates.push(("key", key));
            }
            if let DeliverTo::Chat { chat, thread, .. } = &endpoint.deliver_to {
                templates.push(("deliver_to.chat", chat));
                if let Some(thread) = thread {
                    templates.push(("deliver_to.thread", thread));
                }
                if chat.trim().is_empty() {
                    problem("deliver_to.chat", "is empty; give the platform's chat id (a Slack channel `C0123`, a Telegram chat id)".into());
                }
            }
            for (field, template) in templates {
                for unknown in unknown_placeholders(template) {
                    problem(
                        field,
                        format!(
                            "{unknown} names nothing; a placeholder is `{{{{body}}}}` or a path in it like `{{{{body.alerts.0.fingerprint}}}}`"
                        ),
                    );
                }
            }
        }
        problems
    }

    /// Endpoints delivering to a channel that is not configured or turned off, each naming
    /// `channels.webhook.endpoints.{name}.deliver_to.channel`; `enabled` says whether a channel
    /// is on (`None`: no such channel).
    pub fn destination_problems(
        &self,
        enabled: &dyn Fn(&str) -> Option<bool>,
    ) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        for (name, endpoint) in &self.endpoints {
            let DeliverTo::Chat { channel, .. } = &endpoint.deliver_to else {
                continue;
            };
            let message = match enabled(channel) {
                Some(true) => continue,
                Some(_) => format!(
                    "channel {channel} is turned off; set `channels.{channel}.enabled: true` or deliver elsewhere (`thread_only`)"
                ),
                None => format!(
                    "no channel {channel:?}; use telegram, slack, discord or feishu (configured and enabled), or `thread_only`"
                ),
            };
            problems.push(ConfigProblem::new(
                format!("channels.webhook.endpoints.{name}.deliver_to.channel"),
                message,
            ));
        }
        problems
    }
}

/// The placeholders of `template` that name something other than the payload (`{{bdy.x}}`,
/// `{{ }}`): config problems, since they would always render empty.
fn unknown_placeholders(template: &str) -> Vec<String> {
    let mut unknown = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let Some(length) = rest[start + 2..].find("}}") else {
            break;
        };
        let path = rest[start + 2..start + 2 + length].trim();
        if path.split('.').next() != Some("body") {
            unknown.push(format!("{{{{{path}}}}}"));
        }
        rest = &rest[start + 2 + length + 2..];
    }
    unknown
}

/// Whether `name` can be a path segment as written: `[A-Za-z0-9_-]+`.
pub fn is_endpoint_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
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

    fn endpoint(yaml: &str) -> WebhookEndpoint {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn each_problem_names_its_key() {
        let mut config = WebhookConfig::default();
        config.endpoints.insert(
            "alerts".into(),
            endpoint("secret: s3cret\nuser: alice\nprompt: 'Look: {{body}}'\n"),
        );
        assert!(config.problems().is_empty(), "{:?}", config.problems());
        config.endpoints.insert(
            "bad name".into(),
            endpoint(
                "secret: ''\nuser: ' '\nprompt: ''\nmax_body_kb: 0\nconversation: per_key\ndeliver_to: {channel: slack, chat: '{{bdy.x}}'}\n",
            ),
        );
        config.endpoints.insert(
            "huge".into(),
            endpoint("secret: s\nuser: u\nprompt: p\nmax_body_kb: 10241\n"),
        );
        let paths: Vec<String> = config.problems().into_iter().map(|p| p.path).collect();
        for expected in [
            "channels.webhook.endpoints.bad name",
            "channels.webhook.endpoints.bad name.secret",
            "channels.webhook.endpoints.bad name.user",
            "channels.webhook.endpoints.bad name.prompt",
            "channels.webhook.endpoints.bad name.max_body_kb",
            "channels.webhook.endpoints.bad name.key",
            "channels.webhook.endpoints.bad name.deliver_to.chat",
            "channels.webhook.endpoints.huge.max_body_kb",
        ] {
            assert!(
                paths.iter().any(|p| p == expected),
                "{expected} in {paths:?}"
            );
        }
        assert!(!paths.iter().any(|p| p.contains(".alerts")), "{paths:?}");
    }

    #[test]
    fn a_destination_must_be_a_configured_enabled_channel() {
        let mut config = WebhookConfig::default();
        config.endpoints.insert(
            "a".into(),
            endpoint("secret: s\nuser: u\nprompt: p\ndeliver_to: {channel: slack, chat: C1}\n"),
        );
        config.endpoints.insert(
            "b".into(),
            endpoint("secret: s\nuser: u\nprompt: p\ndeliver_to: {channel: irc, chat: x}\n"),
        );
        config
            .endpoints
            .insert("c".into(), endpoint("secret: s\nuser: u\nprompt: p\n"));
        let problems = config.destination_problems(&|name| (name == "slack").then_some(false));
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "channels.webhook.endpoints.a.deliver_to.channel",
                "channels.webhook.endpoints.b.deliver_to.channel"
            ]
        );
        assert!(problems[0].message.contains("channels.slack.enabled"));
    }

    #[test]
    fn placeholders_naming_no_payload_are_listed() {
        assert_eq!(
            unknown_placeholders("{{body.a}} {{ bdy.x }} {{}} {{body}}"),
            vec!["{{bdy.x}}".to_string(), "{{}}".to_string()]
        );
    }
}
