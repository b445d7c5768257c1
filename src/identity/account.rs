//! An account: one way a person reaches Antler (a chat platform's user, or an API/web user),
//! written `{app}:{id}` (`slack:U1`, `telegram:42`, `api:alice`).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::identity::channel_user_id;

/// The app of accounts of the HTTP API and web chat: the user a token maps to, or `local`.
pub const API_APP: &str = "api";
/// The apps an account may belong to.
pub const APPS: &[&str] = &["telegram", "slack", "discord", "feishu", API_APP];

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Account {
    /// `telegram`, `slack`, `discord`, `feishu` or `api`.
    pub channel: String,
    /// The platform's user id, or the API user id.
    pub id: String,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    #[error(
        "`{0}` is not an account; write APP:ID with APP one of telegram, slack, discord, feishu \
         or api (e.g. slack:U0123ABCD, telegram:42, api:alice)"
    )]
    Malformed(String),
}

impl Account {
    pub fn chat(channel: &str, platform_id: &str) -> Self {
        Self {
            channel: channel.to_string(),
            id: platform_id.to_string(),
        }
    }

    pub fn api(user_id: &str) -> Self {
        Self::chat(API_APP, user_id)
    }

    /// Reads `APP:ID` as typed on the command line.
    pub fn parse(text: &str) -> Result<Self, AccountError> {
        let malformed = || AccountError::Malformed(text.to_string());
        let (app, id) = text.trim().split_once(':').ok_or_else(malformed)?;
        let app = app.to_ascii_lowercase();
        if !APPS.contains(&app.as_str()) || id.is_empty() || id.len() > 256 {
            return Err(malformed());
        }
        if app == API_APP && crate::paths::validate_id("user", id).is_err() {
            return Err(malformed());
        }
        Ok(Self::chat(&app, id))
    }

    /// The store key: `{app}:{id}`.
    pub fn key(&self) -> String {
        self.to_string()
    }

    /// The user this account is when nothing links it: `{channel}-{id}` for a chat platform
    /// (as before accounts could be linked), the user id itself for the API.
    pub fn default_user(&self) -> String {
        if self.channel == API_APP {
            self.id.clone()
        } else {
            channel_user_id(&self.channel, &self.id)
        }
    }
}

impl fmt::Display for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.channel, self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_parse_and_default_to_todays_users() {
        let slack = Account::parse("slack:U0123").unwrap();
        assert_eq!(slack, Account::chat("slack", "U0123"));
        assert_eq!(slack.default_user(), "slack-U0123");
        assert_eq!(slack.key(), "slack:U0123");
        assert_eq!(
            Account::parse("Telegram:42").unwrap().default_user(),
            "telegram-42"
        );
        assert_eq!(Account::parse("api:alice").unwrap().default_user(), "alice");
        for bad in ["slack", "mail:x@y", "slack:", "api:bad user", ":42"] {
            assert_eq!(
                Account::parse(bad),
                Err(AccountError::Malformed(bad.into())),
                "{bad}"
            );
        }
    }
}
