//! Two daemons' channel managers on one store (in-process, each with its own harness, cluster
//! name and model): every message answered exactly once whichever daemon receives it and
//! however often it is redelivered, and a chat left by a stopping daemon finished by the other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use antler_channel::{
    ChannelError, ChannelParts, ChatKey, InboundMessage, SendMessage, SentMessage,
};
use async_trait::async_trait;

use crate::channels::manager::{Accepted, ChannelManager};
use crate::channels::runtime::ChannelRuntime;
use crate::channels::stream::WORKING_TEXT;
use crate::config::{AppConfig, ConfigHandle, ModelConfig};
use crate::harness::Harness;
use crate::model::{ModelRegistry, ScriptedModel, ScriptedTurn};
use antler_store::{MemoryStore, StoreRef};

const WAIT: Duration = Duration::from_secs(60);

/// What the platform received: (chat, text, reply_to).
#[derive(Default)]
struct Platform {
    sent: Mutex<Vec<(String, String, Option<String>)>>,
}

#[async_trait]
impl SendMessage for Platform {
    async fn send_text(
        &self,
        chat: &ChatKey,
        text: &str,
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let mut sent = self.sent.lock().unwrap();
        sent.push((
            chat.chat_id.clone(),
            text.to_string(),
            reply_to.map(str::to_string),
        ));
        Ok(SentMessage {
            platform_message_id: format!("sent-{}", sent.len()),
        })
    }
}

impl Platform {
    /// How often each message (by id) got `text` in reply.
    fn replies(&self, text: &str) -> HashMap<String, usize> {
        let mut count = HashMap::new();
        for (_, sent, reply_to) in self.sent.lock().unwrap().iter() {
            if sent == text
                && let Some(reply_to) = reply_to
            {
                *count.entry(reply_to.clone()).or_default() += 1;
            }
        }
        count
    }
}

struct Daemon {
    harness: Arc<Harness>,
    manager: ChannelManager,
    _dir: tempfile::TempDir,
}

fn daemon(store: &StoreRef, id: &str, platform: &Arc<Platform>, turn: ScriptedTurn) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let mut config = AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    };
    config.cluster.instance_id = id.to_string();
    config.cluster.lease_seconds = 3;
    let profile = config
        .channels
        .section("telegram")
        .unwrap()
        .adapter()
        .profile();
    let models = ModelRegistry::new().with_model(
        "scripted",
        Arc::new(ScriptedModel::cycling("scripted", vec![turn])),
        ModelConfig::default(),
    );
    let config = ConfigHandle::fixed(config);
    let harness =
        Arc::new(Harness::with_parts(config.clone(), store.clone(), Some(models)).unwrap());
    let manager = ChannelManager::new(harness.clone(), config);
    let parts = ChannelParts::send_only(platform.clone());
    manager.register(ChannelRuntime::new("telegram", parts, profile, None));
    Daemon {
        harness,
        manager,
        _dir: dir,
    }
}

impl Daemon {
    async fn stop(&self) {
        self.manager.shutdown(Duration::from_secs(1)).await;
        self.harness.shutdown(Duration::ZERO).await.unwrap();
    }
}

fn message(chat: u32, id: u32) -> InboundMessage {
    InboundMessage {
        channel: "telegram".into(),
        workspace_id: None,
        chat_id: format!("c{chat}"),
        topic_id: None,
        user_id: format!("u{chat}"),
        display_name: None,
        platform_message_id: format!("m{id}"),
        text: format!("question {id}"),
        files: Vec::new(),
        is_direct: true,
        mentions_bot: false,
        reply_to: None,
        thread_reply: false,
        is_bot: false,
        bot_id: None,
        context: Vec::new(),
        click: None,
    }
}

/// Waits for `check` with a deadline (shared with the resume hook's tests).
pub(crate) async fn wait_until(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_is_answered_once_whichever_daemon_receives_it() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let platform = Arc::new(Platform::default());
    let answer = ScriptedTurn::Text(vec!["the answer".into()]);
    let a = daemon(&store, "a", &platform, answer.clone());
    let b = daemon(&store, "b", &platform, answer);
    let messages = 24;
    for id in 0..messages {
        let (first, second) = if id % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let delivered = first
            .manager
            .accept_batch("telegram", vec![message(id % 4, id)])
            .unwrap();
        assert_eq!(delivered, [Accepted::Queued]);
        // The platform delivers it again, to the other daemon.
        let again = second
            .manager
            .accept_batch("telegram", vec![message(id % 4, id)])
            .unwrap();
        assert_eq!(again, [Accepted::Duplicate]);
    }
    wait_until("every answer", || {
        platform.replies("the answer").len() == messages as usize
    })
    .await;
    // Every message got one status message and one answer, and nothing is left pending.
    wait_until("every message settled", || {
        a.manager.journal().pending_chats(None).unwrap().is_empty()
    })
    .await;
    let answers = platform.replies("the answer");
    let statuses = platform.replies(WORKING_TEXT);
    for id in 0..messages {
        let id = format!("m{id}");
        assert_eq!(answers.get(&id), Some(&1), "answers to {id}: {answers:?}");
        assert_eq!(statuses.get(&id), Some(&1), "status messages of {id}");
    }
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_left_mid_turn_by_a_stopping_daemon_is_finished_by_the_other() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let platform = Arc::new(Platform::default());
    // a's model never answers in time; b's does.
    let slow = ScriptedTurn::Slow {
        chunks: vec!["never".into()],
        delay: Duration::from_secs(600),
    };
    let a = daemon(&store, "a", &platform, slow);
    let b = daemon(
        &store,
        "b",
        &platform,
        ScriptedTurn::Text(vec!["from b".into()]),
    );
    a.manager
        .accept_batch("telegram", vec![message(1, 1)])
        .unwrap();
    wait_until("a's status message", || {
        !platform.replies(WORKING_TEXT).is_empty()
    })
    .await;
    // A message for the same chat reaching b waits for a's worker (a holds the chat).
    b.manager
        .accept_batch("telegram", vec![message(1, 2)])
        .unwrap();
    assert!(platform.replies("from b").is_empty());
    a.stop().await;
    wait_until("both answered by b", || {
        platform.replies("from b").len() == 2
    })
    .await;
    let answers = platform.replies("from b");
    assert_eq!(answers.get("m1"), Some(&1));
    assert_eq!(answers.get("m2"), Some(&1));
    assert!(platform.replies("never").is_empty());
    // b resumed a's plan: the status message a sent is not sent again.
    assert_eq!(platform.replies(WORKING_TEXT).get("m1"), Some(&1));
    b.stop().await;
}
