//! Prometheus metrics: one process-wide recorder, named recording functions the rest of the
//! crate calls at its choke points, and `GET /metrics` rendering.
//!
//! Why named functions rather than `metrics::counter!` scattered around: the metric names and
//! labels are an interface (dashboards and alerts depend on them), so they are spelled once,
//! here. Labels never carry user ids, chat ids or message text — only channel, model, tool and
//! outcome names, whose number is bounded by the config.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

mod describe;
use describe::describe;

/// Buckets for durations in seconds: tool calls and model calls are sub-second to minutes.
const SECONDS_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the recorder on first use; `None` if another recorder was installed first (an
/// embedding program's own), in which case our metrics go to that one.
fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
                .ok()?;
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            describe();
            Some(handle)
        })
        .as_ref()
}

/// Starts recording (the daemon calls this at start so counters exist before the first scrape).
pub fn install() {
    let _ = handle();
}

/// Folds the histogram samples recorded since the last call into their buckets.
///
/// Why: the recorder keeps every histogram sample (two per run) in a growing list until it is
/// folded, and only a scrape of `/metrics` or this call does that; the exporter's own upkeep
/// task belongs to its installer, which we don't use. A daemon nobody scrapes grew ~0.5 KiB
/// per run without it. Cheap: a lock per histogram and a walk over the new samples.
pub fn fold_histograms() {
    if let Some(handle) = handle() {
        handle.run_upkeep();
    }
}

/// The Prometheus text exposition of every metric, with gauges sampled now.
pub fn render() -> String {
    sample_process();
    handle().map_or_else(String::new, PrometheusHandle::render)
}

/// Label values that exist before anything happens: with them every series a dashboard or an
/// alert names is on a fresh daemon's `/metrics` at 0, instead of appearing with the first event
/// (a `rate()` or `absent()` over a series that is not there yet says nothing).
#[derive(Clone, Debug, Default)]
pub struct KnownLabels {
    /// Every run stop reason (`StopReason::as_str`).
    pub stop_reasons: Vec<&'static str>,
    /// Every run error code (`ErrorCode::as_str`).
    pub error_codes: Vec<&'static str>,
    /// The configured `models[].name`s.
    pub models: Vec<String>,
    /// The configured tools' names.
    pub tools: Vec<String>,
    /// The enabled channels.
    pub channels: Vec<String>,
}

/// Config reload outcomes (`config_reload`).
const RELOAD_OUTCOMES: &[&str] = &[
    "reloaded",
    "rejected",
    "rolled_back",
    "unreadable",
    "unchanged",
];
/// Reasons a run is refused before it starts (`run_refused`).
const REFUSED_REASONS: &[&str] = &["overloaded"];
/// Bounded queues that can refuse an item (`queue_full`).
const FULL_QUEUES: &[&str] = &["chat_messages"];
/// Queues whose depth is reported (`queue_depth`, `chat_queue_added`).
const DEPTH_QUEUES: &[&str] = &["chat_messages", "memory_updates", "runs_in_flight"];
/// What becomes of approval requests (`approval`): made, then decided one of five ways.
pub const APPROVAL_DECISIONS: &[&str] = &[
    "requested",
    "approved",
    "approved_conversation",
    "denied",
    "timed_out",
    "superseded",
];
/// How scheduled slots end (`schedule_fire`).
pub const SCHEDULE_FIRE_OUTCOMES: &[&str] =
    &["ran", "failed", "skipped_budget", "caught_up", "missed"];
/// What becomes of a voice note to transcribe (`transcription`).
pub const TRANSCRIPTION_OUTCOMES: &[&str] = &["ok", "too_long", "too_large", "failed"];
/// How speaking an answer ends (`speech`).
pub const SPEECH_OUTCOMES: &[&str] = &["ok", "failed"];
/// Caches and the reasons they drop entries (`cache_evictions`).
const EVICTIONS: &[(&str, &str)] = &[("thread_states", "idle")];

/// Creates every series of `known` at 0 (counters, and histograms with no samples).
/// Registering never lowers a value, so calling it again (after a reload) is harmless.
pub fn register_known(known: &KnownLabels) {
    counter!("antler_runs_started_total").increment(0);
    let _ = histogram!("antler_run_duration_seconds");
    for &reason in &known.stop_reasons {
        counter!("antler_runs_finished_total", "reason" => reason).increment(0);
    }
    for &code in &known.error_codes {
        counter!("antler_runs_failed_total", "code" => code).increment(0);
    }
    for &reason in REFUSED_REASONS {
        counter!("antler_runs_refused_total", "reason" => reason).increment(0);
    }
    for &outcome in RELOAD_OUTCOMES {
        counter!("antler_config_reloads_total", "outcome" => outcome).increment(0);
    }
    for &queue in FULL_QUEUES {
        counter!("antler_queue_full_total", "queue" => queue).increment(0);
    }
    for &queue in DEPTH_QUEUES {
        gauge!("antler_queue_depth", "queue" => queue).increment(0.0);
    }
    for &decision in APPROVAL_DECISIONS {
        counter!("antler_approvals_total", "decision" => decision).increment(0);
    }
    for &outcome in SCHEDULE_FIRE_OUTCOMES {
        counter!("antler_schedule_fires_total", "outcome" => outcome).increment(0);
    }
    for &outcome in TRANSCRIPTION_OUTCOMES {
        counter!("antler_transcriptions_total", "outcome" => outcome).increment(0);
    }
    counter!("antler_transcribed_seconds_total").increment(0);
    for &outcome in SPEECH_OUTCOMES {
        counter!("antler_speech_total", "outcome" => outcome).increment(0);
    }
    for &(cache, reason) in EVICTIONS {
        counter!("antler_cache_evictions_total", "cache" => cache, "reason" => reason).increment(0);
    }
    for model in &known.models {
        let _ = histogram!("antler_model_call_duration_seconds", "model" => model.clone());
        for direction in ["input", "output"] {
            counter!("antler_model_tokens_total", "model" => model.clone(), "direction" => direction)
                .increment(0);
        }
    }
    for tool in &known.tools {
        for name in [
            "antler_tool_calls_total",
            "antler_tool_errors_total",
            "antler_guardrail_denials_total",
        ] {
            counter!(name, "tool" => tool.clone()).increment(0);
        }
    }
    for channel in &known.channels {
        for name in [
            "antler_inbound_messages_total",
            "antler_inbound_duplicates_total",
            "antler_outbound_sends_total",
            "antler_outbound_edits_total",
            "antler_outbound_rate_limited_total",
            "antler_dead_letters_total",
            "antler_channel_reconnects_total",
        ] {
            counter!(name, "channel" => channel.clone()).increment(0);
        }
        let _ = histogram!("antler_outbound_retry_wait_seconds", "channel" => channel.clone());
    }
}

/// A transcription's outcome (one of [`TRANSCRIPTION_OUTCOMES`]) and the seconds it heard.
pub fn transcription(outcome: &'static str, seconds: u64) {
    counter!("antler_transcriptions_total", "outcome" => outcome).increment(1);
    counter!("antler_transcribed_seconds_total").increment(seconds);
}

pub fn run_started() {
    counter!("antler_runs_started_total").increment(1);
}

/// `reason` is the run's stop reason (`completed`, `cancelled`, `error`, …).
pub fn run_finished(reason: &'static str, took: Duration) {
    counter!("antler_runs_finished_total", "reason" => reason).increment(1);
    histogram!("antler_run_duration_seconds").record(took.as_secs_f64());
}

/// A run refused before it started (`overloaded`, …).
pub fn run_refused(reason: &'static str) {
    counter!("antler_runs_refused_total", "reason" => reason).increment(1);
}

/// A config reload's outcome (`reloaded`, `rejected`, `rolled_back`, `unreadable`, `unchanged`).
pub fn config_reload(outcome: &'static str) {
    counter!("antler_config_reloads_total", "outcome" => outcome).increment(1);
}

pub fn run_failed(code: &'static str) {
    counter!("antler_runs_failed_total", "code" => code).increment(1);
}

pub fn model_call(model: &str, took: Duration) {
    histogram!("antler_model_call_duration_seconds", "model" => model.to_owned())
        .record(took.as_secs_f64());
}

pub fn model_tokens(model: &str, input: u64, output: u64) {
    counter!("antler_model_tokens_total", "model" => model.to_owned(), "direction" => "input")
        .increment(input);
    counter!("antler_model_tokens_total", "model" => model.to_owned(), "direction" => "output")
        .increment(output);
}

/// What a model call cost in `pricing.currency`, by model and kind of call. A gauge only
/// increased: the metrics crate's counters count whole units, and costs are fractions.
pub fn model_cost(model: &str, kind: &'static str, cost: f64) {
    gauge!("antler_model_cost_total", "model" => model.to_owned(), "kind" => kind).increment(cost);
}

pub fn tool_call(tool: &str, failed: bool) {
    counter!("antler_tool_calls_total", "tool" => tool.to_owned()).increment(1);
    if failed {
        counter!("antler_tool_errors_total", "tool" => tool.to_owned()).increment(1);
    }
}

/// An approval request made (`requested`) or settled (`approved`, `approved_conversation`,
/// `denied`, `timed_out`, `superseded`: `agent_api::approval::outcome_label`); counted where the
/// store records it, once per request.
pub fn approval(decision: &'static str) {
    counter!("antler_approvals_total", "decision" => decision).increment(1);
}

/// A scheduled slot ended (one of [`SCHEDULE_FIRE_OUTCOMES`]), counted by whoever recorded it.
pub fn schedule_fire(outcome: &'static str) {
    counter!("antler_schedule_fires_total", "outcome" => outcome).increment(1);
}

pub fn guardrail_denial(tool: &str) {
    counter!("antler_guardrail_denials_total", "tool" => tool.to_owned()).increment(1);
}

pub fn inbound(channel: &str) {
    counter!("antler_inbound_messages_total", "channel" => channel.to_owned()).increment(1);
}

pub fn inbound_duplicate(channel: &str) {
    counter!("antler_inbound_duplicates_total", "channel" => channel.to_owned()).increment(1);
}

pub fn outbound_send(channel: &str) {
    counter!("antler_outbound_sends_total", "channel" => channel.to_owned()).increment(1);
}

pub fn outbound_edit(channel: &str) {
    counter!("antler_outbound_edits_total", "channel" => channel.to_owned()).increment(1);
}

pub fn rate_limited(channel: &str, wait: Duration) {
    counter!("antler_outbound_rate_limited_total", "channel" => channel.to_owned()).increment(1);
    histogram!("antler_outbound_retry_wait_seconds", "channel" => channel.to_owned())
        .record(wait.as_secs_f64());
}

/// An answer spoken (`ok`) or left as text because the speech service failed (`failed`).
pub fn speech(outcome: &'static str) {
    counter!("antler_speech_total", "outcome" => outcome).increment(1);
}

pub fn dead_letter(channel: &str) {
    counter!("antler_dead_letters_total", "channel" => channel.to_owned()).increment(1);
}

pub fn reconnect(channel: &str) {
    counter!("antler_channel_reconnects_total", "channel" => channel.to_owned()).increment(1);
}

pub fn channel_health(channel: &str, healthy: bool) {
    gauge!("antler_channel_healthy", "channel" => channel.to_owned()).set(if healthy {
        1.0
    } else {
        0.0
    });
}

pub fn leases_held(count: usize) {
    gauge!("antler_leases_held").set(count as f64);
}

pub fn lease_takeover(kind: &str) {
    counter!("antler_lease_takeovers_total", "kind" => kind.to_owned()).increment(1);
}

pub fn claim_conflict(kind: &str) {
    counter!("antler_claim_conflicts_total", "kind" => kind.to_owned()).increment(1);
}

/// Counts `count` entries dropped from `cache` (`thread_states`) for `reason` (`idle`).
pub fn cache_evictions(cache: &'static str, reason: &'static str, count: usize) {
    if count > 0 {
        counter!("antler_cache_evictions_total", "cache" => cache, "reason" => reason)
            .increment(count as u64);
    }
}

/// A chat message entered its chat's queue (`antler_queue_depth{queue="chat_messages"}`).
pub fn chat_queue_added() {
    gauge!("antler_queue_depth", "queue" => "chat_messages").increment(1.0);
}

/// A chat's worker took a message from its queue.
pub fn chat_queue_taken() {
    gauge!("antler_queue_depth", "queue" => "chat_messages").decrement(1.0);
}

/// A bounded queue refused an item (`queue` is a fixed name such as `chat_messages`).
pub fn queue_full(queue: &'static str) {
    counter!("antler_queue_full_total", "queue" => queue).increment(1);
}

/// Sets a named queue's depth (`queue` is a fixed name such as `memory_updates`).
pub fn queue_depth(queue: &'static str, depth: usize) {
    gauge!("antler_queue_depth", "queue" => queue).set(depth as f64);
}

fn sample_process() {
    if let Some(rss) = resident_bytes() {
        gauge!("antler_process_resident_bytes").set(rss as f64);
    }
}

/// Resident set size from `/proc/self/status` (`VmRSS`, in KiB there).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

/// Registers every outcome of the configured webhook endpoints at 0.
pub fn register_webhook_endpoints(endpoints: &[String]) {
    for endpoint in endpoints {
        for outcome in [
            "accepted",
            "duplicate",
            "unauthorized",
            "too_large",
            "invalid",
        ] {
            counter!("antler_webhook_deliveries_total", "endpoint" => endpoint.clone(), "outcome" => outcome)
                .increment(0);
        }
    }
}

/// A delivery to a configured webhook endpoint, by how the route answered it (one of the
/// outcomes registered above).
pub fn webhook_delivery(endpoint: &str, outcome: &'static str) {
    counter!("antler_webhook_deliveries_total", "endpoint" => endpoint.to_owned(), "outcome" => outcome)
        .increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_metrics_appear_in_the_exposition() {
        install();
        run_started();
        run_finished("completed", Duration::from_millis(40));
        tool_call("bash", true);
        inbound("telegram");
        chat_queue_added();
        queue_full("chat_messages");
        cache_evictions("thread_states", "idle", 2);
        let text = render();
        assert!(text.contains("antler_runs_started_total"), "{text}");
        assert!(
            text.contains("antler_runs_finished_total{reason=\"completed\"}"),
            "{text}"
        );
        assert!(
            text.contains("antler_run_duration_seconds_bucket"),
            "{text}"
        );
        assert!(
            text.contains("antler_tool_errors_total{tool=\"bash\"}"),
            "{text}"
        );
        assert!(
            text.contains("antler_inbound_messages_total{channel=\"telegram\"}"),
            "{text}"
        );
        assert!(text.contains("antler_process_resident_bytes"), "{text}");
        for name in [
            "antler_queue_depth{queue=\"chat_messages\"}",
            "antler_queue_full_total{queue=\"chat_messages\"}",
            "antler_cache_evictions_total{cache=\"thread_states\",reason=\"idle\"}",
        ] {
            assert!(text.contains(name), "{name} missing from {text}");
        }
    }

    #[test]
    fn known_labels_start_at_zero_and_registering_again_keeps_counts() {
        install();
        let known = KnownLabels {
            models: vec!["zero-model".into()],
            tools: vec!["zero-tool".into()],
            channels: vec!["zero-channel".into()],
            ..Default::default()
        };
        register_known(&known);
        inbound("zero-channel");
        register_known(&known);
        let text = render();
        for needle in [
            "antler_inbound_messages_total{channel=\"zero-channel\"} 1",
            "antler_inbound_duplicates_total{channel=\"zero-channel\"} 0",
            "antler_outbound_sends_total{channel=\"zero-channel\"} 0",
            "antler_outbound_edits_total{channel=\"zero-channel\"} 0",
            "antler_outbound_rate_limited_total{channel=\"zero-channel\"} 0",
            "antler_dead_letters_total{channel=\"zero-channel\"} 0",
            "antler_channel_reconnects_total{channel=\"zero-channel\"} 0",
            "antler_outbound_retry_wait_seconds_count{channel=\"zero-channel\"} 0",
            "antler_model_call_duration_seconds_count{model=\"zero-model\"} 0",
            "antler_model_tokens_total{model=\"zero-model\",direction=\"output\"} 0",
            "antler_tool_errors_total{tool=\"zero-tool\"} 0",
        ] {
            assert!(text.contains(needle), "{needle} missing from {text}");
        }
    }

    /// Folding must keep every sample: the counts a scrape shows after it are what was recorded.
    #[test]
    fn folded_histogram_samples_still_count() {
        install();
        let count_of = |text: &str| -> u64 {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix("antler_model_call_duration_seconds_count{model=\"fold-test\"} ")
                })
                .map_or(0, |n| n.trim().parse().unwrap_or(0))
        };
        for _ in 0..5 {
            model_call("fold-test", Duration::from_millis(30));
        }
        fold_histograms();
        model_call("fold-test", Duration::from_secs(2));
        fold_histograms();
        let text = render();
        assert_eq!(count_of(&text), 6, "{text}");
        assert!(
            text.contains(
                "antler_model_call_duration_seconds_bucket{model=\"fold-test\",le=\"0.05\"} 5"
            ),
            "{text}"
        );
    }

    /// Every decision label is on `/metrics` from the start, and a settled request counts under
    /// its own. Other tests in this process may count too, hence "at least one more".
    #[test]
    fn approvals_are_counted_by_decision() {
        install();
        register_known(&KnownLabels::default());
        let value_of = |text: &str, label: &str| -> u64 {
            let series = format!("antler_approvals_total{{decision=\"{label}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(series.as_str()))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("{series} missing from {text}"))
        };
        let before = render();
        for &label in APPROVAL_DECISIONS {
            value_of(&before, label);
        }
        approval("requested");
        approval("approved_conversation");
        let after = render();
        for label in ["requested", "approved_conversation"] {
            assert!(
                value_of(&after, label) > value_of(&before, label),
                "{label}: {after}"
            );
        }
    }

    /// Every scheduled-slot outcome is on `/metrics` from the start, and counts under its own.
    #[test]
    fn schedule_fires_are_counted_by_outcome() {
        install();
        register_known(&KnownLabels::default());
        let value_of = |text: &str, label: &str| -> u64 {
            let series = format!("antler_schedule_fires_total{{outcome=\"{label}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(series.as_str()))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("{series} missing from {text}"))
        };
        let before = render();
        for &label in SCHEDULE_FIRE_OUTCOMES {
            value_of(&before, label);
        }
        schedule_fire("caught_up");
        assert!(value_of(&render(), "caught_up") > value_of(&before, "caught_up"));
    }
}
