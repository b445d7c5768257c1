//! Whether the bot answers a message: the channel's allowlists, admins, group policy and
//! group rules (allowed workspaces, free chats), and which other bots it answers.

use antler_channel::{AccessSettings, GroupPolicy, GroupRules, InboundMessage};

/// What to do with an inbound message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// The sender or chat is not allowed; nothing is answered.
    Deny(&'static str),
    /// A group message that is not for the bot (no mention, no reply to it).
    NotAddressed,
    /// Another bot not in `allowed_bots`: ignored without a word, as bots always were.
    Bot,
}

/// Applies `settings` and `rules` (read from the live config) to `message`.
pub fn verdict(settings: &AccessSettings, rules: &GroupRules, message: &InboundMessage) -> Verdict {
    if message.is_bot && !bot_allowed(settings, message) {
        return Verdict::Bot;
    }
    let admin = !message.is_bot && settings.admins.contains(&message.user_id);
    // An allowed bot stands in `allowed_bots`, not in `allowed_users`.
    let user_allowed = message.is_bot
        || admin
        || settings.allowed_users.is_empty()
        || settings.allowed_users.contains(&message.user_id);
    if message.is_direct {
        return if user_allowed {
            Verdict::Allow
        } else {
            Verdict::Deny("user not in allowed_users")
        };
    }
    let workspace_allowed = message
        .workspace_id
        .as_ref()
        .is_some_and(|workspace| rules.allowed_workspaces.contains(workspace));
    if !settings.allowed_chats.contains(&message.chat_id) && !workspace_allowed {
        return Verdict::Deny("group not in allowed_chats");
    }
    if !user_allowed {
        return Verdict::Deny("user not in allowed_users");
    }
    // A click answers the bot's own message: addressed to it like a reply.
    if settings.group_policy == GroupPolicy::Mention
        && !message.mentions_bot
        && message.click.is_none()
        && !rules.free_chats.contains(&message.chat_id)
    {
        return Verdict::NotAddressed;
    }
    Verdict::Allow
}

/// Whether `message`, from a bot, comes from one of `allowed_bots`: by its user id, or by the
/// platform's separate bot id where it has one (Slack's `bot_id`).
fn bot_allowed(settings: &AccessSettings, message: &InboundMessage) -> bool {
    settings
        .allowed_bots
        .iter()
        .any(|allowed| *allowed == message.user_id || message.bot_id.as_ref() == Some(allowed))
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
            thread_reply: false,
            is_bot: false,
            bot_id: None,
            context: Vec::new(),
            click: None,
        }
    }

    #[test]
    fn verdicts() {
        let open = AccessSettings::default();
        let strict = AccessSettings {
            allowed_users: vec!["1".into()],
            allowed_chats: vec!["-5".into()],
            admins: vec!["9".into()],
            group_policy: GroupPolicy::Mention,
            ..AccessSettings::default()
        };
        let all = AccessSettings {
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
        for (idx, (settings, message, expected)) in cases.into_iter().enumerate() {
            let rules = GroupRules::default();
            assert_eq!(verdict(settings, &rules, &message), expected, "case {idx}");
        }
    }

    #[test]
    fn workspaces_allow_their_groups_and_free_chats_need_no_mention() {
        let settings = AccessSettings {
            allowed_chats: vec!["-5".into()],
            ..AccessSettings::default()
        };
        let rules = GroupRules {
            allowed_workspaces: vec!["G1".into()],
            free_chats: vec!["-7".into()],
        };
        let in_guild = |chat: &str, guild: &str, mentioned: bool| InboundMessage {
            workspace_id: Some(guild.into()),
            ..message(chat, "1", false, mentioned)
        };
        let cases = [
            (in_guild("-6", "G1", true), Verdict::Allow),
            (in_guild("-6", "G1", false), Verdict::NotAddressed),
            (
                in_guild("-6", "G2", true),
                Verdict::Deny("group not in allowed_chats"),
            ),
            (
                in_guild("-7", "G2", false),
                Verdict::Deny("group not in allowed_chats"),
            ),
            (in_guild("-7", "G1", false), Verdict::Allow),
            (in_guild("-5", "G2", true), Verdict::Allow),
        ];
        for (idx, (message, expected)) in cases.into_iter().enumerate() {
            assert_eq!(verdict(&settings, &rules, &message), expected, "case {idx}");
        }
    }

    #[test]
    fn bots_are_ignored_unless_allowed_by_user_or_bot_id() {
        let settings = AccessSettings {
            allowed_users: vec!["1".into()],
            allowed_chats: vec!["-5".into()],
            admins: vec!["B9".into()],
            allowed_bots: vec!["B7".into(), "U8".into()],
            ..AccessSettings::default()
        };
        let rules = GroupRules::default();
        let bot = |user: &str, bot_id: Option<&str>| InboundMessage {
            is_bot: true,
            bot_id: bot_id.map(String::from),
            ..message("-5", user, false, true)
        };
        let cases = [
            (bot("U2", None), Verdict::Bot),
            (bot("U2", Some("B2")), Verdict::Bot),
            (bot("B9", None), Verdict::Bot),
            (bot("U2", Some("B7")), Verdict::Allow),
            (bot("U8", Some("B3")), Verdict::Allow),
            (bot("B7", None), Verdict::Allow),
            (
                InboundMessage {
                    chat_id: "-6".into(),
                    ..bot("B7", None)
                },
                Verdict::Deny("group not in allowed_chats"),
            ),
            (
                InboundMessage {
                    mentions_bot: false,
                    ..bot("B7", None)
                },
                Verdict::NotAddressed,
            ),
        ];
        for (idx, (message, expected)) in cases.into_iter().enumerate() {
            assert_eq!(verdict(&settings, &rules, &message), expected, "case {idx}");
        }
    }
}
