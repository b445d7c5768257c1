//! The schedule entries: one synthetic journal entry per fired slot of a schedule created in a
//! chat, `schedule:{fire key}` in that chat, and one per notice about a schedule,
//! `schedule:{key}:notice`. No platform sends such ids (Telegram's are numbers, Slack's
//! timestamps, Discord's snowflakes, Feishu's `om_…`), and the journal takes an id once, so a
//! slot is journalled, run and answered once across re-hands, daemons and restarts; the chat's
//! worker answers it in order with the chat's other messages, as the schedule's owner (their
//! platform account, `Target::Chat::sender_id`). The id alone proves nothing: the turn runs a
//! fire only while the store holds it claimed for this chat (`turn::schedule`).

use antler_channel::{ChatKey, InboundMessage};
use chrono::{DateTime, Utc};

use crate::channels::mapping::parse_chat_key;
use crate::scheduler::{Fire, Schedule, SchedulerError, Target};

const PREFIX: &str = "schedule:";
const NOTICE_SUFFIX: &str = ":notice";

/// What a schedule entry asks of its chat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ScheduleEntry {
    /// Run the slot whose fire key this is and answer here.
    Fire(String),
    /// Post the entry's text (a slot skipped for budget, a pause); the key starts with the
    /// schedule's id.
    Notice(String),
}

/// The schedule entry a journalled message is, by its id; `None` for every other message.
pub(crate) fn schedule_entry_of(message: &InboundMessage) -> Option<ScheduleEntry> {
    if message.click.is_some() || !message.files.is_empty() {
        return None;
    }
    let rest = message.platform_message_id.strip_prefix(PREFIX)?;
    if rest.is_empty() {
        return None;
    }
    Some(match rest.strip_suffix(NOTICE_SUFFIX) {
        Some(key) => ScheduleEntry::Notice(key.to_string()),
        None => ScheduleEntry::Fire(rest.to_string()),
    })
}

/// `{schedule id}@{slot, RFC 3339}` (`Fire::key`) back into its parts.
pub(crate) fn parse_fire_key(fire_key: &str) -> Option<(&str, DateTime<Utc>)> {
    let (id, slot) = fire_key.split_once('@')?;
    let slot = DateTime::parse_from_rfc3339(slot).ok()?.with_timezone(&Utc);
    (!id.is_empty()).then_some((id, slot))
}

/// The schedule a notice key is about: the key starts with its id (see [`notice_entry`]).
pub(crate) fn notice_schedule_id(notice_key: &str) -> &str {
    notice_key.split(['@', ':']).next().unwrap_or(notice_key)
}

/// The entry that runs `fire` in its schedule's chat; `None` for a schedule without a chat.
pub(crate) fn fire_entry(
    schedule: &Schedule,
    fire: &Fire,
) -> Result<Option<(ChatKey, InboundMessage)>, SchedulerError> {
    let id = format!("{PREFIX}{}", fire.key());
    entry(schedule, id, schedule.prompt.clone())
}

/// The entry that posts `text` in `schedule`'s chat, once per `key` (prefixed with the
/// schedule's id unless it starts with it, so the turn can find the schedule).
pub(crate) fn notice_entry(
    schedule: &Schedule,
    key: &str,
    text: &str,
) -> Result<Option<(ChatKey, InboundMessage)>, SchedulerError> {
    let key = if notice_schedule_id(key) == schedule.id {
        key.to_string()
    } else {
        format!("{}:{key}", schedule.id)
    };
    let id = format!("{PREFIX}{key}{NOTICE_SUFFIX}");
    entry(schedule, id, text.to_string())
}

fn entry(
    schedule: &Schedule,
    platform_message_id: String,
    text: String,
) -> Result<Option<(ChatKey, InboundMessage)>, SchedulerError> {
    let Target::Chat {
        chat_key,
        sender_id,
        sender_name,
        shared,
    } = &schedule.target
    else {
        return Ok(None);
    };
    let key = parse_chat_key(chat_key).ok_or_else(|| {
        SchedulerError::Invalid(format!(
            "schedule {} names a chat that is not one ({chat_key}); remove it and create it again in its chat",
            schedule.id
        ))
    })?;
    let message = InboundMessage {
        channel: key.channel.clone(),
        workspace_id: None,
        chat_id: key.chat_id.clone(),
        topic_id: key.topic_id.clone(),
        user_id: sender_id.clone(),
        display_name: sender_name.clone(),
        platform_message_id,
        text,
        files: Vec::new(),
        is_direct: !shared,
        // Addressed to the bot: the owner asked for it when they created the schedule.
        mentions_bot: true,
        reply_to: None,
        thread_reply: false,
        is_bot: false,
        bot_id: None,
        context: Vec::new(),
        click: None,
    };
    Ok(Some((key, message)))
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::scheduler::{CatchUp, Deliver, FireKind, FireStatus, ScheduleStatus, When};

    fn schedule(target: Target) -> Schedule {
        let now = Utc.with_ymd_and_hms(2026, 12, 5, 21, 0, 0).unwrap();
        Schedule {
            id: "0a1b2c3d".into(),
            owner: "telegram-42".into(),
            name: "Weekly report".into(),
            prompt: "Remind me to send the report".into(),
            when: When::Cron("0 9 * * MON".into()),
            timezone: "Europe/Berlin".into(),
            catch_up: CatchUp::Latest,
            deliver: Deliver::Here,
            target,
            thread_id: "t1".into(),
            thread_owner: "telegram-42".into(),
            agent_name: None,
            agent_owner: None,
            model_name: None,
            status: ScheduleStatus::Active,
            next_fire: None,
            consecutive_failures: 0,
            last: None,
            missed: 0,
            created_at: now,
            updated_at: now,
        }
    }

    fn fire() -> Fire {
        let slot = Utc.with_ymd_and_hms(2026, 12, 7, 8, 0, 0).unwrap();
        Fire {
            schedule_id: "0a1b2c3d".into(),
            slot,
            kind: FireKind::Due,
            status: FireStatus::Claimed,
            thread_id: "t1".into(),
            thread_owner: "telegram-42".into(),
            claimed_at: slot,
            claimed_by: "a".into(),
            outcome: None,
            detail: None,
            finished_at: None,
        }
    }

    fn in_chat(shared: bool) -> Target {
        Target::Chat {
            chat_key: "telegram:-100:m7".into(),
            sender_id: "42".into(),
            sender_name: Some("Ann".into()),
            shared,
        }
    }

    #[test]
    fn a_fire_entry_reads_back_as_its_fire() {
        let (key, message) = fire_entry(&schedule(in_chat(true)), &fire())
            .unwrap()
            .unwrap();
        assert_eq!(key, ChatKey::new("telegram", "-100", Some("m7".into())));
        assert_eq!(
            message.platform_message_id,
            "schedule:0a1b2c3d@2026-12-07T08:00:00.000Z"
        );
        assert_eq!(
            (message.user_id.as_str(), message.display_name.as_deref()),
            ("42", Some("Ann"))
        );
        assert!(!message.is_direct && message.mentions_bot);
        assert_eq!(message.text, "Remind me to send the report");
        let Some(ScheduleEntry::Fire(fire_key)) = schedule_entry_of(&message) else {
            panic!("not a fire entry");
        };
        assert_eq!(fire_key, fire().key());
        assert_eq!(parse_fire_key(&fire_key), Some(("0a1b2c3d", fire().slot)));
        let (_, direct) = fire_entry(&schedule(in_chat(false)), &fire())
            .unwrap()
            .unwrap();
        assert!(direct.is_direct);
    }

    #[test]
    fn a_notice_entry_names_its_schedule() {
        let schedule = schedule(in_chat(false));
        for (key, id) in [
            (fire().key(), format!("schedule:{}:notice", fire().key())),
            (
                "paused-3".to_string(),
                "schedule:0a1b2c3d:paused-3:notice".into(),
            ),
        ] {
            let (_, message) = notice_entry(&schedule, &key, "Paused.").unwrap().unwrap();
            assert_eq!(message.platform_message_id, id);
            assert_eq!(message.text, "Paused.");
            let Some(ScheduleEntry::Notice(notice_key)) = schedule_entry_of(&message) else {
                panic!("not a notice entry");
            };
            assert_eq!(notice_schedule_id(&notice_key), "0a1b2c3d");
        }
    }

    #[test]
    fn only_schedule_ids_are_schedule_entries() {
        let (_, mut message) = fire_entry(&schedule(in_chat(false)), &fire())
            .unwrap()
            .unwrap();
        for id in ["4382001", "schedule:", "approval:k3", "om_schedule:x"] {
            message.platform_message_id = id.into();
            assert_eq!(schedule_entry_of(&message), None, "{id}");
        }
        assert_eq!(parse_fire_key("0a1b2c3d"), None);
        assert_eq!(parse_fire_key("@2026-12-07T08:00:00.000Z"), None);
        assert_eq!(parse_fire_key("0a1b2c3d@monday"), None);
        assert!(
            fire_entry(&schedule(Target::Thread), &fire())
                .unwrap()
                .is_none(),
            "a schedule without a chat has no entry"
        );
    }
}
