//! The `identities:` section as loaded from YAML: numeric platform ids as the issue writes them
//! (`telegram: [123]`), every problem named by its key, and the provisioned accounts resolving
//! to their user ahead of anything stored.

use std::path::Path;
use std::sync::Arc;

use antler::config::{ConfigOrigin, MapEnv, load_from_str};
use antler::identity::{Account, Identities, is_admin};
use antler_store::MemoryStore;

const MODEL: &str = "config_version: 1\nmodels:\n  - name: main\n    model: gpt-4o\n    base_url: https://api.openai.com/v1\n";

fn load(yaml: &str) -> Result<antler::config::LoadedConfig, antler::config::ConfigError> {
    load_from_str(
        &format!("{MODEL}{yaml}"),
        ConfigOrigin::Embedded,
        &MapEnv::new(),
        Path::new("/"),
    )
}

#[test]
fn provisioned_accounts_load_and_resolve_to_their_user() {
    let yaml = "identities:\n  - user: alice\n    telegram: [123, \"456\"]\n    discord: [1234567890123456789]\n    slack: [U0ALICE]\n    api: [alice-token-user]\n\
                channels:\n  telegram:\n    enabled: true\n    bot_token: \"1:x\"\n    admins: [\"123\"]\n";
    let config = load(yaml).expect("valid").config;
    let alice = &config.identities[0];
    assert_eq!(alice.telegram, ["123", "456"]);
    assert_eq!(alice.discord, ["1234567890123456789"]);
    let identities = Identities::new(Arc::new(MemoryStore::new()));
    for account in [
        "telegram:456",
        "discord:1234567890123456789",
        "slack:U0ALICE",
        "api:alice-token-user",
    ] {
        let account = Account::parse(account).expect("account");
        assert_eq!(
            identities.user_of(&config, &account).unwrap(),
            "alice",
            "{account}"
        );
    }
    assert_eq!(
        identities
            .user_of(&config, &Account::chat("slack", "U0BOB"))
            .unwrap(),
        "slack-U0BOB",
        "an account not listed stays its own user"
    );
    assert!(
        is_admin(&config, "alice"),
        "a provisioned channel admin makes alice admin"
    );
    assert!(!is_admin(&config, "telegram-123"));
}

#[test]
fn every_identities_problem_is_named_by_its_key() {
    let yaml = "identities:\n  - user: al ice\n    slack: [U1]\n  - user: bob\n    slack: [U1]\n  - user: carol\n  - user: dave\n    telegram: [1]\n    nickname: d\n";
    let error = load(yaml).expect_err("invalid").to_string();
    for key in [
        "identities[0].user",
        "identities[1].slack",
        "identities[2]",
        "identities[3].nickname",
    ] {
        assert!(error.contains(key), "{key} in {error}");
    }
    assert!(error.contains("already listed for user al ice"), "{error}");
}
