//! The limits a run works within, checked at load with messages naming the key: recursion and
//! retries, loop detection, the token budget, titles, summarization, prices, the guardrail's
//! policy service and uploads.

use crate::config::AppConfig;
use crate::config::validate::{Problems, check_memory, is_http_url};

/// Every limit, each group in its own step so a new key lands next to its kin.
pub(super) fn check_limits(config: &AppConfig, problems: &mut Problems) {
    check_run_limits(config, problems);
    check_loop_detection(config, problems);
    check_token_budget(config, problems);
    check_title(config, problems);
    check_memory(config, problems);
    check_summarization(config, problems);
    check_pricing(config, problems);
    check_guardrails(config, problems);
    check_uploads(config, problems);
}

/// Steps per run and model-call attempts: a run must be able to take one step and make one call.
fn check_run_limits(config: &AppConfig, problems: &mut Problems) {
    problems.require(
        config.max_recursion_limit >= 1,
        "max_recursion_limit",
        "must be at least 1",
    );
    problems.require(
        (1..=config.max_recursion_limit.max(1)).contains(&config.recursion_limit),
        "recursion_limit",
        format!(
            "must be between 1 and max_recursion_limit ({})",
            config.max_recursion_limit
        ),
    );
    problems.require(
        config.llm_call.retry_max_attempts >= 1,
        "llm_call.retry_max_attempts",
        "must be at least 1 (it counts the first attempt)",
    );
}

/// A hard limit under its warning would stop a loop before the model was ever warned.
fn check_loop_detection(config: &AppConfig, problems: &mut Problems) {
    let loops = &config.loop_detection;
    problems.require(
        loops.hard_limit >= loops.warn_threshold,
        "loop_detection.hard_limit",
        format!("must be at least warn_threshold ({})", loops.warn_threshold),
    );
    problems.require(
        loops.tool_freq_hard_limit >= loops.tool_freq_warn,
        "loop_detection.tool_freq_hard_limit",
        format!("must be at least tool_freq_warn ({})", loops.tool_freq_warn),
    );
    for (tool, limits) in &loops.tool_freq_overrides {
        problems.require(
            limits.hard_limit >= limits.warn,
            format!("loop_detection.tool_freq_overrides.{tool}.hard_limit"),
            format!("must be at least warn ({})", limits.warn),
        );
    }
}

/// The budget's thresholds are fractions of `max_tokens`; the stop must not come before the warning.
fn check_token_budget(config: &AppConfig, problems: &mut Problems) {
    let budget = &config.token_budget;
    problems.require(
        budget.max_tokens >= 1000,
        "token_budget.max_tokens",
        "must be at least 1000",
    );
    problems.require(
        budget.warn_threshold > 0.0,
        "token_budget.warn_threshold",
        "must be greater than 0 (a fraction of the budget, e.g. 0.8)",
    );
    problems.require(
        budget.hard_stop_threshold >= budget.warn_threshold,
        "token_budget.hard_stop_threshold",
        format!(
            "must be at least warn_threshold ({})",
            budget.warn_threshold
        ),
    );
}

/// Title sizes within what chat lists show, and a title model that exists.
fn check_title(config: &AppConfig, problems: &mut Problems) {
    let title = &config.title;
    problems.require(
        (1..=20).contains(&title.max_words),
        "title.max_words",
        "must be between 1 and 20",
    );
    problems.require(
        (10..=200).contains(&title.max_chars),
        "title.max_chars",
        "must be between 10 and 200",
    );
    if let Some(name) = &title.model_name {
        problems.require(
            config.model(name).is_some(),
            "title.model_name",
            format!("names no model `{name}`; use a `name` from models or remove the key"),
        );
    }
}

/// A summary model that exists, triggers that can fire, and a `keep` that keeps something.
fn check_summarization(config: &AppConfig, problems: &mut Problems) {
    let summarization = &config.summarization;
    if let Some(name) = &summarization.model_name {
        problems.require(
            config.model(name).is_some(),
            "summarization.model_name",
            format!("names no model `{name}`; use a `name` from models or remove the key"),
        );
    }
    problems.require(
        summarization.trigger.iter().all(|t| t.value > 0.0),
        "summarization.trigger",
        "every trigger value must be greater than 0 (tokens, messages, or a fraction like 0.8)",
    );
    problems.require(
        summarization.keep.measure != crate::config::summarization::ContextMeasure::Fraction
            && summarization.keep.value >= 1.0,
        "summarization.keep",
        "must be `{type: messages, value: N}` or `{type: tokens, value: N}` with N ≥ 1",
    );
}

/// Prices turn tokens into money and budgets stop runs: a negative price would subtract, a
/// zero budget would refuse every call.
fn check_pricing(config: &AppConfig, problems: &mut Problems) {
    let found = config.pricing.problems().into_iter();
    for (key, message) in found.chain(config.budgets.problems()) {
        problems.require(false, key, message);
    }
}

/// The policy service is called over HTTP; anything else would fail every tool call later.
fn check_guardrails(config: &AppConfig, problems: &mut Problems) {
    if let Some(url) = &config.guardrails.policy_url {
        problems.require(
            is_http_url(url),
            "guardrails.policy_url",
            "must be an http:// or https:// URL of the policy service, or be removed",
        );
    }
}

/// Upload caps of 0 would refuse every file with a message about its size.
fn check_uploads(config: &AppConfig, problems: &mut Problems) {
    let uploads = &config.uploads;
    problems.require(
        uploads.max_files > 0,
        "uploads.max_files",
        "must be greater than 0",
    );
    problems.require(
        uploads.max_file_size > 0,
        "uploads.max_file_size",
        "must be greater than 0 (bytes)",
    );
    problems.require(
        uploads.max_total_size > 0,
        "uploads.max_total_size",
        "must be greater than 0 (bytes)",
    );
}
