//! Who may talk to a channel, where, and which Antler user a platform user becomes.

use antler_channel::InboundMessage;
use sha2::{Digest, Sha256};

use crate::config::GroupPolicy;

/// Per-channel access rules. Ids are the platform's, as strings.
#[derive(Clone, Debug, Default)]
pub struct AccessPolicy {
    /// Empty = every user (in private chats and allowlisted groups).
    pub allowed_users: Vec<String>,
    /// Group chats the bot answers in; a group not listed is denied.
    pub allowed_chats: Vec<String>,
    pub admins: Vec<String>,
    pub group_policy: GroupPolicy,
}

/// What to do with an inbound message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// The sender or chat is not allowed; nothing is answered.
    Deny(&'static str),
    /// A group message that is not for the bot (no mention, no reply to it).
    NotAddressed,
}

impl AccessPolicy {
    pub fn check(&self, message: &InboundMessage) -> Verdict {
        let admin = self.is_admin(&message.user_id);
        let user_allowed =
            admin || self.allowed_users.is_empty() || self.allowed_users.contains(&message.user_id);
        if message.is_direct {
            return if user_allowed {
                Verdict::Allow
            } else {
                Verdict::Deny("user not in allowed_users")
            };
        }
        if !self.allowed_chats.contains(&message.chat_id) {
            return Verdict::Deny("group not in allowed_chats");
        }
        if !user_allowed {
            return Verdict::Deny("user not in allowed_users");
        }
        if self.group_policy == GroupPolicy::Mention && !message.mentions_bot {
            return Verdict::NotAddressed;
        }
        Verdict::Allow
    }

    pub fn is_admin(&self, platform_user_id: &str) -> bool {
        self.admins.iter().any(|admin| admin == platform_user_id)
    }
}

/// `{channel}-{platform_user_id}` reduced to `^[A-Za-z0-9_-]{1,64}$`. A lossy reduction gets a
/// hash suffix so two different platform ids never share one Antler user.
pub fn antler_user_id(channel: &str, platform_user_id: &str) -> String {
    const MAX: usize = 64;
    let raw = format!("{channel}-{platform_user_id}");
    let cleaned: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if cleaned == raw && raw.len() <= MAX {
        return raw;
    }
    let digest = hex::encode(Sha256::digest(raw.as_bytes()));
    let suffix = &digest[..16];
    let keep = MAX - suffix.len() - 1;
    let prefix: String = cleaned.chars().take(keep).collect();
    format!("{prefix}-{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(chat: &str, user: &str, direct: bool, mentioned: bool) -> InboundMessage {
        InboundMessage {
            channel: "telegram".into(),
            workspace_id: Some(chat.into()),
            chat_id: chat.into(),
            topic_id: None,
            user_id: user.into(),
            display_name: None,
            platform_message_id: "1".into(),
            text: "hi".into(),
            files: Vec::new(),
            is_direct: direct,
            mentions_bot: mentioned,
            reply_to: None,
            raw: serde_json::Value::Null,
        }
    }

    #[test]
    fn verdicts() {
        let open = AccessPolicy::default();
        let strict = AccessPolicy {
            allowed_users: vec!["1".into()],
            allowed_chats: vec!["-5".into()],
            admins: vec!["9".into()],
            group_policy: GroupPolicy::Mention,
        };
        let all = AccessPolicy {
            group_policy: GroupPolicy::All,
            ..strict.clone()
        };
        let cases = [
            (&open, message("1", "1", true, false), Verdict::Allow),
            (
                &open,
                message("-5", "1", false, true),
                Verdict::Deny("group not in allowed_chats"),
            ),
            (
                &strict,
                message("2", "2", true, false),
                Verdict::Deny("user not in allowed_users"),
            ),
            (&strict, message("9", "9", true, false), Verdict::Allow),
            (
                &strict,
                message("-5", "1", false, false),
                Verdict::NotAddressed,
            ),
            (&strict, message("-5", "1", false, true), Verdict::Allow),
            (
                &strict,
                message("-5", "2", false, true),
                Verdict::Deny("user not in allowed_users"),
            ),
            (
                &strict,
                message("-6", "9", false, true),
                Verdict::Deny("group not in allowed_chats"),
            ),
            (&all, message("-5", "1", false, false), Verdict::Allow),
        ];
        for (idx, (policy, message, expected)) in cases.into_iter().enumerate() {
            assert_eq!(policy.check(&message), expected, "case {idx}");
        }
    }

    #[test]
    fn user_ids_are_sanitised_without_collisions() {
        assert_eq!(antler_user_id("telegram", "42"), "telegram-42");
        let odd = antler_user_id("slack", "U1.x");
        assert!(odd.starts_with("slack-U1-x-"), "{odd}");
        assert_ne!(odd, antler_user_id("slack", "U1/x"));
        let long = antler_user_id("telegram", &"9".repeat(100));
        assert_eq!(long.len(), 64);
        let valid = |id: &str| {
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        assert!(valid(&odd) && valid(&long));
    }
}
