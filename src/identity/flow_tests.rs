//! The link flow on an in-memory store with an injected time: codes, refusals, unlink, the
//! operator's links, and `identities:` winning over the store.

use std::sync::Arc;

use antler_store::MemoryStore;

use crate::config::{AppConfig, IdentityConfig};
use crate::identity::{Account, Identities, IdentityError, MAX_FAILED_ATTEMPTS, Refusal};

const T0: u64 = 1_800_000_000_000;
const MINUTE: u64 = 60_000;

fn setup() -> (Identities, AppConfig) {
    (
        Identities::new(Arc::new(MemoryStore::new())),
        AppConfig::default(),
    )
}

fn refusal(result: Result<impl std::fmt::Debug, IdentityError>) -> Refusal {
    match result {
        Err(IdentityError::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_code_from_one_account_joins_another_once() {
    let (ids, config) = setup();
    let telegram = Account::chat("telegram", "42");
    let slack = Account::chat("slack", "U2");
    assert_eq!(ids.user_of(&config, &slack).unwrap(), "slack-U2");

    let issued = ids.issue(&config, &telegram, T0).unwrap();
    assert_eq!(issued.user_id, "telegram-42");
    assert_eq!(issued.expires_at_ms, T0 + 10 * MINUTE);
    let joined = ids
        .redeem(&config, &slack, &issued.code.to_lowercase(), T0 + MINUTE)
        .unwrap();
    assert_eq!(joined.user_id, "telegram-42");
    assert_eq!(joined.previous_user, "slack-U2");
    assert_eq!(joined.issuer.as_deref(), Some("telegram:42"));
    assert_eq!(ids.user_of(&config, &slack).unwrap(), "telegram-42");
    assert_eq!(ids.user_of(&config, &telegram).unwrap(), "telegram-42");

    // Reused, from a third account.
    let discord = Account::chat("discord", "9");
    assert_eq!(
        refusal(ids.redeem(&config, &discord, &issued.code, T0 + MINUTE)),
        Refusal::UsedCode
    );
    // A linked account cannot be linked elsewhere without unlinking first.
    let other = ids.issue(&config, &discord, T0).unwrap();
    assert_eq!(
        refusal(ids.redeem(&config, &slack, &other.code, T0 + MINUTE)),
        Refusal::AlreadyLinked {
            user_id: "telegram-42".into()
        }
    );
    let accounts = ids.accounts_of(&config, "telegram-42").unwrap();
    assert_eq!(accounts.len(), 1);
    assert_eq!(accounts[0].account, slack);
    assert_eq!(
        ids.all_accounts_of(&config, "telegram-42", None)
            .unwrap()
            .iter()
            .map(|a| a.account.key())
            .collect::<Vec<_>>(),
        ["telegram:42", "slack:U2"]
    );

    let unlinked = ids.unlink(&config, &slack).unwrap();
    assert_eq!(unlinked.from_user, "telegram-42");
    assert_eq!(unlinked.user_id, "slack-U2");
    assert_eq!(ids.user_of(&config, &slack).unwrap(), "slack-U2");
    assert_eq!(
        refusal(ids.unlink(&config, &slack)),
        Refusal::NotLinked {
            user_id: "slack-U2".into()
        }
    );
}

#[test]
fn expired_own_and_unknown_codes_are_refused_and_guessing_is_limited() {
    let (ids, config) = setup();
    let telegram = Account::chat("telegram", "42");
    let slack = Account::chat("slack", "U2");
    let issued = ids.issue(&config, &telegram, T0).unwrap();
    assert_eq!(
        refusal(ids.redeem(&config, &telegram, &issued.code, T0)),
        Refusal::OwnCode {
            user_id: "telegram-42".into()
        },
        "the issuer's own user cannot use it"
    );
    assert_eq!(
        refusal(ids.redeem(&config, &slack, &issued.code, T0 + 10 * MINUTE)),
        Refusal::ExpiredCode
    );

    let fresh = ids.issue(&config, &telegram, T0 + 20 * MINUTE).unwrap();
    let now = T0 + 21 * MINUTE;
    for _ in 1..MAX_FAILED_ATTEMPTS {
        assert_eq!(
            refusal(ids.redeem(&config, &slack, "ZZZZ-ZZZZ", now)),
            Refusal::UnknownCode
        );
    }
    assert_eq!(
        refusal(ids.redeem(&config, &slack, "nonsense", now)),
        Refusal::UnknownCode
    );
    // Five wrong codes: even the right one waits now.
    assert_eq!(
        refusal(ids.redeem(&config, &slack, &fresh.code, now)),
        Refusal::RateLimited { minutes: 10 }
    );
    // Another account is not held back by this one's guesses, and the window passes.
    let discord = Account::chat("discord", "9");
    assert!(matches!(
        refusal(ids.redeem(&config, &discord, "ZZZZ-ZZZZ", now)),
        Refusal::UnknownCode
    ));
    let later = now + 10 * MINUTE;
    let fresh = ids.issue(&config, &telegram, later).unwrap();
    assert_eq!(
        ids.redeem(&config, &slack, &fresh.code, later)
            .unwrap()
            .user_id,
        "telegram-42"
    );
}

#[test]
fn the_config_wins_and_admins_do_not_join_others() {
    let (ids, mut config) = setup();
    config.identities = vec![IdentityConfig {
        user: "alice".into(),
        slack: vec!["UA".into()],
        telegram: vec!["7".into()],
        ..Default::default()
    }];
    config.channels.telegram.enabled = true;
    config.channels.telegram.admins = vec!["7".into(), "8".into()];
    let alice_slack = Account::chat("slack", "UA");
    assert_eq!(ids.user_of(&config, &alice_slack).unwrap(), "alice");
    assert!(
        crate::identity::is_channel_admin(&config, "alice"),
        "a provisioned admin account makes its user admin"
    );
    assert!(!crate::identity::is_channel_admin(&config, "telegram-7"));

    // A stored link of a provisioned account changes nothing.
    ids.link_by_admin(&AppConfig::default(), &alice_slack, "mallory", T0)
        .unwrap();
    assert_eq!(ids.user_of(&config, &alice_slack).unwrap(), "alice");
    let issued = ids
        .issue(&config, &Account::chat("discord", "1"), T0)
        .unwrap();
    assert_eq!(
        refusal(ids.redeem(&config, &alice_slack, &issued.code, T0)),
        Refusal::Provisioned {
            user_id: "alice".into()
        }
    );
    assert_eq!(
        refusal(ids.unlink(&config, &alice_slack)),
        Refusal::Provisioned {
            user_id: "alice".into()
        }
    );
    // An admin account would lose its rights by joining an ordinary user.
    assert_eq!(
        refusal(ids.redeem(&config, &Account::chat("telegram", "8"), &issued.code, T0)),
        Refusal::AdminJoining {
            user_id: "telegram-8".into()
        }
    );
    // The other way round is fine: the admin issues, their other account joins.
    let issued = ids
        .issue(&config, &Account::chat("telegram", "8"), T0)
        .unwrap();
    let joined = ids
        .redeem(&config, &Account::chat("slack", "U8"), &issued.code, T0)
        .unwrap();
    assert_eq!(joined.user_id, "telegram-8");
    assert_eq!(
        ids.users(&config).unwrap().into_iter().collect::<Vec<_>>(),
        ["alice", "telegram-8"]
    );
}

#[test]
fn the_operator_links_without_a_code_but_never_silently_moves_an_account() {
    let (ids, config) = setup();
    let slack = Account::chat("slack", "U1");
    assert_eq!(
        refusal(ids.link_by_admin(&config, &slack, "slack-U1", T0)),
        Refusal::SameUser {
            account: "slack:U1".into(),
            user_id: "slack-U1".into()
        }
    );
    assert_eq!(
        refusal(ids.link_by_admin(&config, &slack, "chat-slack-0123", T0)),
        Refusal::ConversationOwner {
            user_id: "chat-slack-0123".into()
        },
        "a group conversation's owner is no person"
    );
    let joined = ids.link_by_admin(&config, &slack, "alice", T0).unwrap();
    assert_eq!(
        (joined.user_id.as_str(), joined.previous_user.as_str()),
        ("alice", "slack-U1")
    );
    assert_eq!(
        refusal(ids.link_by_admin(&config, &slack, "bob", T0)),
        Refusal::AlreadyLinked {
            user_id: "alice".into()
        }
    );
    let api = Account::api("local");
    ids.link_by_admin(&config, &api, "alice", T0).unwrap();
    assert_eq!(ids.user_of(&config, &api).unwrap(), "alice");
    let summaries = ids.summaries(&config).unwrap();
    assert_eq!(summaries.len(), 1);
    let accounts: Vec<String> = summaries[0]
        .accounts
        .iter()
        .map(|a| format!("{}:{}:{}", a.channel, a.id, a.source))
        .collect();
    assert_eq!(accounts, ["api:local:linked", "slack:U1:linked"]);
}
