//! A decision made away from the chat (the HTTP API, the timeout) is handed to the chat
//! layer's hook: the request is resumed in its chat once, however many daemons sharing the
//! store and however many calls hand it over. A channel without buttons gets the typed form.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use antler_channel::{
    ChannelError, ChannelParts, ChatKey, InboundMessage, SendMessage, SentMessage,
};
use async_trait::async_trait;
use serde_json::json;

use crate::agent_api::approval::ApprovalStatus;
use crate::approvals::{ApprovalFilter, Decider};
use crate::channels::cluster_tests::wait_until;
use crate::channels::manager::{Accepted, ChannelManager};
use crate::channels::resume_hook::ChatResumeHook;
use crate::channels::runtime::ChannelRuntime;
use crate::config::{AppConfig, ConfigHandle, ModelConfig};
use crate::harness::Harness;
use crate::model::{ModelRegistry, ScriptedModel, ScriptedTurn};
use antler_store::{MemoryStore, StoreRef};

/// What the platform received: (text, reply_to).
#[derive(Default)]
struct Platform {
    sent: Mutex<Vec<(String, Option<String>)>>,
}

#[async_trait]
impl SendMessage for Platform {
    async fn send_text(
        &self,
        _chat: &ChatKey,
        text: &str,
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let mut sent = self.sent.lock().unwrap();
        sent.push((text.to_string(), reply_to.map(str::to_string)));
        Ok(SentMessage {
            platform_message_id: format!("sent-{}", sent.len()),
        })
    }
}

impl Platform {
    fn count(&self, check: impl Fn(&str) -> bool) -> usize {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|(text, _)| check(text))
            .count()
    }
}

struct Daemon {
    harness: Arc<Harness>,
    manager: ChannelManager,
    _dir: tempfile::TempDir,
}

fn daemon(
    store: &StoreRef,
    id: &str,
    platform: &Arc<Platform>,
    model: &Arc<ScriptedModel>,
) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let mut config = AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    };
    config.cluster.instance_id = id.to_string();
    config.approvals.tools = vec!["ls".into()];
    let profile = config
        .channels
        .section("telegram")
        .unwrap()
        .adapter()
        .profile();
    let models = ModelRegistry::new().with_model("scripted", model.clone(), ModelConfig::default());
    let config = ConfigHandle::fixed(config);
    let harness =
        Arc::new(Harness::with_parts(config.clone(), store.clone(), Some(models)).unwrap());
    let manager = ChannelManager::new(harness.clone(), config);
    harness.set_chat_resume(Arc::new(ChatResumeHook::new(&manager)));
    let parts = ChannelParts::send_only(platform.clone());
    manager.register(ChannelRuntime::new("telegram", parts, profile, None));
    Daemon {
        harness,
        manager,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_made_elsewhere_resumes_in_the_chat_once() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let platform = Arc::new(Platform::default());
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            ScriptedTurn::ToolCalls {
                text: "Looking.".into(),
                calls: vec![("ls".into(), json!({"path": "/mnt/user-data"}))],
            },
            ScriptedTurn::Text(vec!["Listed it.".into()]),
        ],
    ));
    let a = daemon(&store, "a", &platform, &model);
    let b = daemon(&store, "b", &platform, &model);
    let question = InboundMessage {
        channel: "telegram".into(),
        workspace_id: None,
        chat_id: "c1".into(),
        topic_id: None,
        user_id: "u1".into(),
        display_name: Some("Ann".into()),
        platform_message_id: "m1".into(),
        text: "what is there?".into(),
        files: Vec::new(),
        is_direct: true,
        mentions_bot: false,
        reply_to: None,
        thread_reply: false,
        is_bot: false,
        bot_id: None,
        context: Vec::new(),
        click: None,
    };
    let accepted = a.manager.accept_batch("telegram", vec![question]).unwrap();
    assert_eq!(accepted, [Accepted::Queued]);
    wait_until("the typed request", || {
        platform.count(|text| text.contains("Reply /approve")) == 1
    })
    .await;
    let pending = ApprovalFilter {
        status: Some(ApprovalStatus::Pending),
        ..ApprovalFilter::default()
    };
    wait_until("the request's message recorded", || {
        a.harness
            .approvals()
            .list(&pending)
            .unwrap()
            .first()
            .is_some_and(|request| {
                request
                    .origin
                    .as_ref()
                    .is_some_and(|o| o.message_id.is_some())
            })
    })
    .await;
    let request = a.harness.approvals().list(&pending).unwrap().remove(0);
    let origin = request.origin.clone().unwrap();
    assert_eq!(origin.chat_key, "telegram:c1");

    // Decided as the HTTP API would, then handed over on both daemons, twice on one.
    let decider = Decider {
        user_id: request.requester.clone(),
        name: Some("Ann".into()),
        is_admin: false,
    };
    let decided = b
        .harness
        .decide_approval(
            &request.id,
            &decider,
            crate::agent_api::approval::Decision::Approve,
            None,
        )
        .unwrap();
    assert!(decided.fresh);
    for daemon in [&a, &b, &a] {
        daemon
            .harness
            .chat_resume()
            .expect("the chat layer's hook")
            .resume(decided.request.clone());
    }
    wait_until("the resumed answer", || {
        platform.count(|t| t == "Listed it.") == 1
    })
    .await;
    wait_until("nothing left pending", || {
        a.manager.journal().pending_chats(None).unwrap().is_empty()
    })
    .await;
    assert_eq!(platform.count(|t| t == "Listed it."), 1);
    // The parked turn and the resumed one: the model was asked twice, the second time with
    // the listing.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        format!("{:?}", requests[1]).contains("tool"),
        "the resumed run sent the call's result"
    );
    a.manager.shutdown(Duration::from_secs(1)).await;
    b.manager.shutdown(Duration::from_secs(1)).await;
    a.harness.shutdown(Duration::ZERO).await.unwrap();
    b.harness.shutdown(Duration::ZERO).await.unwrap();
}
