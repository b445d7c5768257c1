//! Who a Slack user is called: events carry only a user id, so `users.info` (scope
//! `users:read`) is asked once per person and the answer kept for an hour.
//!
//! The name is the one Slack shows in conversations: the profile's display name, else the real
//! name, else the handle. A person who was looked up recently is not asked again, so a busy
//! thread costs one call per participant and hour (`users.info` is Tier 4, ~100 a minute).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use antler_channel::{ChannelError, UserNames};
use async_trait::async_trait;
use slack_morphism::SlackUserId;
use slack_morphism::prelude::{SlackApiUsersInfoRequest, SlackUser};
use tokio::time::Instant;

use crate::SlackChannel;

/// How long a looked-up name is used before Slack is asked again (people rename themselves).
const KEEP_FOR: Duration = Duration::from_secs(60 * 60);
/// People whose names are kept; past that the oldest half is forgotten.
const MAX_KEPT: usize = 1024;

/// Names looked up recently, by user id.
#[derive(Default)]
pub(crate) struct NameCache {
    names: Mutex<HashMap<String, (Option<String>, Instant)>>,
}

impl NameCache {
    fn get(&self, user_id: &str) -> Option<Option<String>> {
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let (name, at) = names.get(user_id)?;
        (at.elapsed() < KEEP_FOR).then(|| name.clone())
    }

    fn put(&self, user_id: &str, name: Option<String>) {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if names.len() >= MAX_KEPT {
            let mut ages: Vec<Instant> = names.values().map(|(_, at)| *at).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            names.retain(|_, (_, at)| *at > cut);
        }
        names.insert(user_id.to_string(), (name, Instant::now()));
    }
}

/// The name Slack shows for `user`.
fn shown_name(user: &SlackUser) -> Option<String> {
    let profile = user.profile.as_ref();
    [
        profile.and_then(|p| p.display_name.clone()),
        profile.and_then(|p| p.real_name.clone()),
        user.real_name.clone(),
        user.name.clone(),
    ]
    .into_iter()
    .flatten()
    .map(|name| name.trim().to_string())
    .find(|name| !name.is_empty())
}

#[async_trait]
impl UserNames for SlackChannel {
    async fn display_name(&self, user_id: &str) -> Result<Option<String>, ChannelError> {
        if let Some(known) = self.names.get(user_id) {
            return Ok(known);
        }
        let request = SlackApiUsersInfoRequest::new(SlackUserId::new(user_id.to_string()));
        let session = self.api.bot();
        let answer = self
            .api
            .call("users.info", session.users_info(&request))
            .await?;
        let name = shown_name(&answer.user);
        self.names.put(user_id, name.clone());
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(json: serde_json::Value) -> SlackUser {
        serde_json::from_value(json).expect("a users.info user")
    }

    #[test]
    fn the_name_slack_shows_wins() {
        let cases = [
            (
                serde_json::json!({"id": "U1", "name": "ann.lee", "real_name": "Ann Lee",
                    "profile": {"display_name": "Ann", "real_name": "Ann Lee"}}),
                Some("Ann"),
            ),
            (
                serde_json::json!({"id": "U2", "name": "bob", "real_name": "Bob Stone",
                    "profile": {"display_name": "", "real_name": "Bob Stone"}}),
                Some("Bob Stone"),
            ),
            (
                serde_json::json!({"id": "U3", "name": "carol"}),
                Some("carol"),
            ),
            (serde_json::json!({"id": "U4"}), None),
        ];
        for (json, expected) in cases {
            assert_eq!(shown_name(&user(json)).as_deref(), expected);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn names_are_kept_for_an_hour_and_the_cache_stays_bounded() {
        let cache = NameCache::default();
        cache.put("U1", Some("Ann".into()));
        assert_eq!(cache.get("U1"), Some(Some("Ann".into())));
        tokio::time::advance(KEEP_FOR).await;
        assert_eq!(cache.get("U1"), None, "asked again after an hour");
        for n in 0..MAX_KEPT + 10 {
            cache.put(&format!("U{n}"), None);
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        let kept = cache.names.lock().unwrap().len();
        assert!(kept <= MAX_KEPT, "{kept}");
        assert_eq!(cache.get(&format!("U{}", MAX_KEPT + 9)), Some(None));
    }
}
