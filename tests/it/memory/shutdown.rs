//! SIGTERM while the memory model hangs and many updates are queued: the daemon stops within
//! the bound its shutdown log promises (`at_most`), and the updates stay queued for the next
//! start instead of each waiting out its model call.

use std::time::{Duration, Instant};

use antler_test_support::{FakeOpenAi, Reply};

use crate::daemon::{Setup, TOKEN_A};

/// `shutdown_grace_seconds` (5, as `Setup` writes it) + 5 s for cancelled runs + the 30-s
/// memory flush + 2 × 5 s for channels and HTTP: what `at_most=` says for this config.
const DOCUMENTED_BOUND: Duration = Duration::from_secs(50);
const QUEUED: usize = 80;

/// `setup`'s config (`original`) with a second model, `memory`, at `url` (with the shipped
/// 600-s timeout) as the memory model, and `debounce` seconds of quiet before an update runs.
fn with_memory_model(setup: &Setup, original: &str, url: &str, debounce: u64) {
    let memory_model = format!(
        "  - name: memory\n    provider: openai\n    model: fake-model\n    base_url: {url}\n    timeout: 600\nllm_call:"
    );
    let yaml = original.replacen("llm_call:", &memory_model, 1)
        + &format!("\nmemory:\n  model_name: memory\n  debounce_seconds: {debounce}\n");
    std::fs::write(&setup.config_path, yaml).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_the_memory_model_hanging_stops_within_the_bound_and_keeps_the_updates() {
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|_| Reply::text("Noted."));
    // Takes every memory update and never finishes answering it.
    let hanging = FakeOpenAi::start().await;
    hanging
        .script_memory_updates()
        .respond_with(|_| Reply::text("{}").with_delay(Duration::from_secs(3600)));
    let setup = Setup::new(&fake.base_url(), "");
    let original = std::fs::read_to_string(&setup.config_path).unwrap();
    with_memory_model(&setup, &original, &hanging.base_url(), 1);
    let mut daemon = setup.start();
    for index in 0..QUEUED {
        let thread = daemon.create_thread(TOKEN_A).await;
        let answer = daemon
            .run_wait(TOKEN_A, &thread, &format!("I have {index} cats"))
            .await;
        assert_eq!(answer.status(), 200);
    }
    // The worker is inside an update (the one-second debounce has long passed).
    let deadline = Instant::now() + Duration::from_secs(60);
    while hanging.responded() == 0 {
        assert!(Instant::now() < deadline, "no memory update was started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let stopping = Instant::now();
    daemon.signal("TERM");
    let exit = daemon.wait_exit(DOCUMENTED_BOUND);
    let took = stopping.elapsed();
    assert_eq!(exit, Some(0), "still running {took:?} after SIGTERM");
    eprintln!("stopped {took:?} after SIGTERM");

    // The next start finds every update still queued (the model now refuses at once, so this
    // daemon's own stop is quick).
    let refused = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", listener.local_addr().unwrap())
    };
    with_memory_model(&setup, &original, &refused, 300);
    let mut restarted = setup.start();
    let metrics = restarted.metrics().await;
    let depth = format!("antler_queue_depth{{queue=\"memory_updates\"}} {QUEUED}");
    assert!(metrics.contains(&depth), "{depth} missing from\n{metrics}");
    restarted.signal("TERM");
    assert_eq!(restarted.wait_exit(Duration::from_secs(60)), Some(0));
}
