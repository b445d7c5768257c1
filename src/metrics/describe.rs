//! The help text of every metric, as `/metrics` shows it (`# HELP`): one line per name,
//! registered once when the recorder is installed.

pub(super) fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!("antler_runs_started_total", "Agent runs started");
    describe_counter!(
        "antler_runs_finished_total",
        "Agent runs finished, by stop reason"
    );
    describe_counter!(
        "antler_runs_failed_total",
        "Agent runs that ended in an error, by code"
    );
    describe_histogram!("antler_run_duration_seconds", "Wall time of a run");
    describe_counter!(
        "antler_runs_refused_total",
        "Runs refused before starting (memory past gateway.max_rss_mb), by reason"
    );
    describe_counter!(
        "antler_config_reloads_total",
        "Config reloads, by outcome (rejected: the running config stays; rolled_back: a restarted channel did not come up and the previous config was restored)"
    );
    describe_histogram!(
        "antler_model_call_duration_seconds",
        "Time to the end of a model's streamed answer, by model"
    );
    describe_counter!(
        "antler_model_tokens_total",
        "Tokens used, by model and direction"
    );
    describe_gauge!(
        "antler_model_cost_total",
        "Model calls' cost in pricing.currency, by model and kind of call (only increases)"
    );
    describe_counter!("antler_tool_calls_total", "Tool calls, by tool");
    describe_counter!(
        "antler_webhook_deliveries_total",
        "Deliveries to webhook endpoints, by endpoint and outcome"
    );
    describe_counter!(
        "antler_approvals_total",
        "Approval requests (requested) and how they ended, by decision"
    );
    describe_counter!(
        "antler_schedule_fires_total",
        "Scheduled slots by outcome (ran, failed, skipped_budget, caught_up: a missed slot run by its catch_up policy, missed: recorded without a run)"
    );
    describe_counter!(
        "antler_tool_errors_total",
        "Tool calls that returned an error, by tool"
    );
    describe_counter!(
        "antler_guardrail_denials_total",
        "Tool calls denied by the guardrail"
    );
    describe_counter!(
        "antler_inbound_messages_total",
        "Chat messages received, by channel"
    );
    describe_counter!(
        "antler_inbound_duplicates_total",
        "Redelivered chat events dropped by the inbound journal, by channel"
    );
    describe_counter!(
        "antler_speech_total",
        "Answers sent to the speech service (voice.speech), by outcome: ok, failed"
    );
    describe_counter!("antler_outbound_sends_total", "Messages sent, by channel");
    describe_counter!("antler_outbound_edits_total", "Message edits, by channel");
    describe_counter!(
        "antler_outbound_rate_limited_total",
        "Platform 429 answers, by channel"
    );
    describe_histogram!(
        "antler_outbound_retry_wait_seconds",
        "Waits imposed by platform rate limits (429 retry-after), by channel"
    );
    describe_counter!(
        "antler_dead_letters_total",
        "Replies given up on, by channel"
    );
    describe_counter!(
        "antler_channel_reconnects_total",
        "Platform reconnects, by channel"
    );
    describe_gauge!(
        "antler_channel_healthy",
        "1 while a channel is healthy, by channel"
    );
    describe_counter!(
        "antler_queue_full_total",
        "Items a bounded queue refused (the chat was told to wait), by queue"
    );
    describe_counter!(
        "antler_cache_evictions_total",
        "Entries dropped from a memory cache, by cache and reason"
    );
    describe_gauge!(
        "antler_process_resident_bytes",
        "Resident set size of the daemon"
    );
    describe_gauge!(
        "antler_leases_held",
        "Leases this instance holds (its own name, transports, chats, jobs)"
    );
    describe_counter!(
        "antler_lease_takeovers_total",
        "Leases taken from an instance that stopped renewing them, by kind"
    );
    describe_counter!(
        "antler_claim_conflicts_total",
        "Attempts to take a lease another instance held, by kind"
    );
    describe_counter!(
        "antler_transcriptions_total",
        "Voice notes to transcribe, by outcome"
    );
    describe_counter!(
        "antler_transcribed_seconds_total",
        "Seconds of audio transcribed"
    );
}
