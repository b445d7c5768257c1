//! Joining accounts: a one-time code issued from one account (`/link`, `POST /api/me/link`)
//! and used from another, `/unlink`, and the operator's `antler users link|unlink`. Every
//! refusal is a [`Refusal`] whose text tells the person what to do.

use crate::config::AppConfig;
use crate::identity::{
    Account, CODE_TTL_MS, Identities, IdentityError, LinkRecord, Refusal, codes, is_admin, links,
    static_user,
};

/// Group conversations' owners are not people, so nothing is linked to them.
use crate::paths::CHAT_OWNER_PREFIX as CONVERSATION_OWNER_PREFIX;

/// A code issued for a user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    pub code: String,
    /// The user whoever uses the code joins.
    pub user_id: String,
    pub expires_at_ms: u64,
}

/// An account joined to a user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    pub user_id: String,
    /// The account that issued the code (`None`: linked by the operator).
    pub issuer: Option<String>,
    /// Who the account was before: its data stays under this id.
    pub previous_user: String,
}

/// An account back on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unlinked {
    /// The user it was linked to, who keeps everything made while linked.
    pub from_user: String,
    /// The account's own user again.
    pub user_id: String,
}

impl Identities {
    /// A code that joins whichever account uses it to `issuer`'s user.
    pub fn issue(
        &self,
        config: &AppConfig,
        issuer: &Account,
        now_ms: u64,
    ) -> Result<Issued, IdentityError> {
        let user_id = self.user_of(config, issuer)?;
        let code = codes::new_code();
        let expires_at_ms = now_ms.saturating_add(CODE_TTL_MS);
        let record = codes::CodeRecord {
            user_id: user_id.clone(),
            issuer: issuer.key(),
            expires_at_ms,
            used: false,
        };
        codes::save(self.store(), &code, &record, now_ms)?;
        Ok(Issued {
            code,
            user_id,
            expires_at_ms,
        })
    }

    /// Joins `account` to the user `code` was issued for. The code is used up only when the
    /// link is made; what the account had as its old user stays there.
    pub fn redeem(
        &self,
        config: &AppConfig,
        account: &Account,
        code: &str,
        now_ms: u64,
    ) -> Result<Joined, IdentityError> {
        not_provisioned(config, account)?;
        let (raw, record) = codes::check(self.store(), account, code, now_ms)??;
        let current = self.user_of(config, account)?;
        if record.user_id == current {
            return Err(Refusal::OwnCode { user_id: current }.into());
        }
        if let Some((_, link)) = links::get(self.store(), account)? {
            return Err(Refusal::AlreadyLinked {
                user_id: link.user_id,
            }
            .into());
        }
        if is_admin(config, &current) && !is_admin(config, &record.user_id) {
            return Err(Refusal::AdminJoining { user_id: current }.into());
        }
        if !codes::consume(self.store(), code, raw, &record)? {
            return Err(Refusal::UsedCode.into());
        }
        self.insert(account, &record.user_id, "code", now_ms)?;
        Ok(Joined {
            user_id: record.user_id,
            issuer: Some(record.issuer),
            previous_user: current,
        })
    }

    /// The operator's link: `account` becomes `user_id` (an account already linked elsewhere
    /// must be unlinked first, so nobody's account moves by a typo).
    pub fn link_by_admin(
        &self,
        config: &AppConfig,
        account: &Account,
        user_id: &str,
        now_ms: u64,
    ) -> Result<Joined, IdentityError> {
        not_provisioned(config, account)?;
        if user_id.starts_with(CONVERSATION_OWNER_PREFIX) {
            return Err(Refusal::ConversationOwner {
                user_id: user_id.to_string(),
            }
            .into());
        }
        let current = self.user_of(config, account)?;
        if current == user_id {
            return Err(Refusal::SameUser {
                account: account.key(),
                user_id: current,
            }
            .into());
        }
        if let Some((_, link)) = links::get(self.store(), account)? {
            return Err(Refusal::AlreadyLinked {
                user_id: link.user_id,
            }
            .into());
        }
        self.insert(account, user_id, "admin", now_ms)?;
        Ok(Joined {
            user_id: user_id.to_string(),
            issuer: None,
            previous_user: current,
        })
    }

    /// Takes `account` back to its own user.
    pub fn unlink(&self, config: &AppConfig, account: &Account) -> Result<Unlinked, IdentityError> {
        not_provisioned(config, account)?;
        let Some((raw, record)) = links::get(self.store(), account)? else {
            return Err(Refusal::NotLinked {
                user_id: account.default_user(),
            }
            .into());
        };
        if !links::remove(self.store(), account, raw, &record)? {
            // Changed in between (another daemon unlinked it): say how it is now.
            return Err(Refusal::NotLinked {
                user_id: self.user_of(config, account)?,
            }
            .into());
        }
        Ok(Unlinked {
            from_user: record.user_id,
            user_id: account.default_user(),
        })
    }

    fn insert(
        &self,
        account: &Account,
        user_id: &str,
        via: &str,
        now_ms: u64,
    ) -> Result<(), IdentityError> {
        let record = LinkRecord {
            user_id: user_id.to_string(),
            linked_at_ms: now_ms,
            via: via.to_string(),
        };
        if links::insert(self.store(), account, &record)? {
            return Ok(());
        }
        let user_id = links::get(self.store(), account)?
            .map_or_else(|| account.default_user(), |(_, link)| link.user_id);
        Err(Refusal::AlreadyLinked { user_id }.into())
    }
}

/// Refuses to change an account `identities:` sets up: the config, not the store, decides it.
fn not_provisioned(config: &AppConfig, account: &Account) -> Result<(), IdentityError> {
    match static_user(config, account) {
        Some(user_id) => Err(Refusal::Provisioned {
            user_id: user_id.to_string(),
        }
        .into()),
        None => Ok(()),
    }
}
