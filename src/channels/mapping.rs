//! Chat → thread mapping and per-chat settings, persisted in the store.
//!
//! Tree `channel_chats`: `ChatKey` string → [`ChatRecord`]. Tree `channel_aliases`:
//! `{channel}:{chat}:{message id}` → topic id, so a reply to one of the bot's messages in a group
//! continues that message's conversation. The first message of a key creates the thread under a
//! per-key lock: two concurrent first messages get one thread.
//!
//! A group conversation (`shared`) is owned by the chat, not by a person: its thread's owner is
//! [`chat_owner`], an id no person has, so the thread and its files are nobody's own (no
//! person's `GET /api/threads` lists it) and every turn runs as its sender. Records of the old
//! kind (owned by whoever spoke first) are moved over by `shared_chat`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use antler_channel::ChatKey;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::channels::records;
use crate::commands::BootstrapSession;
use crate::config::ChannelsConfig;
use antler_store::{Expect, StoreError, StoreRef};

const CHATS: &str = "channel_chats";
const ALIASES: &str = "channel_aliases";
use crate::paths::CHAT_OWNER_PREFIX;

/// The owner of a group conversation's threads: `chat-{channel}-{digest of the chat key}`,
/// valid under `paths::validate_id` whatever the platform's ids look like.
pub fn chat_owner(key: &ChatKey) -> String {
    let channel: String = key
        .channel
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(16)
        .collect();
    let digest = hex::encode(Sha256::digest(key.to_string().as_bytes()));
    format!("{CHAT_OWNER_PREFIX}{channel}-{}", &digest[..24])
}

/// `channel:chat[:topic]` (a `ChatKey`'s display form) back into the key.
pub(crate) fn parse_chat_key(text: &str) -> Option<ChatKey> {
    let mut parts = text.splitn(3, ':');
    let (channel, chat) = (parts.next()?, parts.next()?);
    if channel.is_empty() || chat.is_empty() {
        return None;
    }
    Some(ChatKey::new(channel, chat, parts.next().map(String::from)))
}

/// What a chat (or topic) is bound to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatRecord {
    pub thread_id: String,
    /// The Antler user who owns the thread: the person in a direct chat, [`chat_owner`] in a
    /// shared one (each turn there runs as its sender).
    pub user_id: String,
    /// A group conversation (set when its first message was not a direct one): the thread is
    /// the chat's. `false` on records of the old kind until they are migrated.
    #[serde(default)]
    pub shared: bool,
    /// Who started the conversation: in a group, besides admins, the one who may start it over
    /// (`/new`) and choose its agent until someone else chose one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_by: Option<String>,
    /// Who chose `agent` in a shared conversation (`/agent NAME`): its turns run that member's
    /// agent whoever speaks, and only they or an admin may change it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_set_by: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub plan_mode: bool,
    /// A bootstrap in progress: the chat's turns set this agent up until it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<BootstrapSession>,
    /// The workspace (Discord guild, Slack team) a group chat is in, as its last message
    /// said: a schedule's turn, which has no platform message of its own, is checked against
    /// the allowed workspaces with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// `/voice on|off` in this chat: its answers are also spoken, or never; `None`: the
    /// channel's `reply_with_voice` decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<bool>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ChatRecord {
    /// A record for a new conversation of `started_by` on `thread_id`.
    pub fn new(thread_id: String, new: &NewChat<'_>) -> Self {
        let now = Utc::now();
        Self {
            thread_id,
            user_id: new.owner.to_string(),
            shared: new.shared,
            started_by: Some(new.started_by.to_string()),
            agent_set_by: None,
            model: None,
            agent: None,
            plan_mode: false,
            bootstrap: None,
            workspace_id: None,
            voice: None,
            created_at: now,
            updated_at: now,
        }
    }

    /// Who started the conversation (records older than `started_by`: the thread's owner).
    pub fn starter(&self) -> &str {
        self.started_by.as_deref().unwrap_or(&self.user_id)
    }

    /// Whose custom agent the turns run (`RunOptions::agent_owner`): in a shared conversation,
    /// the agent a member chose is theirs whoever speaks, so every member may run it (choosing
    /// it there shares it with that conversation) while memory, usage and budget stay each
    /// speaker's. `None` (a direct chat, the channel's default agent): the speaker's own.
    pub fn agent_owner(&self) -> Option<String> {
        self.agent.as_ref().filter(|_| self.shared)?;
        self.agent_set_by.clone()
    }

    /// Who may change the agent of a shared conversation besides admins: whoever chose it, or
    /// while nobody did, whoever started the conversation.
    pub fn agent_chooser(&self) -> &str {
        self.agent_set_by
            .as_deref()
            .unwrap_or_else(|| self.starter())
    }
}

/// Who a chat's first message makes the owner of its thread.
#[derive(Clone, Copy, Debug)]
pub struct NewChat<'a> {
    /// The thread's owner: the sender in a direct chat, [`chat_owner`] in a group.
    pub owner: &'a str,
    pub shared: bool,
    /// The sender.
    pub started_by: &'a str,
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

    /// The record and its stored bytes (what [`ChatMap::replace_if`] compares against).
    pub fn get_raw(&self, key: &ChatKey) -> Result<Option<(Vec<u8>, ChatRecord)>, StoreError> {
        let name = key.to_string();
        let Some(bytes) = self.store.get(CHATS, name.as_bytes())? else {
            return Ok(None);
        };
        let record = serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
            key: format!("{CHATS}/{name}"),
            detail: e.to_string(),
        })?;
        Ok(Some((bytes, record)))
    }

    /// Writes `record` if the stored one is still `expected` (its bytes): `false` if another
    /// writer (another daemon on the store) changed it meanwhile.
    pub fn replace_if(
        &self,
        key: &ChatKey,
        expected: Vec<u8>,
        record: &ChatRecord,
    ) -> Result<bool, StoreError> {
        let name = key.to_string();
        let op = records::put_op(CHATS, &name, record)?;
        let expect = Expect {
            tree: CHATS,
            key: name.into_bytes(),
            value: Some(expected),
        };
        self.store.apply_batch_if(&expect, vec![op])
    }

    /// The chat's record, created with `create_thread(new.owner)` if the key is new.
    pub async fn get_or_create<F, E>(
        &self,
        key: &ChatKey,
        new: NewChat<'_>,
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
        let thread_id = create_thread(new.owner)?;
        let record = ChatRecord::new(thread_id, &new);
        self.put(key, &record)?;
        drop(_guard);
        self.release_lock(key, lock);
        Ok(record)
    }

    pub fn put(&self, key: &ChatKey, record: &ChatRecord) -> Result<(), StoreError> {
        records::write(&self.store, CHATS, &key.to_string(), record)
    }

    /// Changes the record of an existing chat; `Ok(None)` when the chat has none yet. A
    /// compare-and-set: a record another writer changed meanwhile (a group conversation moved
    /// to its chat by another daemon) is read again and `change` applied to that.
    pub fn update(
        &self,
        key: &ChatKey,
        mut change: impl FnMut(&mut ChatRecord),
    ) -> Result<Option<ChatRecord>, StoreError> {
        loop {
            let Some((bytes, mut record)) = self.get_raw(key)? else {
                return Ok(None);
            };
            change(&mut record);
            record.updated_at = Utc::now();
            if self.replace_if(key, bytes, &record)? {
                return Ok(Some(record));
            }
        }
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

    fn direct(user: &str) -> NewChat<'_> {
        NewChat {
            owner: user,
            shared: false,
            started_by: user,
        }
    }

    #[test]
    fn a_chat_owner_is_a_valid_id_of_its_own() {
        let topic = ChatKey::new("slack", "C0/../1", Some("1700000001.000100".into()));
        let owner = chat_owner(&topic);
        crate::paths::validate_id("user", &owner).expect("valid id");
        assert!(owner.starts_with("chat-slack-"), "{owner}");
        assert_eq!(owner, chat_owner(&topic.clone()), "stable");
        assert_ne!(owner, chat_owner(&ChatKey::new("slack", "C0/../1", None)));
    }

    #[test]
    fn a_stale_record_is_not_replaced() {
        let map = ChatMap::new(Arc::new(MemoryStore::default()));
        let key = ChatKey::new("telegram", "-7", None);
        let record = ChatRecord::new("t1".into(), &direct("u"));
        map.put(&key, &record).expect("put");
        let (bytes, _) = map.get_raw(&key).expect("get").expect("record");
        map.update(&key, |r| r.plan_mode = true).expect("update");
        assert!(!map.replace_if(&key, bytes, &record).expect("cas"));
        let (bytes, _) = map.get_raw(&key).expect("get").expect("record");
        assert!(map.replace_if(&key, bytes, &record).expect("cas"));
        assert!(!map.get(&key).expect("get").expect("record").plan_mode);
    }

    #[tokio::test]
    async fn concurrent_first_messages_create_one_thread() {
        let map = ChatMap::new(Arc::new(MemoryStore::default()));
        let created = Arc::new(AtomicUsize::new(0));
        let key = ChatKey::new("telegram", "42", None);
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (map, created, key) = (map.clone(), created.clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                map.get_or_create(&key, direct("telegram-42"), |_| {
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

    #[test]
    fn chat_keys_read_back_from_their_display_form() {
        for key in [
            ChatKey::new("telegram", "-100", Some("m31".into())),
            ChatKey::new("telegram", "42", None),
            ChatKey::new("slack", "C1", Some("1700000001.000100".into())),
        ] {
            assert_eq!(parse_chat_key(&key.to_string()), Some(key));
        }
        assert_eq!(parse_chat_key("telegram"), None);
        assert_eq!(parse_chat_key(":1"), None);
    }

    #[tokio::test]
    async fn settings_and_aliases_persist() {
        let store: StoreRef = Arc::new(MemoryStore::default());
        let map = ChatMap::new(store.clone());
        let key = ChatKey::new("telegram", "-5", Some("m10".into()));
        map.get_or_create(&key, direct("u"), |_| Ok::<_, StoreError>("t1".into()))
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
