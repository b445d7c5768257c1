//! Semantic checks on a decoded [`AppConfig`] (ranges, references between keys, formats) and the
//! `config_version` upgrade warnings. Every problem carries its key path.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

use crate::config::problem::ConfigProblem;
use crate::config::{AppConfig, CONFIG_CHANGELOG, CONFIG_VERSION, ModelConfig};

mod limits;

use limits::check_limits;

/// Levels accepted as a bare `log_level`; anything with `=` or `,` is a full `tracing` filter.
const LOG_LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

/// Every semantic problem in `config`, in key order.
pub fn validate(config: &AppConfig) -> Vec<ConfigProblem> {
    let mut problems = Problems::default();
    check_log_level(&config.log_level, &mut problems);
    check_models(&config.models, &mut problems);
    check_fallbacks(&config.models, &mut problems);
    check_limits(config, &mut problems);
    check_gateway(config, &mut problems);
    check_channels(config, &mut problems);
    check_sandbox(config, &mut problems);
    problems.0.extend(
        config
            .subagents
            .problems(|name| config.model(name).is_some()),
    );
    problems.0.extend(config.section_problems());
    problems
        .0
        .extend(config.approvals.problems(&tool_groups(config)));
    problems.0.extend(config.scheduler.problems());
    problems.0.extend(config.voice.problems());
    problems.0.extend(config.telemetry.problems());
    problems.0.extend(config.channels.webhook.problems());
    let enabled = |name: &str| config.channels.section(name).map(|s| s.enabled());
    problems
        .0
        .extend(config.channels.webhook.destination_problems(&enabled));
    for (key, message) in config.store.problems() {
        problems.push(key, message);
    }
    problems.require(
        config.store.cache_capacity_mb >= 1,
        "store.cache_capacity_mb",
        "must be at least 1",
    );
    problems
        .0
        .extend(crate::config::identities::problems(&config.identities));
    for (index, admin) in config.admins.iter().enumerate() {
        if !is_user_id(admin) {
            problems.push(format!("admins[{index}]"), USER_ID_RULE);
        }
    }
    problems.0
}

/// The upgrade notes for a file declaring `declared` (`None` = no `config_version` key).
pub fn version_warnings(declared: Option<u32>) -> Vec<String> {
    let changes_since = |version: u32| {
        CONFIG_CHANGELOG
            .iter()
            .filter(|(changed_in, _)| *changed_in > version)
            .map(|(changed_in, change)| format!("v{changed_in}: {change}"))
            .collect::<Vec<_>>()
            .join("; ")
    };
    match declared {
        None => vec![format!(
            "config has no config_version; this antler uses version {CONFIG_VERSION} ({}). \
             Compare your file with the shipped config.yaml, then add `config_version: {CONFIG_VERSION}`",
            changes_since(0)
        )],
        Some(version) if version < CONFIG_VERSION => vec![format!(
            "config_version {version} is older than this antler's {CONFIG_VERSION}; changed since: {}. \
             Apply these changes from the shipped config.yaml, then set `config_version: {CONFIG_VERSION}`",
            changes_since(version)
        )],
        Some(version) if version > CONFIG_VERSION => vec![format!(
            "config_version {version} is newer than this antler's {CONFIG_VERSION}; keys added later \
             are rejected or behave differently. Upgrade antler or use a config written for version {CONFIG_VERSION}"
        )],
        Some(_) => Vec::new(),
    }
}

#[derive(Default)]
pub(super) struct Problems(Vec<ConfigProblem>);

impl Problems {
    fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigProblem::new(path, message));
    }

    /// Records `message` at `path` unless `ok`.
    pub(super) fn require(
        &mut self,
        ok: bool,
        path: impl Into<String>,
        message: impl Into<String>,
    ) {
        if !ok {
            self.push(path, message);
        }
    }
}

use crate::paths::CHAT_OWNER_PREFIX;

/// The tool groups a `group:` pattern may name: `tool_groups:`, else the registry's defaults.
fn tool_groups(config: &AppConfig) -> Vec<String> {
    let mut groups: Vec<String> = if config.tool_groups.is_empty() {
        crate::config::approvals::DEFAULT_GROUPS
            .iter()
            .map(|g| g.to_string())
            .collect()
    } else {
        config.tool_groups.iter().map(|g| g.name.clone()).collect()
    };
    let schedule = crate::config::scheduler::SCHEDULE_GROUP;
    if config.scheduler.enabled && !groups.iter().any(|g| g == schedule) {
        groups.push(schedule.to_string());
    }
    groups
}

const USER_ID_RULE: &str = "must be 1 to 64 letters, digits, `_` or `-`";

fn is_user_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn check_log_level(level: &str, problems: &mut Problems) {
    let ok = if level.contains(['=', ',']) {
        tracing_subscriber::EnvFilter::try_new(level).is_ok()
    } else {
        // A bare word would otherwise parse as a *target* name, so `inf` would silently log nothing.
        LOG_LEVELS.contains(&level.to_ascii_lowercase().as_str())
    };
    problems.require(
        ok,
        "log_level",
        "must be error, warn, info, debug, trace, off or a tracing filter like `antler=debug,info`",
    );
}

fn check_models(models: &[ModelConfig], problems: &mut Problems) {
    if models.is_empty() {
        problems.push(
            "models",
            "at least one model is required; add an entry under `models:`",
        );
    }
    let mut first_by_name: HashMap<&str, usize> = HashMap::new();
    for (index, model) in models.iter().enumerate() {
        let at = |key: &str| format!("models[{index}].{key}");
        if model.name.trim().is_empty() {
            problems.push(at("name"), "must not be empty");
        } else if let Some(&first) = first_by_name.get(model.name.as_str()) {
            problems.push(
                at("name"),
                format!(
                    "duplicate model name `{}` (also models[{first}])",
                    model.name
                ),
            );
        } else {
            first_by_name.insert(&model.name, index);
        }
        problems.require(
            !model.model.trim().is_empty(),
            at("model"),
            "must not be empty; set the provider's model id, e.g. `gpt-4o` or `qwen2.5:7b`",
        );
        problems.require(
            is_http_url(&model.base_url),
            at("base_url"),
            "must be an http:// or https:// url, e.g. `https://api.openai.com/v1`",
        );
        problems.require(
            model.timeout.is_finite() && model.timeout > 0.0,
            at("timeout"),
            "must be a number of seconds greater than 0",
        );
        if let Some(temperature) = model.temperature {
            problems.require(
                (0.0..=2.0).contains(&temperature),
                at("temperature"),
                "must be between 0 and 2",
            );
        }
        problems.require(
            model.max_tokens != Some(0),
            at("max_tokens"),
            "must be at least 1 (or leave it unset)",
        );
    }
}

pub(super) fn is_http_url(text: &str) -> bool {
    reqwest::Url::parse(text)
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
}

fn check_fallbacks(models: &[ModelConfig], problems: &mut Problems) {
    let index_of: HashMap<&str, usize> = models
        .iter()
        .enumerate()
        .map(|(index, model)| (model.name.as_str(), index))
        .rev() // the first of duplicate names wins, as in `AppConfig::model`
        .collect();
    for (index, model) in models.iter().enumerate() {
        let Some(fallback) = &model.fallback else {
            continue;
        };
        let path = format!("models[{index}].fallback");
        match index_of.get(fallback.as_str()) {
            None => problems.push(
                path,
                format!("names no model `{fallback}`; use another model's `name`"),
            ),
            Some(&target) if target == index => {
                problems.push(path, "must name another model, not this one")
            }
            Some(_) => {
                if let Some(cycle) = cycle_through(models, &index_of, index) {
                    problems.push(path, format!("fallback chain forms a cycle: {cycle}"));
                }
            }
        }
    }
}

/// The cycle text (`a → b → a`) when following fallbacks from `start` returns to it and `start`
/// is the cycle's first model in file order, so each cycle is reported once.
fn cycle_through(
    models: &[ModelConfig],
    index_of: &HashMap<&str, usize>,
    start: usize,
) -> Option<String> {
    let mut chain = vec![start];
    let mut seen = HashSet::from([start]);
    let mut current = start;
    while let Some(&next) = models[current]
        .fallback
        .as_deref()
        .and_then(|name| index_of.get(name))
    {
        if next == start {
            if chain.iter().any(|&member| member < start) {
                return None;
            }
            chain.push(start);
            let names: Vec<&str> = chain.iter().map(|&i| models[i].name.as_str()).collect();
            return Some(names.join(" → "));
        }
        if !seen.insert(next) {
            return None; // a cycle that does not include `start`; reported from its own member
        }
        chain.push(next);
        current = next;
    }
    None
}

/// Discord pages at most 100 messages a call; a mention costs one call.
const MAX_CONTEXT_MESSAGES: usize = 100;

fn check_channels(config: &AppConfig, problems: &mut Problems) {
    let channels = &config.channels;
    problems.require(
        channels
            .stream
            .min_interval
            .is_none_or(|s| (0.0..=60.0).contains(&s)),
        "channels.stream.min_interval",
        "must be between 0 and 60 seconds",
    );
    problems.require(
        (1..=600).contains(&channels.reload_connect_timeout_seconds),
        "channels.reload_connect_timeout_seconds",
        "must be between 1 and 600",
    );
    problems.require(
        channels.context.max_messages <= MAX_CONTEXT_MESSAGES,
        "channels.context.max_messages",
        "must be between 0 and 100 (one platform call reads at most 100 messages)",
    );
    for section in channels.sections() {
        let own = section.context_override();
        problems.require(
            own.max_messages.is_none_or(|n| n <= MAX_CONTEXT_MESSAGES),
            format!("channels.{}.context.max_messages", section.name()),
            "must be between 0 and 100 (one platform call reads at most 100 messages)",
        );
        for (key, message) in section.problems() {
            problems.push(format!("channels.{}.{key}", section.name()), message);
        }
    }
}

fn check_gateway(config: &AppConfig, problems: &mut Problems) {
    let gateway = &config.gateway;
    problems.require(
        gateway.listen.parse::<SocketAddr>().is_ok(),
        "gateway.listen",
        "must be an ip address (or localhost) and port, e.g. `127.0.0.1:8787` or `0.0.0.0:8787`",
    );
    problems.require(
        gateway.backlog >= 1,
        "gateway.backlog",
        "must be at least 1",
    );
    problems.0.extend(super::gateway_checks::problems(gateway));
    problems.require(
        (8192..=1024 * 1024).contains(&gateway.max_header_bytes),
        "gateway.max_header_bytes",
        "must be between 8192 and 1048576",
    );
    problems.require(
        gateway.idle_timeout_seconds >= 1,
        "gateway.idle_timeout_seconds",
        "must be at least 1",
    );
    let mut first_by_token: HashMap<&str, usize> = HashMap::new();
    for (index, api_token) in gateway.api_tokens.iter().enumerate() {
        let token = api_token.token.expose();
        if token.is_empty() {
            problems.push(
                format!("gateway.api_tokens[{index}].token"),
                "must not be empty (an environment variable may be set to an empty string)",
            );
        } else if let Some(&first) = first_by_token.get(token) {
            // Never print the token itself, only where its twin is.
            problems.push(
                format!("gateway.api_tokens[{index}].token"),
                format!(
                    "duplicates the token of gateway.api_tokens[{first}]; each token must be unique"
                ),
            );
        } else {
            first_by_token.insert(token, index);
        }
        problems.require(
            is_user_id(&api_token.user),
            format!("gateway.api_tokens[{index}].user"),
            USER_ID_RULE,
        );
        // A token of a group conversation's owner would read that chat's threads as its own.
        problems.require(
            !api_token.user.starts_with(CHAT_OWNER_PREFIX),
            format!("gateway.api_tokens[{index}].user"),
            format!("must not start with `{CHAT_OWNER_PREFIX}`: such ids own group chats' conversations; choose another user id"),
        );
    }
}

fn check_sandbox(config: &AppConfig, problems: &mut Problems) {
    let sandbox = &config.sandbox;
    let (thread, data_dir) = (sandbox.thread_quota_mb, sandbox.data_dir_quota_mb);
    if thread > 0 && data_dir > 0 {
        problems.require(
            thread <= data_dir,
            "sandbox.thread_quota_mb",
            format!(
                "must not exceed sandbox.data_dir_quota_mb ({data_dir}); raise that or lower this \
                 (0 turns a quota off)"
            ),
        );
    }
    // Below a few MiB every `pip install` or checkout fails, which reads like a bug, not a quota.
    for (key, value) in [
        ("sandbox.thread_quota_mb", thread),
        ("sandbox.data_dir_quota_mb", data_dir),
    ] {
        problems.require(
            value == 0 || value >= MIN_QUOTA_MB,
            key,
            format!("must be 0 (no quota) or at least {MIN_QUOTA_MB} MiB"),
        );
    }
}

/// Smallest quota accepted (MiB).
const MIN_QUOTA_MB: u64 = 16;

pub(super) fn check_memory(config: &AppConfig, problems: &mut Problems) {
    let memory = &config.memory;
    problems.require(
        (1..=300).contains(&memory.debounce_seconds),
        "memory.debounce_seconds",
        "must be between 1 and 300",
    );
    problems.require(
        (100..=8000).contains(&memory.max_injection_tokens),
        "memory.max_injection_tokens",
        "must be between 100 and 8000",
    );
    problems.require(
        (0.0..=1.0).contains(&memory.fact_confidence_threshold),
        "memory.fact_confidence_threshold",
        "must be between 0 and 1",
    );
    problems.require(
        (10..=500).contains(&memory.max_facts),
        "memory.max_facts",
        "must be between 10 and 500",
    );
    problems.require(
        memory.history_limit <= 100,
        "memory.history_limit",
        "must be between 0 (no history) and 100",
    );
    if let Some(name) = &memory.model_name {
        problems.require(
            config.model(name).is_some(),
            "memory.model_name",
            format!("names no model `{name}`; use a `name` from models or remove the key"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_quotas_are_checked_by_key() {
        let mut config = AppConfig::default();
        let keys = |config: &AppConfig| {
            let mut problems = Problems::default();
            check_sandbox(config, &mut problems);
            problems.0.iter().map(|p| p.to_string()).collect::<Vec<_>>()
        };
        assert!(keys(&config).is_empty(), "the defaults are valid");
        config.sandbox.thread_quota_mb = config.sandbox.data_dir_quota_mb + 1;
        let problems = keys(&config);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("sandbox.thread_quota_mb"),
            "{problems:?}"
        );
        assert!(
            problems[0].contains("sandbox.data_dir_quota_mb"),
            "{problems:?}"
        );
        config.sandbox.thread_quota_mb = 0;
        config.sandbox.data_dir_quota_mb = 3;
        let problems = keys(&config);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("sandbox.data_dir_quota_mb"),
            "{problems:?}"
        );
        config.sandbox.data_dir_quota_mb = 0;
        assert!(keys(&config).is_empty(), "0 turns both off");
    }

    #[test]
    fn memory_keys_are_checked_by_key() {
        let mut config = AppConfig::default();
        let keys = |config: &AppConfig| {
            let mut problems = Problems::default();
            check_memory(config, &mut problems);
            problems.0.iter().map(|p| p.to_string()).collect::<Vec<_>>()
        };
        assert!(keys(&config).is_empty(), "the defaults are valid");
        config.memory.debounce_seconds = 0;
        config.memory.max_injection_tokens = 50;
        config.memory.fact_confidence_threshold = 1.5;
        config.memory.max_facts = 5;
        config.memory.history_limit = 101;
        config.memory.model_name = Some("ghost".into());
        let problems = keys(&config).join("\n");
        for key in [
            "memory.debounce_seconds",
            "memory.max_injection_tokens",
            "memory.fact_confidence_threshold",
            "memory.max_facts",
            "memory.history_limit",
            "memory.model_name",
        ] {
            assert!(problems.contains(key), "{key} in {problems}");
        }
    }

    #[test]
    fn a_token_may_not_belong_to_a_group_chats_owner() {
        let mut config = AppConfig::default();
        config.gateway.api_tokens = vec![crate::config::ApiToken {
            token: crate::config::Secret::new("t".repeat(24)),
            user: "chat-slack-0123456789ab".into(),
        }];
        let mut problems = Problems::default();
        check_gateway(&config, &mut problems);
        let text = problems.0.iter().map(|p| p.to_string()).collect::<String>();
        assert!(
            text.contains("gateway.api_tokens[0].user") && text.contains("chat-"),
            "{text}"
        );
    }

    #[test]
    fn user_id_pattern() {
        assert!(is_user_id("alice_01-x"));
        assert!(!is_user_id(""));
        assert!(!is_user_id("a b"));
        assert!(!is_user_id(&"a".repeat(65)));
    }

    #[test]
    fn bare_log_level_must_be_a_level() {
        for (level, ok) in [
            ("info", true),
            ("DEBUG", true),
            ("antler=debug,info", true),
            ("inf", false),
        ] {
            let mut problems = Problems::default();
            check_log_level(level, &mut problems);
            assert_eq!(problems.0.is_empty(), ok, "{level}");
        }
    }

    #[test]
    fn version_warnings_say_what_to_do() {
        assert!(version_warnings(Some(CONFIG_VERSION)).is_empty());
        let missing = version_warnings(None);
        assert!(missing[0].contains("no config_version"));
        assert!(missing[0].contains(&format!("config_version: {CONFIG_VERSION}")));
        let older = version_warnings(Some(0));
        assert!(older[0].contains("older"));
        assert!(older[0].contains("v1:"));
        let newer = version_warnings(Some(CONFIG_VERSION + 1));
        assert!(newer[0].contains("newer"));
    }
}
