//! Webhooks from other systems (`channels.webhook`): `POST /hooks/{endpoint}` verified by its
//! signature before anything is parsed, journalled once per delivery id, run as the endpoint's
//! user, answered in `deliver_to` through that channel's outbox (or only in the thread).
//!
//! [`Hooks::receive`] is the route's whole job after the size limit: the endpoint, the
//! signature, the JSON, then one record per delivery id (`store`). A chat delivery is then
//! journalled in its chat through the channel layer's [`ChatDelivery`] (its worker answers it,
//! `channels::turn::hook`); a `thread_only` one runs in the background here (`background`).

mod background;
pub mod request;
pub mod store;
pub mod template;
pub mod verify;

use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeZone, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::webhook::{ConversationMode, DeliverTo, WebhookEndpoint};
use crate::harness::Harness;
use store::{ChatTarget, Delivery, DeliveryStatus, DeliveryStore, Inserted};
use verify::SignatureError;

/// The `channel_name` of webhook runs.
pub const WEBHOOK_CHANNEL: &str = "webhook";

/// What `POST /hooks/{endpoint}` answers with 202: the same ids for a redelivery.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Accepted {
    pub run_id: String,
    pub thread_id: String,
}

/// Journals a chat delivery in its chat: the channel layer's side, set when the channels
/// start. Journalling the same delivery again changes nothing (the journal takes an id once).
pub trait ChatDelivery: Send + Sync {
    fn journal(&self, delivery: &Delivery) -> Result<(), String>;
}

/// Why a delivery was refused; the HTTP layer turns each into its status.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("no webhook endpoint {0:?}; configure it under channels.webhook.endpoints")]
    UnknownEndpoint(String),
    #[error(
        "the body is larger than {limit_kb} KiB, this endpoint's limit (channels.webhook.endpoints.{endpoint}.max_body_kb)"
    )]
    TooLarge { endpoint: String, limit_kb: u32 },
    #[error("{}", signature_message(endpoint, error))]
    Signature {
        endpoint: String,
        error: SignatureError,
    },
    #[error("the body is not JSON ({0}); send the payload as a JSON document")]
    NotJson(String),
    #[error("could not record the delivery ({0}); retry it later")]
    Unavailable(String),
}

/// What a refused signature says: what is wrong and, unless only the clock is, where the
/// secret is set (never the secret).
fn signature_message(endpoint: &str, error: &SignatureError) -> String {
    match error {
        SignatureError::Stale => error.to_string(),
        _ => format!(
            "{error}; sign the delivery with the endpoint's secret (channels.webhook.endpoints.{endpoint}.secret)"
        ),
    }
}

/// A delivery accepted: its ids, and whether it was a redelivery of one recorded before.
#[derive(Debug)]
pub struct Received {
    pub accepted: Accepted,
    pub duplicate: bool,
}

/// The webhook channel. Cheap to clone.
#[derive(Clone)]
pub struct Hooks {
    inner: Arc<Inner>,
}

struct Inner {
    harness: Arc<Harness>,
    store: DeliveryStore,
    chat: Mutex<Option<Arc<dyn ChatDelivery>>>,
    /// The background runs of `thread_only` deliveries (each waiting for its run's end).
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl Hooks {
    pub fn new(harness: Arc<Harness>) -> Self {
        let names: Vec<String> = harness
            .config()
            .current()
            .channels
            .webhook
            .endpoints
            .keys()
            .cloned()
            .collect();
        crate::metrics::register_webhook_endpoints(&names);
        let store = DeliveryStore::new(harness.threads().store().clone());
        Self {
            inner: Arc::new(Inner {
                harness,
                store,
                chat: Mutex::new(None),
                tracker: TaskTracker::new(),
                stop: CancellationToken::new(),
            }),
        }
    }

    /// Where chat deliveries are journalled (the channel layer's hook).
    pub fn set_chat_delivery(&self, hook: Arc<dyn ChatDelivery>) {
        *lock(&self.inner.chat) = Some(hook);
    }

    /// The endpoint called `name` in the live config.
    pub fn endpoint(&self, name: &str) -> Result<WebhookEndpoint, HookError> {
        let config = self.inner.harness.config().current();
        config
            .channels
            .webhook
            .endpoints
            .get(name)
            .cloned()
            .ok_or_else(|| HookError::UnknownEndpoint(name.to_string()))
    }

    /// Verifies, parses and records one delivery to `name` whose body was read within the
    /// endpoint's limit; `header` looks a request header up by name.
    pub fn receive(
        &self,
        name: &str,
        header: &dyn Fn(&str) -> Option<String>,
        body: &[u8],
    ) -> Result<Received, HookError> {
        let endpoint = self.endpoint(name)?;
        let now = self.now();
        verify::verify(
            endpoint.signature,
            endpoint.secret.expose().as_bytes(),
            header,
            body,
            now,
        )
        .map_err(|error| HookError::Signature {
            endpoint: name.to_string(),
            error,
        })?;
        let payload: Value =
            serde_json::from_slice(body).map_err(|e| HookError::NotJson(e.to_string()))?;
        let delivery_id = delivery_id(header(endpoint.dedupe_header()), body);
        let unavailable = |e: &dyn std::fmt::Display| HookError::Unavailable(e.to_string());
        if let Some(existing) = self
            .inner
            .store
            .get(name, &delivery_id)
            .map_err(|e| unavailable(&e))?
        {
            return self.again(existing);
        }
        let delivery = self.new_delivery(name, &endpoint, delivery_id, &payload, now)?;
        match self
            .inner
            .store
            .insert(&delivery)
            .map_err(|e| unavailable(&e))?
        {
            Inserted::Existing(existing) => self.again(*existing),
            Inserted::New => {
                tracing::info!(endpoint = name, delivery = %delivery.delivery_id, run_id = %delivery.run_id, thread_id = %delivery.thread_id, "A webhook delivery was accepted");
                self.start(delivery.clone())?;
                Ok(Received {
                    accepted: accepted(&delivery),
                    duplicate: false,
                })
            }
        }
    }

    /// Starts what recorded deliveries left undone at the last stop: chat ones journalled
    /// again (the journal takes an id once), thread ones run on.
    pub fn recover(&self) {
        let unfinished = match self.inner.store.unfinished() {
            Ok(unfinished) => unfinished,
            Err(error) => {
                tracing::warn!(%error, "Could not read the webhook deliveries left unfinished");
                return;
            }
        };
        for delivery in unfinished {
            tracing::info!(endpoint = %delivery.endpoint, delivery = %delivery.delivery_id, "Continuing a webhook delivery left unfinished");
            if let Err(error) = self.start(delivery.clone()) {
                tracing::warn!(%error, endpoint = %delivery.endpoint, delivery = %delivery.delivery_id, "Could not continue a webhook delivery; its next redelivery or restart tries again");
            }
        }
    }

    /// Stops waiting for busy threads; background runs already started end with the
    /// harness's drain.
    pub fn stop(&self) {
        self.inner.stop.cancel();
        self.inner.tracker.close();
    }

    /// Waits for the background deliveries' tasks, after the harness drained the runs.
    pub async fn wait(&self) {
        self.stop();
        self.inner.tracker.wait().await;
    }

    pub fn store(&self) -> &DeliveryStore {
        &self.inner.store
    }

    fn now(&self) -> DateTime<Utc> {
        let ms = self.inner.harness.cluster().now_ms();
        Utc.timestamp_millis_opt(i64::try_from(ms).unwrap_or(i64::MAX))
            .single()
            .unwrap_or_else(Utc::now)
    }

    /// A redelivery: the stored ids; a chat delivery not yet answered is journalled again,
    /// in case the first attempt recorded it and failed to journal it.
    fn again(&self, existing: Delivery) -> Result<Received, HookError> {
        if existing.chat.is_some() && !existing.status.is_finished() {
            self.journal(&existing)?;
        }
        Ok(Received {
            accepted: accepted(&existing),
            duplicate: true,
        })
    }

    fn start(&self, delivery: Delivery) -> Result<(), HookError> {
        if delivery.chat.is_some() {
            return self.journal(&delivery);
        }
        let inner = self.inner.clone();
        self.inner.tracker.spawn(background::run(
            inner.harness.clone(),
            inner.store.clone(),
            inner.stop.clone(),
            delivery,
        ));
        Ok(())
    }

    fn journal(&self, delivery: &Delivery) -> Result<(), HookError> {
        let hook = lock(&self.inner.chat).clone();
        let Some(hook) = hook else {
            return Err(HookError::Unavailable(
                "the chat channels are not running yet".into(),
            ));
        };
        hook.journal(delivery).map_err(HookError::Unavailable)
    }

    /// The record of a new delivery: its thread (created for the endpoint's user, or the
    /// key's conversation), the rendered question and destination.
    fn new_delivery(
        &self,
        name: &str,
        endpoint: &WebhookEndpoint,
        delivery_id: String,
        payload: &Value,
        now: DateTime<Utc>,
    ) -> Result<Delivery, HookError> {
        let as_is = |text: &str| text.to_string();
        let conversation_key = match (endpoint.conversation, &endpoint.key) {
            (ConversationMode::PerKey, Some(template)) => {
                Some(template::render(template, payload, &as_is))
                    .map(|key| key.trim().to_string())
                    .filter(|key| !key.is_empty())
            }
            _ => None,
        };
        let proposed = uuid::Uuid::new_v4().to_string();
        let (thread_id, title) = match &conversation_key {
            Some(key) => {
                let (thread_id, _) = self
                    .inner
                    .store
                    .conversation(name, key, &proposed)
                    .map_err(|e| HookError::Unavailable(e.to_string()))?;
                (thread_id, format!("{name}: {key}"))
            }
            None => (proposed, format!("{name}: {delivery_id}")),
        };
        self.thread_for(&endpoint.user, &thread_id, name, &title)?;
        let chat = match &endpoint.deliver_to {
            DeliverTo::ThreadOnly => None,
            DeliverTo::Chat {
                channel,
                chat,
                thread,
            } => Some(ChatTarget {
                channel: channel.clone(),
                chat: template::render(chat, payload, &as_is).trim().to_string(),
                thread: thread
                    .as_deref()
                    .map(|t| template::render(t, payload, &as_is).trim().to_string())
                    .filter(|t| !t.is_empty()),
            }),
        };
        Ok(Delivery {
            endpoint: name.to_string(),
            delivery_id,
            run_id: uuid::Uuid::new_v4().to_string(),
            thread_id,
            user: endpoint.user.clone(),
            agent: endpoint.agent.clone(),
            prompt: request::render_prompt(name, &endpoint.prompt, payload),
            chat,
            status: DeliveryStatus::Received,
            received_at: now,
            detail: None,
        })
    }

    /// Creates the delivery's thread for `user` (its first delivery's), titled so the user
    /// finds it in `GET /api/threads`.
    fn thread_for(
        &self,
        user: &str,
        thread_id: &str,
        endpoint: &str,
        title: &str,
    ) -> Result<(), HookError> {
        let harness = &self.inner.harness;
        if harness
            .threads()
            .get(thread_id)
            .map_err(|e| HookError::Unavailable(e.to_string()))?
            .is_some()
        {
            return Ok(());
        }
        let mut metadata = Map::new();
        metadata.insert("webhook_endpoint".into(), Value::String(endpoint.into()));
        harness
            .create_thread(user, Some(thread_id.to_string()), metadata)
            .map_err(|e| HookError::Unavailable(e.to_string()))?;
        let title = crate::agent_api::shared::truncate_chars(title, 80);
        harness
            .threads()
            .update(thread_id, |record| record.title = Some(title.to_string()))
            .map_err(|e| HookError::Unavailable(e.to_string()))?;
        Ok(())
    }
}

/// The delivery's id: the dedupe header's value, else a digest of the body (the same body
/// twice is the same delivery). A long header value is digested too, to bound the keys.
fn delivery_id(header: Option<String>, body: &[u8]) -> String {
    match header
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
    {
        Some(value) if value.len() <= 128 && !value.chars().any(char::is_control) => value,
        Some(value) => format!("sha256-{}", hex::encode(Sha256::digest(value.as_bytes()))),
        None => format!("sha256-{}", hex::encode(Sha256::digest(body))),
    }
}

fn accepted(delivery: &Delivery) -> Accepted {
    Accepted {
        run_id: delivery.run_id.clone(),
        thread_id: delivery.thread_id.clone(),
    }
}

/// Logs how a delivery ended: a failure with its reason, for the operator.
pub fn log_end(delivery: &Delivery, status: DeliveryStatus, detail: Option<&str>) {
    if status == DeliveryStatus::Failed {
        tracing::warn!(endpoint = %delivery.endpoint, delivery = %delivery.delivery_id, thread_id = %delivery.thread_id, reason = detail.unwrap_or(""), "A webhook delivery failed");
    } else {
        tracing::info!(endpoint = %delivery.endpoint, delivery = %delivery.delivery_id, thread_id = %delivery.thread_id, "A webhook delivery was answered");
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_is_named_by_its_header_else_by_its_body() {
        assert_eq!(delivery_id(Some(" d-1 ".into()), b"{}"), "d-1");
        let by_body = delivery_id(None, b"{}");
        assert!(by_body.starts_with("sha256-"));
        assert_eq!(by_body, delivery_id(Some(String::new()), b"{}"));
        assert_ne!(by_body, delivery_id(None, b"{ }"));
        let long = delivery_id(Some("x".repeat(500)), b"{}");
        assert!(long.starts_with("sha256-") && long.len() < 100);
    }
}
