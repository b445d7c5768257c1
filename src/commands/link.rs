//! `/link [CODE]` and `/unlink`: one person's accounts as one user ([`crate::identity`]).
//! A code is shown only where nobody else reads it (a direct chat, the web chat).

use chrono::{DateTime, Utc};

use crate::commands::surface::{CommandError, CommandSurface};
use crate::config::AppConfig;
use crate::custom_agents::AgentStore;
use crate::harness::Harness;
use crate::identity::{Account, Identities, IdentityError};
use crate::users::{Holdings, UsersError};

const NO_ACCOUNT: &str = "This chat acts as the operator, which has no account to link. Link \
                          accounts with `antler users link APP:ID USER` instead.";

/// `/link` issues a code for the sender's user; `/link CODE` joins the sender's account to the
/// user the code was issued for.
pub(crate) fn link(
    surface: &dyn CommandSurface,
    harness: &Harness,
    config: &AppConfig,
    code: Option<&str>,
) -> Result<String, CommandError> {
    let Some(account) = surface.account() else {
        return Ok(NO_ACCOUNT.into());
    };
    if surface.shared() {
        return Ok(match code {
            None => "Send /link in a direct message with me: a code shown here could be used \
                     by anyone in this chat."
                .into(),
            Some(_) => "Send /link CODE in a direct message with me, and ask for a new code: \
                        this one was shown to everyone here."
                .into(),
        });
    }
    let identities = Identities::new(harness.threads().store().clone());
    let now_ms = harness.cluster().now_ms();
    let result = match code {
        None => identities
            .issue(config, &account, now_ms)
            .map(|issued| issued_reply(&issued))
            .map_err(UsersError::from),
        Some(code) => identities
            .redeem(config, &account, code, now_ms)
            .map_err(UsersError::from)
            .and_then(|joined| joined_reply(harness, config, &account, &joined)),
    };
    reply_or_refusal(result)
}

/// `/unlink`: the sender's account back to its own user; what was made while linked stays
/// with the user it was linked to.
pub(crate) fn unlink(
    surface: &dyn CommandSurface,
    harness: &Harness,
    config: &AppConfig,
) -> Result<String, CommandError> {
    let Some(account) = surface.account() else {
        return Ok(NO_ACCOUNT.into());
    };
    let identities = Identities::new(harness.threads().store().clone());
    let unlinked = identities
        .unlink(config, &account)
        .map_err(UsersError::from);
    reply_or_refusal(unlinked.map(|unlinked| {
        format!(
            "Unlinked: this account is its own user again ({}). Memory, agents and \
             conversations made while it was linked stay with {}.",
            unlinked.user_id, unlinked.from_user
        )
    }))
}

/// The text of what a link reports for one account; shared with `POST /api/me/link`.
pub fn joined_reply(
    harness: &Harness,
    config: &AppConfig,
    account: &Account,
    joined: &crate::identity::Joined,
) -> Result<String, UsersError> {
    let agents = AgentStore::new(config.data_dir());
    let store = harness.threads().store();
    let left = Holdings::of(store, &agents, &joined.previous_user)?;
    let with = joined.issuer.as_deref().unwrap_or(&joined.user_id);
    let mut text = format!(
        "Linked: {account} is now the same user as {with} ({}). Memory, agents, usage and \
         budgets are shared from now on.",
        joined.user_id
    );
    if !left.is_empty() {
        text.push_str(&format!(
            " What this account had before as {previous} ({left}) was not merged: it stays \
             under {previous}, and an admin can see it with `antler users show {previous}`.",
            previous = joined.previous_user
        ));
    }
    Ok(text)
}

fn issued_reply(issued: &crate::identity::Issued) -> String {
    let expires = i64::try_from(issued.expires_at_ms)
        .ok()
        .and_then(DateTime::<Utc>::from_timestamp_millis)
        .map(|at| at.format("%H:%M UTC").to_string())
        .unwrap_or_default();
    format!(
        "Your link code: {code}\nSend /link {code} from your other account (Telegram, Slack, \
         Discord, Feishu or the web chat) before {expires} to make it the same user as this \
         one ({user}). The code works once.",
        code = issued.code,
        user = issued.user_id,
    )
}

fn reply_or_refusal(result: Result<String, UsersError>) -> Result<String, CommandError> {
    match result {
        Ok(text) => Ok(text),
        Err(UsersError::Identity(IdentityError::Refused(refusal))) => Ok(refusal.to_string()),
        Err(UsersError::Identity(IdentityError::Store(error)) | UsersError::Store(error)) => {
            Err(CommandError::Store(error))
        }
        Err(UsersError::Memory(error)) => Err(CommandError::Memory(error)),
        Err(error) => Err(CommandError::Surface(error.to_string())),
    }
}
