//! Channels and threads: where a guild message was posted (a channel, or a thread of which
//! channel), and the Discord thread each conversation of `thread_mode` lives in.
//!
//! A MESSAGE_CREATE does not say whether its channel is a thread, so the first message from a
//! channel asks `GET /channels/{id}` once (remembered: a channel never changes kind). A
//! conversation started by a mention has its message id as topic; its thread is created
//! (`POST /channels/{channel}/messages/{message}/threads`, named from the message) just before
//! the first thing is sent into it, so only messages the daemon answers get one. Discord
//! refuses a second thread on one message (400, code 160004): that thread already exists
//! (created before a restart), and it is used.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use antler_channel::{ChannelError, ChatKey};
use reqwest::Method;
use serde_json::json;

use crate::DiscordChannel;
use crate::api::{ApiError, Body};
use crate::convert::Place;
use crate::markup::thread_name;

/// Channels remembered before the memory is cleared (a lookup is cheap to repeat).
const MAX_PLACES: usize = 10_000;
/// Thread names waiting for their thread; older ones fall back to a generic name.
const MAX_PENDING: usize = 512;
/// "A thread has already been created for this message".
const THREAD_ALREADY_CREATED: i64 = 160_004;
/// "Unknown Message": the topic is a thread people made, not a message to start one on.
const UNKNOWN_MESSAGE: i64 = 10_008;
/// Discord's channel types of threads (announcement, public, private).
const THREAD_TYPES: [u64; 3] = [10, 11, 12];

#[derive(Default)]
pub(crate) struct Threads {
    places: Mutex<HashMap<String, Place>>,
    /// Threads known to exist (people posted in them, or the bot created them).
    existing: Mutex<HashSet<String>>,
    /// Message id → the name of the thread to start on it.
    pending: Mutex<(HashMap<String, String>, VecDeque<String>)>,
    /// One thread creation at a time: the typing indicator and the status message of a turn
    /// would otherwise both create it.
    creating: tokio::sync::Mutex<()>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Threads {
    /// Remembers the name a thread on `message_id` gets if the daemon answers it.
    pub(crate) fn name_later(&self, message_id: &str, text: &str) {
        let mut pending = lock(&self.pending);
        let (names, order) = &mut *pending;
        if names
            .insert(message_id.to_string(), thread_name(text))
            .is_none()
        {
            order.push_back(message_id.to_string());
        }
        while order.len() > MAX_PENDING {
            if let Some(old) = order.pop_front() {
                names.remove(&old);
            }
        }
    }

    pub(crate) fn exists(&self, thread_id: &str) {
        lock(&self.existing).insert(thread_id.to_string());
    }

    fn known(&self, thread_id: &str) -> bool {
        lock(&self.existing).contains(thread_id)
    }

    fn take_name(&self, message_id: &str) -> Option<String> {
        lock(&self.pending).0.remove(message_id)
    }
}

impl DiscordChannel {
    /// Where guild channel `channel_id` is: a channel, or a thread of which channel.
    pub(crate) async fn place(&self, channel_id: &str) -> Result<Place, ChannelError> {
        if let Some(place) = lock(&self.threads.places).get(channel_id) {
            return Ok(place.clone());
        }
        let channel = self
            .api
            .call(
                Method::GET,
                &format!("channel:{channel_id}"),
                &format!("channels/{channel_id}"),
                Body::Empty,
            )
            .await
            .map_err(|error| error.into_channel("look up a channel"))?;
        let is_thread = channel["type"]
            .as_u64()
            .is_some_and(|kind| THREAD_TYPES.contains(&kind));
        let place = match channel["parent_id"].as_str() {
            Some(parent) if is_thread => Place::Thread {
                parent: parent.to_string(),
            },
            _ => Place::Channel,
        };
        if matches!(place, Place::Thread { .. }) {
            self.threads.exists(channel_id);
        }
        let mut places = lock(&self.threads.places);
        if places.len() >= MAX_PLACES {
            places.clear();
        }
        places.insert(channel_id.to_string(), place.clone());
        Ok(place)
    }

    /// The Discord channel a conversation's messages go to: the DM or text channel, or its
    /// thread, created first when it does not exist yet.
    pub(crate) async fn target(&self, chat: &ChatKey) -> Result<String, ChannelError> {
        let Some(topic) = &chat.topic_id else {
            return Ok(chat.chat_id.clone());
        };
        if self.threads.known(topic) {
            return Ok(topic.clone());
        }
        let _creating = self.threads.creating.lock().await;
        if self.threads.known(topic) {
            return Ok(topic.clone());
        }
        let name = self
            .threads
            .take_name(topic)
            .unwrap_or_else(|| format!("Conversation with {}", self.identity.name));
        let created = self
            .api
            .call(
                Method::POST,
                &format!("thread:{}", chat.chat_id),
                &format!("channels/{}/messages/{topic}/threads", chat.chat_id),
                Body::Json(json!({"name": name, "auto_archive_duration": 1440})),
            )
            .await;
        match created {
            Ok(_) => {}
            Err(error)
                if matches!(
                    error.code(),
                    Some(THREAD_ALREADY_CREATED) | Some(UNKNOWN_MESSAGE)
                ) =>
            {
                tracing::debug!(thread = %topic, "The conversation's Discord thread already exists");
            }
            Err(ApiError::Channel(error)) => return Err(error),
            Err(error) => return Err(error.into_channel("start a thread for the answer")),
        }
        self.threads.exists(topic);
        let mut places = lock(&self.threads.places);
        if places.len() >= MAX_PLACES {
            places.clear();
        }
        let parent = chat.chat_id.clone();
        places.insert(topic.clone(), Place::Thread { parent });
        Ok(topic.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_names_are_bounded() {
        let threads = Threads::default();
        for idx in 0..(MAX_PENDING + 10) {
            threads.name_later(&idx.to_string(), &format!("question {idx}"));
        }
        assert_eq!(threads.take_name("0"), None, "the oldest were forgotten");
        assert_eq!(
            threads.take_name(&(MAX_PENDING + 9).to_string()).as_deref(),
            Some("question 521")
        );
    }
}
