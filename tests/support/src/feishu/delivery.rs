//! People's messages and their delivery: each becomes a message in the fake and an
//! `im.message.receive_v1` push, posted in order to the daemon's webhook and posted again until
//! it answers 200 (Feishu retries a push it got no 200 for, with the same `event_id`).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::events::{FeishuEventSender, FeishuSigning, message_receive};
use super::{
    FAKE_FEISHU_APP_ID, FAKE_FEISHU_TENANT, FAKE_FEISHU_VERIFICATION_TOKEN, FakeFeishu,
    FeishuMessage, SharedFeishu, bot_mention,
};

/// How long a push is retried before the fake gives up on it.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// A person's message, as [`FakeFeishu::user_message`] takes it.
pub struct UserMessage<'a> {
    pub chat: &'a str,
    /// `p2p` or `group`.
    pub chat_type: &'a str,
    pub open_id: &'a str,
    pub msg_type: &'a str,
    /// The content object (sent as a JSON string).
    pub content: Value,
    /// `message.mentions`, e.g. `{"key": "@_user_1", "id": {"open_id": …}, "name": …}`.
    pub mentions: Vec<Value>,
    /// The message this one replies to.
    pub parent: Option<&'a str>,
}

pub(crate) struct Push {
    pub(crate) event_id: String,
    pub(crate) payload: Value,
}

/// Posts queued pushes one at a time, in order.
pub(crate) async fn run(shared: SharedFeishu, mut queue: mpsc::UnboundedReceiver<Push>) {
    while let Some(push) = queue.recv().await {
        let started = Instant::now();
        loop {
            let (url, key) = {
                let state = shared.lock();
                (state.webhook.clone(), state.encrypt_key.clone())
            };
            let Some(url) = url else {
                tokio::time::sleep(RETRY_EVERY).await;
                continue;
            };
            let sender = FeishuEventSender::new(url, key.as_deref());
            let body = sender.body(&push.payload, &push.event_id);
            let (status, _) = sender.post(&body, FeishuSigning::Valid).await;
            {
                let mut state = shared.lock();
                if status == 200 {
                    state
                        .delivered
                        .push((push.event_id.clone(), push.payload.clone()));
                    break;
                }
                state.refused.push((push.event_id.clone(), status));
            }
            if started.elapsed() > GIVE_UP_AFTER {
                break;
            }
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }
}

impl FakeFeishu {
    /// A person's text in their p2p chat with the bot; returns the message id.
    pub fn user_says_p2p(&self, open_id: &str, text: &str) -> String {
        let chat = super::p2p_chat(open_id);
        self.user_message(UserMessage {
            chat: &chat,
            chat_type: "p2p",
            open_id,
            msg_type: "text",
            content: json!({"text": text}),
            mentions: vec![],
            parent: None,
        })
    }

    /// A person's text in a group, mentioning the bot (`@_user_1 …`) or not, optionally
    /// replying to `parent`; returns the message id.
    pub fn user_says_in_group(
        &self,
        chat: &str,
        open_id: &str,
        text: &str,
        mention: bool,
        parent: Option<&str>,
    ) -> String {
        let (text, mentions) = if mention {
            (format!("@_user_1 {text}"), vec![bot_mention("@_user_1")])
        } else {
            (text.to_string(), vec![])
        };
        self.user_message(UserMessage {
            chat,
            chat_type: "group",
            open_id,
            msg_type: "text",
            content: json!({"text": text}),
            mentions,
            parent,
        })
    }

    /// A file from a person: a `file` message, or with a caption a `post` holding the caption
    /// and the file. Returns the message id.
    pub fn user_sends_file(
        &self,
        chat: &str,
        chat_type: &str,
        open_id: &str,
        name: &str,
        bytes: &[u8],
        caption: Option<&str>,
    ) -> String {
        let key = self.shared.lock().id("file_v3_");
        let (msg_type, content) = match caption {
            None => ("file", json!({"file_key": key, "file_name": name})),
            Some(caption) => (
                "post",
                json!({"title": "", "content": [
                    [{"tag": "text", "text": caption, "style": []}],
                    [{"tag": "file", "file_key": key, "file_name": name}]
                ]}),
            ),
        };
        let message = UserMessage {
            chat,
            chat_type,
            open_id,
            msg_type,
            content,
            mentions: vec![],
            parent: None,
        };
        self.push_message(message, vec![(key, bytes.to_vec())])
    }

    /// A person's `post` titled "Look": a mention of the bot (`@_user_1`), `text`, a mention
    /// of Bob, and an image. Returns the message id.
    pub fn user_posts_image(
        &self,
        chat: &str,
        chat_type: &str,
        open_id: &str,
        text: &str,
        png: &[u8],
    ) -> String {
        let key = self.shared.lock().id("img_v3_");
        let content = json!({"title": "Look", "content": [
            [{"tag": "at", "user_id": "@_user_1", "user_name": super::FAKE_FEISHU_BOT_NAME, "style": []},
             {"tag": "text", "text": format!(" {text} "), "style": ["bold"]},
             {"tag": "at", "user_id": "@_user_2", "user_name": "Bob", "style": []}],
            [{"tag": "img", "image_key": key, "width": 64, "height": 64}]
        ]});
        let bob = json!({"key": "@_user_2", "id": {"union_id": "on_bob", "user_id": "u_bob", "open_id": "ou_bob"},
            "name": "Bob", "tenant_key": FAKE_FEISHU_TENANT});
        let message = UserMessage {
            chat,
            chat_type,
            open_id,
            msg_type: "post",
            content,
            mentions: vec![bot_mention("@_user_1"), bob],
            parent: None,
        };
        self.push_message(message, vec![(key, png.to_vec())])
    }

    /// Any message from a person; returns the message id.
    pub fn user_message(&self, message: UserMessage<'_>) -> String {
        self.push_message(message, vec![])
    }

    /// Records the message (and the files it carries), and queues its push.
    fn push_message(&self, incoming: UserMessage<'_>, resources: Vec<(String, Vec<u8>)>) -> String {
        let parent = incoming.parent;
        let (message_id, event_id, root_id) = {
            let mut state = self.shared.lock();
            let message_id = state.id("om_");
            let event_id = state.id("");
            let root_id = parent.map(|parent| {
                state
                    .message(parent)
                    .and_then(|p| p.root_id.clone())
                    .unwrap_or_else(|| parent.to_string())
            });
            for (key, bytes) in resources {
                state.resources.insert((message_id.clone(), key), bytes);
            }
            state.messages.push(FeishuMessage {
                message_id: message_id.clone(),
                chat_id: incoming.chat.to_string(),
                root_id: root_id.clone(),
                parent_id: parent.map(str::to_string),
                msg_type: incoming.msg_type.to_string(),
                content: incoming.content.clone(),
                from_bot: false,
                updates: 0,
                sender: incoming.open_id.to_string(),
                mentions: incoming
                    .mentions
                    .iter()
                    .map(|m| {
                        json!({"key": m["key"], "id": m["id"]["open_id"],
                        "id_type": "open_id", "name": m["name"], "tenant_key": FAKE_FEISHU_TENANT})
                    })
                    .collect(),
                created_ms: super::now_ms(),
            });
            (message_id, event_id, root_id)
        };
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default()
            .to_string();
        let message = json!({"message_id": message_id, "root_id": root_id.unwrap_or_default(),
            "parent_id": parent.unwrap_or_default(), "create_time": now_ms, "update_time": now_ms,
            "chat_id": incoming.chat, "chat_type": incoming.chat_type,
            "message_type": incoming.msg_type, "content": incoming.content.to_string(),
            "mentions": incoming.mentions, "user_agent": "Mozilla/5.0 Lark/7.30.0"});
        let payload = message_receive(
            &event_id,
            FAKE_FEISHU_VERIFICATION_TOKEN,
            FAKE_FEISHU_APP_ID,
            FAKE_FEISHU_TENANT,
            incoming.open_id,
            message,
        );
        self.queue(event_id, payload);
        message_id
    }

    /// The newest push again, under its `event_id` (Feishu's retry).
    pub fn redeliver_last(&self) {
        let last = self.shared.lock().delivered.last().cloned();
        if let Some((event_id, payload)) = last {
            self.queue(event_id, payload);
        }
    }

    /// The push of `message_id` (to post it by hand), if it was made.
    pub fn push_of(&self, message_id: &str) -> Option<(String, Value)> {
        let state = self.shared.lock();
        state
            .delivered
            .iter()
            .find(|(_, payload)| payload["event"]["message"]["message_id"] == message_id)
            .cloned()
    }

    pub(crate) fn queue(&self, event_id: String, payload: Value) {
        self.shared.lock().event_ids.insert(event_id.clone());
        let _ = self
            .shared
            .pushes
            .send(super::delivery::Push { event_id, payload });
    }
}
