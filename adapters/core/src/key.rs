//! `ChatKey`: which conversation a platform message belongs to.

use std::fmt;

use serde::{Deserialize, Serialize};

/// `channel:chat_id[:topic_id]`; one key maps to one Antler thread.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChatKey {
    pub channel: String,
    pub chat_id: String,
    /// A forum topic, Slack thread or Discord thread; `None` for one thread per chat.
    pub topic_id: Option<String>,
}

impl ChatKey {
    pub fn new(
        channel: impl Into<String>,
        chat_id: impl Into<String>,
        topic_id: Option<String>,
    ) -> Self {
        Self {
            channel: channel.into(),
            chat_id: chat_id.into(),
            topic_id,
        }
    }
}

impl fmt::Display for ChatKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.topic_id {
            Some(topic) => write!(f, "{}:{}:{}", self.channel, self.chat_id, topic),
            None => write!(f, "{}:{}", self.channel, self.chat_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_includes_topic_only_when_present() {
        assert_eq!(
            ChatKey::new("telegram", "42", None).to_string(),
            "telegram:42"
        );
        assert_eq!(
            ChatKey::new("slack", "C1", Some("1700.1".into())).to_string(),
            "slack:C1:1700.1"
        );
    }
}
