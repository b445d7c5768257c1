//! The `identities:` section: accounts an organisation provisions to one Antler user, so the
//! same person is one user in every app without anyone sending `/link`.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::problem::ConfigProblem;

/// One person: their Antler user id and their accounts, by app. An account listed here is that
/// user's whatever `/link` or `antler users link` recorded (the config wins over the store), and
/// cannot be linked or unlinked from a chat.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct IdentityConfig {
    /// The Antler user id these accounts act as (`alice`; letters, digits, `_` and `-`).
    pub user: String,
    /// Telegram user ids (numbers, as `from.id` carries them).
    #[serde(deserialize_with = "ids")]
    #[schemars(with = "Vec<String>")]
    pub telegram: Vec<String>,
    /// Slack member ids (`U…`).
    #[serde(deserialize_with = "ids")]
    #[schemars(with = "Vec<String>")]
    pub slack: Vec<String>,
    /// Discord user ids (snowflakes; quoted or not).
    #[serde(deserialize_with = "ids")]
    #[schemars(with = "Vec<String>")]
    pub discord: Vec<String>,
    /// Feishu open_ids (`ou_…`).
    #[serde(deserialize_with = "ids")]
    #[schemars(with = "Vec<String>")]
    pub feishu: Vec<String>,
    /// Users of the HTTP API and web chat: the `user` of a `gateway.api_tokens` entry, or
    /// `local` on an install without tokens.
    pub api: Vec<String>,
}

/// A platform id as YAML gives it: `[123]` and `["123"]` mean the same Telegram user.
#[derive(Deserialize)]
#[serde(untagged)]
enum PlatformId {
    Text(String),
    Unsigned(u64),
    Signed(i64),
}

fn ids<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    Ok(Vec::<PlatformId>::deserialize(deserializer)?
        .into_iter()
        .map(|id| match id {
            PlatformId::Text(text) => text,
            PlatformId::Unsigned(number) => number.to_string(),
            PlatformId::Signed(number) => number.to_string(),
        })
        .collect())
}

impl IdentityConfig {
    /// Every account of this entry as `(app, id)`.
    pub fn accounts(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("telegram", &self.telegram),
            ("slack", &self.slack),
            ("discord", &self.discord),
            ("feishu", &self.feishu),
            ("api", &self.api),
        ]
        .into_iter()
        .flat_map(|(app, ids)| ids.iter().map(move |id| (app, id.as_str())))
    }
}

/// The problems of `identities`: a missing or invalid user, an empty id, an account given to
/// two users (it would be ambiguous whose it is).
pub(crate) fn problems(identities: &[IdentityConfig]) -> Vec<ConfigProblem> {
    let mut problems = Vec::new();
    let mut owners: HashMap<(&str, &str), usize> = HashMap::new();
    for (index, entry) in identities.iter().enumerate() {
        if crate::paths::validate_id("user", &entry.user).is_err() {
            problems.push(ConfigProblem::new(
                format!("identities[{index}].user"),
                "must be an Antler user id: 1 to 64 letters, digits, '_' or '-' (e.g. alice)",
            ));
        } else if entry.user.starts_with(crate::paths::CHAT_OWNER_PREFIX) {
            problems.push(ConfigProblem::new(
                format!("identities[{index}].user"),
                format!(
                    "must not start with `{}`: such ids own group chats' conversations; choose another user id",
                    crate::paths::CHAT_OWNER_PREFIX
                ),
            ));
        }
        if entry.accounts().next().is_none() {
            problems.push(ConfigProblem::new(
                format!("identities[{index}]"),
                "lists no account; add ids under telegram, slack, discord, feishu or api",
            ));
        }
        for (app, id) in entry.accounts() {
            if id.trim().is_empty() {
                problems.push(ConfigProblem::new(
                    format!("identities[{index}].{app}"),
                    "holds an empty id; remove it",
                ));
                continue;
            }
            if let Some(first) = owners.insert((app, id), index)
                && identities[first].user != entry.user
            {
                problems.push(ConfigProblem::new(
                    format!("identities[{index}].{app}"),
                    format!(
                        "{app} account {id} is already listed for user {} (identities[{first}]); \
                         an account belongs to one user only",
                        identities[first].user
                    ),
                ));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(user: &str, slack: &[&str], telegram: &[&str]) -> IdentityConfig {
        IdentityConfig {
            user: user.into(),
            slack: slack.iter().map(|id| id.to_string()).collect(),
            telegram: telegram.iter().map(|id| id.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn problems_name_their_key() {
        let identities = vec![
            entry("alice", &["U1"], &["42"]),
            entry("bob smith", &["U2"], &[]),
            entry("carol", &["U1"], &[]),
            entry("dave", &[], &[]),
            entry("erin", &[""], &[]),
        ];
        let keys: Vec<String> = problems(&identities)
            .into_iter()
            .map(|problem| problem.to_string())
            .collect();
        assert_eq!(keys.len(), 4, "{keys:#?}");
        assert!(keys[0].contains("identities[1].user"), "{keys:#?}");
        assert!(
            keys[1].contains("identities[2].slack")
                && keys[1].contains("already listed for user alice"),
            "{keys:#?}"
        );
        assert!(keys[2].contains("identities[3]"), "{keys:#?}");
        assert!(keys[3].contains("identities[4].slack"), "{keys:#?}");
        assert!(problems(&[entry("alice", &["U1"], &["42"])]).is_empty());
    }
}
