//! The harness's [`ChatSchedule`] hook: a fired slot of a schedule created in a chat, and a
//! notice about one, are journalled as the daemon's own entries in that chat
//! (`channels::schedule_entry`) and handed to the chat's worker, whose turn answers them
//! (`turn::schedule`).

use std::sync::{Arc, Weak};

use crate::channels::journal::{Journal, JournalState};
use crate::channels::manager::{ChannelManager, ManagerInner};
use crate::channels::schedule_entry::{fire_entry, notice_entry};
use crate::scheduler::{ChatSchedule, Fire, FireOutcome, FireStatus, Schedule, SchedulerError};

/// Runs fired slots in their chats: the harness's [`ChatSchedule`], set when the channels start
/// (`Channels::start`). Holds the manager weakly (the manager holds the harness).
pub(crate) struct ChatScheduleHook {
    inner: Weak<ManagerInner>,
}

impl ChatScheduleHook {
    pub(crate) fn new(manager: &ChannelManager) -> Self {
        Self {
            inner: Arc::downgrade(manager.inner()),
        }
    }
}

impl ChatSchedule for ChatScheduleHook {
    fn fire(&self, schedule: &Schedule, fire: &Fire) -> Result<(), SchedulerError> {
        let Some((key, message)) = fire_entry(schedule, fire)? else {
            return Err(SchedulerError::Invalid(format!(
                "schedule {} has no chat to run in",
                schedule.id
            )));
        };
        // The channel layer stopped (the daemon is stopping): the fire stays claimed and the
        // next start hands it over again.
        let Some(inner) = self.inner.upgrade() else {
            return Ok(());
        };
        // A chat whose channel is gone or turned off would hold the slot until the permit's
        // patience runs out: it fails now, with the reason, and the next slot tries again.
        let config = inner.deps.config.current();
        match config.channels.section(&key.channel) {
            Some(section) if section.enabled() => {}
            Some(_) => {
                return Err(SchedulerError::Invalid(format!(
                    "channel {channel} is turned off (`channels.{channel}.enabled`)",
                    channel = key.channel
                )));
            }
            None => {
                return Err(SchedulerError::Invalid(format!(
                    "no channel {} is configured for this schedule's chat",
                    key.channel
                )));
            }
        }
        let journal_key = Journal::key_of(&message);
        if inner.queue_entry(&key, message)? {
            return Ok(());
        }
        // Handed over again (a restart finishing its claimed fires, another daemon): the
        // entry's turn answers it or did. One whose entry was answered while the fire stayed
        // claimed would wait forever: end it with the reason.
        let answered = inner
            .deps
            .journal
            .get(&journal_key)?
            .is_some_and(|entry| entry.state == JournalState::Done);
        let store = inner.deps.harness.scheduler().store();
        let claimed = store
            .fire(&fire.schedule_id, fire.slot)?
            .is_some_and(|stored| stored.status == FireStatus::Claimed);
        if answered && claimed {
            tracing::warn!(fire = %fire.key(), chat = %key, "A scheduled slot's chat entry was answered but the slot was never finished; recording it as failed");
            inner.deps.harness.finish_fire(
                fire,
                FireOutcome::Failed,
                Some("its chat entry was answered without a result".into()),
            );
        }
        Ok(())
    }

    fn notice(&self, schedule: &Schedule, key: &str, text: &str) -> Result<(), SchedulerError> {
        let Some((chat, message)) = notice_entry(schedule, key, text)? else {
            return Err(SchedulerError::Invalid(format!(
                "schedule {} has no chat to post in",
                schedule.id
            )));
        };
        let Some(inner) = self.inner.upgrade() else {
            return Ok(());
        };
        inner.queue_entry(&chat, message)?;
        Ok(())
    }
}
