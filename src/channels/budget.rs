//! One outbound rate budget per bot and per chat, shared by edits, typing and final messages.
//!
//! Every request draws from its chat's bucket and the bot's global bucket. Streaming edits and
//! typing only *try* (under pressure they are skipped and the next edit carries the latest
//! text); final messages wait for a token. A 429 `retry_after` pauses the chat (or the whole
//! bot) and nothing is sent to it inside the window, not even a final message.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use antler_channel::BudgetLimits;
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio::time::Instant;

pub struct RateBudget {
    global: DefaultDirectRateLimiter,
    direct: DefaultKeyedRateLimiter<String>,
    group: DefaultKeyedRateLimiter<String>,
    paused: Mutex<HashMap<String, Instant>>,
}

const GLOBAL: &str = "";

impl RateBudget {
    pub fn new(limits: BudgetLimits) -> Self {
        let nz = |n: u32| NonZeroU32::new(n.max(1)).unwrap_or(NonZeroU32::MIN);
        let burst = nz(limits.burst);
        Self {
            global: RateLimiter::direct(
                Quota::per_second(nz(limits.global_per_second))
                    .allow_burst(nz(limits.global_per_second)),
            ),
            direct: RateLimiter::keyed(
                Quota::per_minute(nz(limits.direct_per_minute)).allow_burst(burst),
            ),
            group: RateLimiter::keyed(
                Quota::per_minute(nz(limits.group_per_minute)).allow_burst(burst),
            ),
            paused: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token if one is free right now (edits, typing).
    pub fn try_acquire(&self, chat_id: &str, is_group: bool) -> bool {
        if self.paused_for(chat_id).is_some() {
            return false;
        }
        let chat = if is_group { &self.group } else { &self.direct };
        chat.check_key(&chat_id.to_string()).is_ok() && self.global.check().is_ok()
    }

    /// Waits for the pause window to end and a token to be free (final messages).
    pub async fn acquire(&self, chat_id: &str, is_group: bool) {
        while let Some(wait) = self.paused_for(chat_id) {
            tokio::time::sleep(wait).await;
        }
        let chat = if is_group { &self.group } else { &self.direct };
        chat.until_key_ready(&chat_id.to_string()).await;
        self.global.until_ready().await;
    }

    /// Honours a platform's `retry_after` for one chat (`None` = the whole bot).
    pub fn pause(&self, chat_id: Option<&str>, retry_after: Duration) {
        let until = Instant::now() + retry_after;
        let mut paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        let slot = paused
            .entry(chat_id.unwrap_or(GLOBAL).to_string())
            .or_insert(until);
        if *slot < until {
            *slot = until;
        }
    }

    /// How long the chat (or the bot) must still stay silent.
    pub fn paused_for(&self, chat_id: &str) -> Option<Duration> {
        let now = Instant::now();
        let mut paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        paused.retain(|_, until| *until > now);
        [chat_id, GLOBAL]
            .iter()
            .filter_map(|key| paused.get(*key))
            .max()
            .map(|until| *until - now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn edits_are_refused_under_pressure_and_during_a_pause() {
        let budget = RateBudget::new(BudgetLimits {
            global_per_second: 100,
            direct_per_minute: 60,
            group_per_minute: 20,
            burst: 2,
        });
        assert!(budget.try_acquire("1", false));
        assert!(budget.try_acquire("1", false));
        assert!(!budget.try_acquire("1", false), "burst exhausted");
        assert!(
            budget.try_acquire("2", false),
            "other chats are not affected"
        );
        budget.pause(Some("3"), Duration::from_millis(300));
        assert!(!budget.try_acquire("3", false));
        assert!(budget.paused_for("3").is_some());
        let started = Instant::now();
        budget.acquire("3", false).await;
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "final waited for the window"
        );
        budget.pause(None, Duration::from_millis(50));
        assert!(
            budget.paused_for("4").is_some(),
            "a global pause covers every chat"
        );
    }
}
