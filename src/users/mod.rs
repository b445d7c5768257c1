//! What a user holds and who they are across apps, for the people who look after users:
//! `antler users show`, `GET /api/users/{user_id}` and the reply to `/link`. Linking merges
//! nothing, so each linked account's earlier data stays under its own id; this says where.

mod holdings;

use antler_store::StoreRef;
use serde::{Deserialize, Serialize};

use crate::config::AppConfig;
use crate::custom_agents::AgentStore;
use crate::identity::{AccountView, Identities, IdentityError};

pub use holdings::Holdings;

#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    Store(#[from] antler_store::StoreError),
    #[error(transparent)]
    Agents(#[from] crate::custom_agents::AgentStoreError),
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
}

/// Data an account's own id holds while the account acts as another user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftBehind {
    pub account: String,
    pub user_id: String,
    pub holds: HoldingsView,
}

/// [`Holdings`] as JSON (the daemon's answer to `antler users`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldingsView {
    pub memory_facts: usize,
    pub agents: usize,
    pub threads: usize,
}

/// `antler users show USER`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserReport {
    pub user_id: String,
    pub accounts: Vec<AccountView>,
    pub holds: HoldingsView,
    /// Earlier data of the linked accounts, under their own ids.
    pub left_behind: Vec<LeftBehind>,
}

impl From<Holdings> for HoldingsView {
    fn from(holdings: Holdings) -> Self {
        Self {
            memory_facts: holdings.memory_facts,
            agents: holdings.agents,
            threads: holdings.threads,
        }
    }
}

impl From<HoldingsView> for Holdings {
    fn from(view: HoldingsView) -> Self {
        Self {
            memory_facts: view.memory_facts,
            agents: view.agents,
            threads: view.threads,
        }
    }
}

/// `antler users show USER`: the user's accounts, what the user holds, and what each linked
/// account left under its own id.
pub fn report(
    identities: &Identities,
    config: &AppConfig,
    store: &StoreRef,
    agents: &AgentStore,
    user_id: &str,
) -> Result<UserReport, UsersError> {
    let accounts = identities.all_accounts_of(config, user_id, None)?;
    let mut left_behind = Vec::new();
    for entry in &accounts {
        let old = entry.account.default_user();
        if old == user_id {
            continue;
        }
        let holds = Holdings::of(store, agents, &old)?;
        if !holds.is_empty() {
            left_behind.push(LeftBehind {
                account: entry.account.key(),
                user_id: old,
                holds: holds.into(),
            });
        }
    }
    Ok(UserReport {
        user_id: user_id.to_string(),
        accounts: accounts.iter().map(AccountView::of).collect(),
        holds: Holdings::of(store, agents, user_id)?.into(),
        left_behind,
    })
}
