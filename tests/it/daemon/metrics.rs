//! `GET /metrics` on the real daemon: Prometheus text with run, model, tool and process
//! figures after real runs, open without a token like the probes, and free of user ids.

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::json;

use super::{Setup, TOKEN_A};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_runs_tools_and_tokens_without_naming_users() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call("ls", json!({"path": "/mnt/user-data"})).usage(30, 5))
        .push(Reply::text("Done.").usage(40, 3));
    // Only the run's own calls: a generated title is a model call of its own, made in the
    // background after the answer, so whether it is counted yet would be a race.
    let setup = Setup::new(&fake.base_url(), "title:\n  enabled: false\n");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let answer = daemon.run_wait(TOKEN_A, &thread, "list files").await;
    assert_eq!(answer.status(), 200);

    // No bearer token: scrapers do not carry one.
    let response = daemon
        .http
        .get(daemon.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let text = response.text().await.unwrap();
    for needle in [
        "antler_runs_started_total 1",
        "antler_runs_finished_total{reason=\"completed\"} 1",
        "antler_run_duration_seconds_count 1",
        "antler_model_call_duration_seconds_count{model=\"fake\"} 2",
        "antler_model_tokens_total{model=\"fake\",direction=\"input\"} 70",
        "antler_tool_calls_total{tool=\"ls\"} 1",
        "antler_queue_depth{queue=\"runs_in_flight\"} 0",
        "antler_process_resident_bytes ",
        "# HELP antler_runs_started_total",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }
    assert!(!text.contains("alice") && !text.contains(&thread), "{text}");
    // Channels that are not configured are not reported as unhealthy.
    assert!(
        !text.contains("antler_channel_healthy{channel=\"slack\"}"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_memory_ceiling_new_runs_are_refused_politely_without_a_model_call() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    // Any daemon uses more than 1 MiB: the ceiling is reached from the start.
    let yaml = std::fs::read_to_string(&setup.config_path).unwrap();
    let yaml = yaml.replacen("gateway:\n", "gateway:\n  max_rss_mb: 1\n", 1);
    std::fs::write(&setup.config_path, yaml).unwrap();
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let refused = daemon.run_wait(TOKEN_A, &thread, "hi").await;
    let message = super::Daemon::expect_error(
        refused,
        503,
        "overloaded",
        &["short of memory", "limit 1 MiB", "try again"],
    )
    .await;
    assert!(!message.contains("panic"), "{message}");
    assert!(fake.requests().is_empty(), "no model call was made");
    let text = daemon.metrics().await;
    assert!(
        text.contains("antler_runs_refused_total{reason=\"overloaded\"} 1"),
        "{text}"
    );
}

/// Alerts and dashboards need their series before the first event: a fresh daemon shows every
/// counter family with its known labels (stop reasons, error codes, the configured model and
/// tools, reload outcomes, queues) at 0, and the histograms with no samples.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_daemon_shows_every_known_series_at_zero() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let text = daemon.metrics().await;
    let mut expected = vec![
        "antler_runs_started_total 0".to_string(),
        "antler_run_duration_seconds_count 0".to_string(),
        "antler_runs_refused_total{reason=\"overloaded\"} 0".to_string(),
        "antler_queue_full_total{queue=\"chat_messages\"} 0".to_string(),
        "antler_queue_depth{queue=\"chat_messages\"} 0".to_string(),
        "antler_cache_evictions_total{cache=\"thread_states\",reason=\"idle\"} 0".to_string(),
        "antler_model_call_duration_seconds_count{model=\"fake\"} 0".to_string(),
        "antler_model_tokens_total{model=\"fake\",direction=\"input\"} 0".to_string(),
        "antler_model_tokens_total{model=\"fake\",direction=\"output\"} 0".to_string(),
    ];
    for reason in [
        "completed",
        "interrupted",
        "recursion_limit",
        "cancelled",
        "error",
        "loop_capped",
        "token_capped",
        "subagent_limit_capped",
    ] {
        expected.push(format!(
            "antler_runs_finished_total{{reason=\"{reason}\"}} 0"
        ));
    }
    for code in [
        "model_unavailable",
        "model_timeout",
        "model_error",
        "middleware_error",
        "state_error",
        "checkpoint_error",
        "recursion_limit",
        "panic",
    ] {
        expected.push(format!("antler_runs_failed_total{{code=\"{code}\"}} 0"));
    }
    for outcome in ["reloaded", "rejected", "rolled_back", "unreadable"] {
        expected.push(format!(
            "antler_config_reloads_total{{outcome=\"{outcome}\"}} 0"
        ));
    }
    // The shipped default tools and the one every agent has.
    for tool in ["bash", "ls", "read_file", "write_file", "present_files"] {
        for family in [
            "antler_tool_calls_total",
            "antler_tool_errors_total",
            "antler_guardrail_denials_total",
        ] {
            expected.push(format!("{family}{{tool=\"{tool}\"}} 0"));
        }
    }
    for needle in &expected {
        assert!(
            text.contains(needle.as_str()),
            "{needle:?} missing from\n{text}"
        );
    }
    let samples = text
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .count();
    assert!(samples > 60, "only {samples} samples:\n{text}");
}
