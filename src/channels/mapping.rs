//! Chat → thread mapping and per-chat settings, persisted in the store.
//!
//! Tree `channel_chats`: `ChatKey` string → [`ChatRecord`]. Tree `channel_aliases`:
//! `{channel}:{chat}:{message id}` → topic id, so a reply to one of the bot's messages in a group
//! continues that message's conversation. The first message of a key creates the thread under a
//! per-key lock: two concurrent first messages get one thread.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use antler_channel::ChatKey;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::channels::records;
use crate::commands::BootstrapSession;
use crate::config::ChannelsConfig;
use antler_store::{StoreError, StoreRef};

const CHATS: &str = "channel_chats";
const ALIASES: &str = "channel_aliases";

/// What a chat (or topic) is bound to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatRecord {
    pub thread_id: String,
    /// The Antler user who owns the thread (in groups: whoever started the conversation; each
    /// turn there still runs as its sender).
    pub user_id: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub plan_mode: bool,
    /// A bootstrap in progress: the chat's turns set this agent up until it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<BootstrapSession>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The agent a chat's turns run: the chat's own choice (`/agent NAME`), then the channel's
/// session default, then the one for every channel; `None` is the default agent.
pub fn chosen_agent(
    record: Option<&ChatRecord>,
    channels: &ChannelsConfig,
    channel: &str,
) -> Option<String> {
    record
        .and_then(|r| r.agent.clone())
        .or_else(|| channels.default_agent(channel).map(str::to_string))
}

#[derive(Clone)]
pub struct ChatMap {
    store: StoreRef,
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl ChatMap {
    pub fn new(store: StoreRef) -> Self {
        Self {
            store,
            locks: Arc::default(),
        }
    }

    pub fn get(&self, key: &ChatKey) -> Result<Option<ChatRecord>, StoreError> {
        records::read(&self.store, CHATS, &key.to_string())
    }

    /// The chat's record, created with `create_thread(user_id)` if the key is new.
    pub async fn get_or_create<F, E>(
        &self,
        key: &ChatKey,
        user_id: &str,
        create_thread: F,
    ) -> Result<ChatRecord, E>
    where
        F: FnOnce(&str) -> Result<String, E>,
        E: From<StoreError>,
    {
        if let Some(record) = self.get(key)? {
            return Ok(record);
        }
        let lock = self.key_lock(key);
        let _guard = lock.lock().await;
        if let Some(record) = self.get(key)? {
            return Ok(record);
        }
        let thread_id = create_thread(user_id)?;
        let now = Utc::now();
        let record = ChatRecord {
            thread_id,
            user_id: user_id.to_string(),
            model: None,
            agent: None,
            plan_mode: false,
            bootstrap: None,
            created_at: now,
            updated_at: now,
        };
        self.put(key, &record)?;
        drop(_guard);
        self.release_lock(key, lock);
        Ok(record)
    }

    pub fn put(&self, key: &ChatKey, record: &ChatRecord) -> Result<(), StoreError> {
        records::write(&self.store, CHATS, &key.to_string(), record)
    }

    /// Changes the record of an existing chat; `Ok(None)` when the chat has none yet.
    pub fn update(
        &self,
        key: &ChatKey,
        change: impl FnOnce(&mut ChatRecord),
    ) -> Result<Option<ChatRecord>, StoreError> {
        let Some(mut record) = self.get(key)? else {
            return Ok(None);
        };
        change(&mut record);
        record.updated_at = Utc::now();
        self.put(key, &record)?;
        Ok(Some(record))
    }

    /// Remembers that `message_id` in `key`'s chat belongs to `key`'s topic.
    pub fn add_alias(&self, key: &ChatKey, message_id: &str) -> Result<(), StoreError> {
        let Some(topic) = &key.topic_id else {
            return Ok(());
        };
        records::write(&self.store, ALIASES, &alias_key(key, message_id), topic)
    }

    /// The topic a reply to `message_id` continues, if the bot knows that message.
    pub fn alias(&self, key: &ChatKey, message_id: &str) -> Result<Option<String>, StoreError> {
        records::read(&self.store, ALIASES, &alias_key(key, message_id))
    }

    fn key_lock(&self, key: &ChatKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(key.to_string()).or_default().clone()
    }

    fn release_lock(&self, key: &ChatKey, lock: Arc<tokio::sync::Mutex<()>>) {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        // Two references: the map's and ours. Nobody else waits, so the entry can go.
        if Arc::strong_count(&lock) == 2 {
            locks.remove(&key.to_string());
        }
    }
}

fn alias_key(key: &ChatKey, message_id: &str) -> String {
    format!("{}:{}:{message_id}", key.channel, key.chat_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use antler_store::MemoryStore;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn concurrent_first_messages_create_one_thread() {
        let map = ChatMap::new(Arc::new(MemoryStore::default()));
        let created = Arc::new(AtomicUsize::new(0));
        let key = ChatKey::new("telegram", "42", None);
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (map, created, key) = (map.clone(), created.clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                map.get_or_create(&key, "telegram-42", |_| {
                    let n = created.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, StoreError>(format!("thread-{n}"))
                })
                .await
                .expect("mapping")
                .thread_id
            }));
        }
        let mut ids = Vec::new();
        for task in tasks {
            ids.push(task.await.expect("join"));
        }
        assert_eq!(created.load(Ordering::SeqCst), 1);
        assert!(ids.iter().all(|id| id == "thread-0"));
    }

    #[tokio::test]
    async fn settings_and_aliases_persist() {
        let store: StoreRef = Arc::new(MemoryStore::default());
        let map = ChatMap::new(store.clone());
        let key = ChatKey::new("telegram", "-5", Some("m10".into()));
        map.get_or_create(&key, "u", |_| Ok::<_, StoreError>("t1".into()))
            .await
            .expect("create");
        map.update(&key, |r| r.model = Some("fast".into()))
            .expect("update");
        map.add_alias(&key, "11").expect("alias");
        let reopened = ChatMap::new(store);
        assert_eq!(
            reopened
                .get(&key)
                .expect("get")
                .expect("record")
                .model
                .as_deref(),
            Some("fast")
        );
        assert_eq!(
            reopened.alias(&key, "11").expect("alias").as_deref(),
            Some("m10")
        );
        assert_eq!(reopened.alias(&key, "12").expect("alias"), None);
    }
}
