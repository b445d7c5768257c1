//! Who a Feishu user is called: events carry only an open_id, so the contact API
//! (`GET /open-apis/contact/v3/users/{open_id}`, permission "read user info" / contact scope)
//! is asked once per person and the answer kept for an hour (`antler_channel::NameCache`).
//!
//! Many apps lack that permission, and Feishu refuses with a permission code (99991672,
//! 41050, …): the person is then shown by their open_id, the refusal is cached like an
//! answer (no call per message) and logged once per connection with what to grant.

use std::sync::atomic::{AtomicBool, Ordering};

use antler_channel::{ChannelError, NameCache, UserNames};
use async_trait::async_trait;
use reqwest::Method;
use serde_json::Value;

use crate::FeishuChannel;

/// The display names one connection learnt, and whether it was told it may not ask.
#[derive(Default)]
pub(crate) struct FeishuNames {
    cache: NameCache,
    refusal_logged: AtomicBool,
}

/// The name Feishu shows: the user's name, else their English name, else their nickname.
fn shown_name(user: &Value) -> Option<String> {
    ["name", "en_name", "nickname"]
        .into_iter()
        .filter_map(|field| user[field].as_str())
        .map(|name| name.trim().to_string())
        .find(|name| !name.is_empty())
}

fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

#[async_trait]
impl UserNames for FeishuChannel {
    async fn display_name(&self, open_id: &str) -> Result<Option<String>, ChannelError> {
        let names = &self.names;
        if let Some(known) = names.cache.get(open_id, now()) {
            return Ok(known);
        }
        // open_ids are `ou_` followed by hex: anything else is not put into a URL.
        if !open_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Ok(None);
        }
        let path = format!("open-apis/contact/v3/users/{open_id}?user_id_type=open_id");
        let name = match self
            .api
            .json("contact.user.get", Method::GET, &path, None)
            .await
        {
            Ok(answer) => shown_name(&answer["data"]["user"]),
            // A refusal (no permission, a user outside the app's visibility): the open_id it
            // is, until the cache forgets it.
            Err(ChannelError::Platform(detail)) => {
                if !names.refusal_logged.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        detail,
                        "Feishu would not tell people's names; group members are shown by their open_id. Grant the app the contact permission \"Obtain user's basic information\" (contact:user.base:readonly) and publish a version"
                    );
                }
                None
            }
            Err(other) => return Err(other),
        };
        names.cache.put(open_id, name.clone(), now());
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_feishu_shows_wins() {
        let cases = [
            (
                serde_json::json!({"name": "张三", "en_name": "Zhang San"}),
                Some("张三"),
            ),
            (
                serde_json::json!({"name": " ", "en_name": "Zhang San"}),
                Some("Zhang San"),
            ),
            (serde_json::json!({"nickname": "zs"}), Some("zs")),
            (serde_json::json!({"open_id": "ou_1"}), None),
        ];
        for (user, expected) in cases {
            assert_eq!(shown_name(&user).as_deref(), expected, "{user}");
        }
    }
}
