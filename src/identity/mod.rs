//! Who a person is in Antler. An account (a chat platform's user, or an API/web user) is by
//! default its own user (`{channel}-{platform id}`, or the API user id); `identities:` in the
//! config and links made with `/link` or `antler users link` join accounts to one user.
//! [`Identities::user_of`] answers for every surface (channel turns, chat commands, the HTTP
//! API), so no code outside an adapter parses platform ids.
//!
//! The resolver reads through to the store at every message (one point read): a link made on
//! one daemon is seen by every daemon on the same store at its next message, with no cache to
//! go stale.

mod account;
mod admin;
mod codes;
mod error;
mod flow;
mod links;
mod report;

use std::collections::BTreeSet;

use antler_store::{StoreError, StoreRef};
use sha2::{Digest, Sha256};

use crate::config::AppConfig;

pub use account::{API_APP, APPS, Account, AccountError};
pub use admin::{LOCAL_OPERATOR, is_admin, is_channel_admin};
pub use codes::{CODE_TTL_MS, MAX_FAILED_ATTEMPTS};
pub use error::{IdentityError, Refusal};
pub use flow::{Issued, Joined, Unlinked};
pub use links::LinkRecord;
pub use report::{AccountView, UserSummary, default_account_of, rfc3339};

/// Where an account's user comes from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccountSource {
    /// The account the user is by default (`{channel}-{id}`, or the API user itself).
    Own,
    /// The `identities:` section of the config.
    Config,
    /// A link recorded in the store.
    Linked { linked_at_ms: u64, via: String },
}

/// One account of a user, and what made it theirs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserAccount {
    pub account: Account,
    pub source: AccountSource,
}

/// The resolver and the links, over the daemon's store.
#[derive(Clone)]
pub struct Identities {
    store: StoreRef,
}

impl Identities {
    pub fn new(store: StoreRef) -> Self {
        Self { store }
    }

    /// The Antler user `account` acts as: the config's `identities:` first, then a stored
    /// link, else the account's own user.
    pub fn user_of(&self, config: &AppConfig, account: &Account) -> Result<String, StoreError> {
        if let Some(user) = static_user(config, account) {
            return Ok(user.to_string());
        }
        Ok(match links::get(self.store.as_ref(), account)? {
            Some((_, record)) => record.user_id,
            None => account.default_user(),
        })
    }

    /// [`Self::user_of`] for the sender of a chat message.
    pub fn sender(
        &self,
        config: &AppConfig,
        channel: &str,
        platform_user_id: &str,
    ) -> Result<String, StoreError> {
        self.user_of(config, &Account::chat(channel, platform_user_id))
    }

    /// The accounts that act as `user_id` besides the user's own default ones: the config's,
    /// then the stored links.
    pub fn accounts_of(
        &self,
        config: &AppConfig,
        user_id: &str,
    ) -> Result<Vec<UserAccount>, StoreError> {
        let mut accounts: Vec<UserAccount> = config
            .identities
            .iter()
            .filter(|entry| entry.user == user_id)
            .flat_map(|entry| entry.accounts())
            .map(|(app, id)| UserAccount {
                account: Account::chat(app, id),
                source: AccountSource::Config,
            })
            .collect();
        for (account, record) in links::of_user(self.store.as_ref(), user_id)? {
            // A provisioned account is the config's user whatever was stored.
            if static_user(config, &account).is_some() {
                continue;
            }
            accounts.push(UserAccount {
                account,
                source: AccountSource::Linked {
                    linked_at_ms: record.linked_at_ms,
                    via: record.via,
                },
            });
        }
        Ok(accounts)
    }

    /// Every user that accounts were joined to (by the config or links), in id order.
    pub fn users(&self, config: &AppConfig) -> Result<BTreeSet<String>, StoreError> {
        let mut users: BTreeSet<String> = config
            .identities
            .iter()
            .map(|entry| entry.user.clone())
            .collect();
        for (account, record) in links::all(self.store.as_ref())? {
            if static_user(config, &account).is_none() {
                users.insert(record.user_id);
            }
        }
        Ok(users)
    }

    pub(crate) fn store(&self) -> &dyn antler_store::Store {
        self.store.as_ref()
    }
}

/// The user `identities:` gives `account`, if it lists it.
pub fn static_user<'a>(config: &'a AppConfig, account: &Account) -> Option<&'a str> {
    config
        .identities
        .iter()
        .find(|entry| {
            entry
                .accounts()
                .any(|(app, id)| app == account.channel && id == account.id)
        })
        .map(|entry| entry.user.as_str())
}

/// `{channel}-{platform_user_id}` reduced to `^[A-Za-z0-9_-]{1,64}$`. A lossy reduction gets a
/// hash suffix so two different platform ids never share one Antler user.
pub fn channel_user_id(channel: &str, platform_user_id: &str) -> String {
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
mod flow_tests;
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_are_sanitised_without_collisions() {
        assert_eq!(channel_user_id("telegram", "42"), "telegram-42");
        let odd = channel_user_id("slack", "U1.x");
        assert!(odd.starts_with("slack-U1-x-"), "{odd}");
        assert_ne!(odd, channel_user_id("slack", "U1/x"));
        let long = channel_user_id("telegram", &"9".repeat(100));
        assert_eq!(long.len(), 64);
        let valid = |id: &str| {
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        assert!(valid(&odd) && valid(&long));
    }

    #[test]
    fn admins_of_enabled_channels_only() {
        let mut config = AppConfig::default();
        config.channels.telegram.enabled = true;
        config.channels.telegram.admins = vec!["42".into()];
        assert!(is_channel_admin(&config, "telegram-42"));
        assert!(!is_channel_admin(&config, "telegram-43"));
        assert!(!is_channel_admin(&config, "slack-42"));
        config.channels.telegram.enabled = false;
        assert!(
            !is_channel_admin(&config, "telegram-42"),
            "a disabled channel grants nothing"
        );
    }
}
