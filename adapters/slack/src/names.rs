//! Who a Slack user is called: events carry only a user id, so `users.info` (scope
//! `users:read`) is asked once per person and the answer kept for an hour.
//!
//! The name is the one Slack shows in conversations: the profile's display name, else the real
//! name, else the handle. A person who was looked up recently is not asked again, so a busy
//! thread costs one call per participant and hour (`users.info` is Tier 4, ~100 a minute).

use antler_channel::{ChannelError, UserNames};
use async_trait::async_trait;
use slack_morphism::SlackUserId;
use slack_morphism::prelude::{SlackApiUsersInfoRequest, SlackUser};

use crate::SlackChannel;

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
        if let Some(known) = self.names.get(user_id, now()) {
            return Ok(known);
        }
        let request = SlackApiUsersInfoRequest::new(SlackUserId::new(user_id.to_string()));
        let session = self.api.bot();
        let answer = self
            .api
            .call("users.info", session.users_info(&request))
            .await?;
        let name = shown_name(&answer.user);
        self.names.put(user_id, name.clone(), now());
        Ok(name)
    }
}

/// The cache's clock: tokio's, so tests run on paused time.
fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
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
}
