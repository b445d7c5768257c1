//! Earlier messages of a conversation: `GET /open-apis/im/v1/messages` on the chat, newest
//! first (`sort_type=ByCreateTimeDesc`), one page per mention. Inside a reply chain only the
//! chain's messages count; for a top-level mention, the chat's. The page is read down from the
//! mention to the newest message the conversation has seen.
//!
//! Needs the permission to read group messages (`im:message.group_msg`, or
//! `im:message:readonly`); without it Feishu answers 99991672 and the daemon answers without
//! the earlier messages.

use antler_channel::{ChannelError, FetchHistory, HistoryMessage, HistoryRequest};
use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Value, json};

use crate::FeishuChannel;
use crate::convert::parse_content;

/// Feishu's page size limit.
const MAX_PAGE: usize = 50;
/// Messages newer than the mention that may be on the page before it (people keep talking).
const SLACK_ABOVE: usize = 10;

#[async_trait]
impl FetchHistory for FeishuChannel {
    async fn history(
        &self,
        request: HistoryRequest<'_>,
    ) -> Result<Vec<HistoryMessage>, ChannelError> {
        let chat = &request.chat.chat_id;
        let page_size = (request.limit + 1 + SLACK_ABOVE).min(MAX_PAGE);
        let path = format!(
            "open-apis/im/v1/messages?container_id_type=chat&container_id={chat}\
             &sort_type=ByCreateTimeDesc&page_size={page_size}"
        );
        let answer = self
            .api
            .json("list messages", Method::GET, &path, None)
            .await?;
        let items = answer["data"]["items"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        let chain = request
            .chat
            .topic_id
            .as_deref()
            .filter(|root| *root != request.before);
        let mut kept = Vec::new();
        let mut below_the_mention = false;
        for item in items {
            let id = item["message_id"].as_str().unwrap_or_default();
            if id == request.before {
                below_the_mention = true;
                continue;
            }
            if Some(id) == request.after {
                break;
            }
            if !below_the_mention || item["deleted"] == json!(true) {
                continue;
            }
            let in_chain = |root: &str| id == root || item["root_id"].as_str() == Some(root);
            if chain.is_some_and(|root| !in_chain(root)) {
                continue;
            }
            if self.is_own(item) {
                continue;
            }
            if let Some(message) = self.converted(item) {
                kept.push(message);
            }
            if kept.len() == request.limit {
                break;
            }
        }
        kept.reverse();
        Ok(kept)
    }
}

impl FeishuChannel {
    fn is_own(&self, item: &Value) -> bool {
        let sender = &item["sender"];
        sender["sender_type"] == json!("app") && sender["id"].as_str() == Some(self.api.app_id())
    }

    /// A listed message as history: its text with mentions resolved (the list API names
    /// mentions by a plain id; the event's `{open_id}` form is made of it), files by name.
    fn converted(&self, item: &Value) -> Option<HistoryMessage> {
        let id = item["message_id"].as_str()?;
        let message_type = item["msg_type"].as_str().unwrap_or_default();
        let content: Value = serde_json::from_str(item["body"]["content"].as_str()?).ok()?;
        let mentions: Vec<Value> = item["mentions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| json!({"key": m["key"], "name": m["name"], "id": {"open_id": m["id"]}}))
            .collect();
        let parsed = parse_content(message_type, &content, id, &mentions, &self.identity).ok()?;
        let sender = &item["sender"];
        Some(HistoryMessage {
            platform_message_id: id.to_string(),
            sent_at: item["create_time"]
                .as_str()
                .and_then(|ms| ms.parse::<i64>().ok())
                .map(|ms| ms / 1000),
            user_id: sender["id"].as_str().unwrap_or_default().to_string(),
            display_name: None,
            is_bot: sender["sender_type"] == json!("app"),
            text: parsed.text,
            file_names: parsed
                .files
                .into_iter()
                .filter_map(|f| f.filename)
                .collect(),
        })
    }
}
