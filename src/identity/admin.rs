//! Who is an admin: listed in `admins`, an admin of an enabled channel (as its platform id,
//! or the user `identities:` gives that account), or the local operator while nobody else has
//! a token.

use crate::config::AppConfig;
use crate::identity::{Account, static_user};

/// The user id of the operator on an install without API tokens (HTTP and the embedded client).
pub const LOCAL_OPERATOR: &str = "local";

/// Whether `user_id` is an admin: listed in `admins`, or the local operator while nobody else
/// has a token (a token-less install, or one whose only token is the operator's own, such as
/// `ANTLER_API_TOKEN`'s).
pub fn is_admin(config: &AppConfig, user_id: &str) -> bool {
    let operator_only = config
        .gateway
        .api_tokens
        .iter()
        .all(|token| token.user == LOCAL_OPERATOR);
    config.admins.iter().any(|admin| admin == user_id)
        || (user_id == LOCAL_OPERATOR && operator_only)
        || is_channel_admin(config, user_id)
}

/// Whether `user_id` is listed in the `admins` of an enabled channel (as a platform id; an
/// admin account provisioned in `identities:` makes its user admin). Stored links are not
/// followed: a listed account cannot join another user (see [`Refusal::AdminJoining`]), and an
/// account that joins an admin's user has proved with the admin's code that it is them.
pub fn is_channel_admin(config: &AppConfig, user_id: &str) -> bool {
    config
        .channels
        .sections()
        .into_iter()
        .filter(|section| section.enabled())
        .any(|section| {
            section.access().admins.iter().any(|admin| {
                let account = Account::chat(section.name(), admin);
                static_user(config, &account).map_or_else(|| account.default_user(), str::to_string)
                    == user_id
            })
        })
}
