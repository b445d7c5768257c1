//! A user's accounts as `GET /api/me`, `GET /api/users` and `antler users` report them.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::config::AppConfig;
use crate::identity::{
    API_APP, APPS, Account, AccountSource, Identities, IdentityError, LOCAL_OPERATOR, UserAccount,
};

/// One account as reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountView {
    pub channel: String,
    pub id: String,
    /// `own` (the user's by default), `config` (`identities:`) or `linked`.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linked_at: Option<String>,
    /// `code` or `admin`, for a linked account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// One line of `antler users list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserSummary {
    pub user_id: String,
    pub accounts: Vec<AccountView>,
}

impl AccountView {
    pub fn of(entry: &UserAccount) -> Self {
        let (source, linked_at, via) = match &entry.source {
            AccountSource::Own => ("own", None, None),
            AccountSource::Config => ("config", None, None),
            AccountSource::Linked { linked_at_ms, via } => {
                ("linked", Some(rfc3339(*linked_at_ms)), Some(via.clone()))
            }
        };
        Self {
            channel: entry.account.channel.clone(),
            id: entry.account.id.clone(),
            source: source.into(),
            linked_at,
            via,
        }
    }
}

impl Identities {
    /// Every account acting as `user_id`, the user's own default one (and `also`, the caller's)
    /// first.
    pub fn all_accounts_of(
        &self,
        config: &AppConfig,
        user_id: &str,
        also: Option<&Account>,
    ) -> Result<Vec<UserAccount>, IdentityError> {
        let mut accounts = self.accounts_of(config, user_id)?;
        // An API user is an account of its own when a token (or the token-less install) names it.
        let api_user = config.gateway.api_tokens.iter().any(|t| t.user == user_id)
            || (config.gateway.api_tokens.is_empty() && user_id == LOCAL_OPERATOR);
        let api = api_user.then(|| Account::api(user_id));
        for account in [default_account_of(user_id), api, also.cloned()]
            .into_iter()
            .flatten()
            .rev()
        {
            let acts_as_user = self.user_of(config, &account)? == user_id;
            if acts_as_user && !accounts.iter().any(|known| known.account == account) {
                accounts.insert(
                    0,
                    UserAccount {
                        account,
                        source: AccountSource::Own,
                    },
                );
            }
        }
        Ok(accounts)
    }

    pub fn summaries(&self, config: &AppConfig) -> Result<Vec<UserSummary>, IdentityError> {
        let mut summaries = Vec::new();
        for user_id in self.users(config)? {
            let accounts = self.all_accounts_of(config, &user_id, None)?;
            summaries.push(UserSummary {
                accounts: accounts.iter().map(AccountView::of).collect(),
                user_id,
            });
        }
        Ok(summaries)
    }
}

/// The chat account a user id of the default form `{app}-{id}` is, when it reads back exactly.
pub fn default_account_of(user_id: &str) -> Option<Account> {
    let (app, id) = user_id.split_once('-')?;
    let account = Account::chat(app, id);
    (APPS.contains(&app) && app != API_APP && account.default_user() == user_id).then_some(account)
}

pub fn rfc3339(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(DateTime::<Utc>::from_timestamp_millis)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_default()
}
