//! Who may do what with custom agents. The factory and the HTTP API both ask here, so a rule
//! cannot be bypassed by picking another surface.
//!
//! Admins (`admins:` in config.yaml) may bootstrap and manage agents for any user. An ordinary
//! user may always list and use their own agents; with `agents.self_service: true` they may also
//! bootstrap, create, change, delete and revert their own. With no API tokens configured the
//! HTTP API serves only a loopback listener (on any other address it is locked) and every
//! caller is the single local user, the operator, who therefore counts as an admin; so does the
//! operator whose token is the only one (`ANTLER_API_TOKEN`, the container's one variable).

use crate::config::AppConfig;
use crate::custom_agents::SetupTarget;

// Who is an admin is a question of identity; every surface asks it here as before.
pub use crate::identity::{LOCAL_OPERATOR, is_admin};

/// Why a caller may not do something. The text says what would allow it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AccessDenied {
    #[error(
        "only admins may bootstrap agents; ask an admin to add your user id to `admins`, or to set `agents.self_service: true`"
    )]
    Bootstrap,
    #[error(
        "only admins may set up the default agent; bootstrap an agent of your own under another name, or with none to choose it in the conversation"
    )]
    DefaultSoul,
    #[error(
        "only admins may create, change or delete agents; ask an admin, or ask for `agents.self_service: true`"
    )]
    Manage,
    #[error("only admins may act for another user; leave out the `user` parameter")]
    OtherUser,
}

/// May `user_id` start a bootstrap conversation for `target`? The default agent's soul is every
/// user's, so setting it up is for admins only; an agent of one's own (named now or during the
/// conversation) needs `agents.self_service`.
pub fn check_bootstrap(
    config: &AppConfig,
    user_id: &str,
    target: &SetupTarget,
) -> Result<(), AccessDenied> {
    if is_admin(config, user_id) {
        return Ok(());
    }
    if !config.agents.self_service {
        return Err(AccessDenied::Bootstrap);
    }
    if *target == SetupTarget::DefaultAgent {
        return Err(AccessDenied::DefaultSoul);
    }
    Ok(())
}

/// May `caller` read the agents of `owner` (list, show, history)?
pub fn check_read(config: &AppConfig, caller: &str, owner: &str) -> Result<(), AccessDenied> {
    if caller == owner || is_admin(config, caller) {
        Ok(())
    } else {
        Err(AccessDenied::OtherUser)
    }
}

/// May `caller` create, change, delete or revert the agents of `owner`?
pub fn check_manage(config: &AppConfig, caller: &str, owner: &str) -> Result<(), AccessDenied> {
    if is_admin(config, caller) {
        return Ok(());
    }
    if caller != owner {
        return Err(AccessDenied::OtherUser);
    }
    if config.agents.self_service {
        Ok(())
    } else {
        Err(AccessDenied::Manage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ApiToken, Secret};

    fn config(admins: &[&str], self_service: bool) -> AppConfig {
        let mut config = AppConfig {
            admins: admins.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        };
        config.agents.self_service = self_service;
        config.gateway.api_tokens = vec![ApiToken {
            token: Secret::new("t".repeat(24)),
            user: "alice".into(),
        }];
        config
    }

    #[test]
    fn rules_by_role() {
        let strict = config(&["root"], false);
        let open = config(&["root"], true);
        type Case<'a> = (
            &'a AppConfig,
            &'a str,
            Option<&'a str>,
            Result<(), AccessDenied>,
        );
        let cases: [Case<'_>; 8] = [
            (&strict, "root", None, Ok(())),
            (&strict, "root", Some("default"), Ok(())),
            (&strict, "alice", Some("x"), Err(AccessDenied::Bootstrap)),
            (&open, "alice", Some("x"), Ok(())),
            // Named in the conversation: an agent of her own all the same.
            (&open, "alice", None, Ok(())),
            (
                &open,
                "alice",
                Some("default"),
                Err(AccessDenied::DefaultSoul),
            ),
            (&strict, "local", Some("x"), Err(AccessDenied::Bootstrap)),
            (&AppConfig::default(), "local", Some("default"), Ok(())),
        ];
        for (config, user, agent, expected) in cases {
            let target = SetupTarget::of(agent);
            assert_eq!(check_bootstrap(config, user, &target), expected, "{user}");
        }
        assert_eq!(check_manage(&strict, "root", "alice"), Ok(()));
        assert_eq!(
            check_manage(&strict, "alice", "alice"),
            Err(AccessDenied::Manage)
        );
        assert_eq!(check_manage(&open, "alice", "alice"), Ok(()));
        assert_eq!(
            check_manage(&open, "alice", "bob"),
            Err(AccessDenied::OtherUser)
        );
        assert_eq!(check_read(&strict, "alice", "alice"), Ok(()));
        assert_eq!(check_read(&strict, "root", "alice"), Ok(()));
        assert_eq!(
            check_read(&strict, "bob", "alice"),
            Err(AccessDenied::OtherUser)
        );
    }

    #[test]
    fn the_operator_with_the_only_token_stays_an_admin() {
        let mut config = AppConfig::default();
        config.gateway.api_tokens = vec![ApiToken {
            token: Secret::new("from-ANTLER_API_TOKEN"),
            user: LOCAL_OPERATOR.into(),
        }];
        assert!(is_admin(&config, LOCAL_OPERATOR));
        config.gateway.api_tokens.push(ApiToken {
            token: Secret::new("another"),
            user: "alice".into(),
        });
        assert!(!is_admin(&config, LOCAL_OPERATOR));
        assert!(!is_admin(&config, "alice"));
    }

    #[test]
    fn channel_admins_are_antler_admins() {
        let mut config = config(&[], false);
        config.channels.telegram.enabled = true;
        config.channels.telegram.admins = vec!["42".into()];
        assert!(is_admin(&config, "telegram-42"));
        let helper = SetupTarget::Named("helper".into());
        assert!(check_bootstrap(&config, "telegram-42", &helper).is_ok());
        assert!(check_manage(&config, "telegram-42", "telegram-7").is_ok());
    }
}
