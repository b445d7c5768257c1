//! Hot reload on the real binary through SIGHUP (what `systemctl reload` sends) and the file
//! poll: a channel credential the platform refuses rolls the whole edit back while the old bot
//! keeps answering; memory settings apply to the next update; a run in flight finishes on the
//! config it started with and the next run uses the new one.

use std::path::Path;
use std::time::{Duration, Instant};

use antler_test_support::{FAKE_BOT_TOKEN, FakeOpenAi, FakeTelegram, Gate, Reply, private_chat};
use serde_json::{Value, json};

use super::cli::antler;
use super::systemd::NotifySocket;
use super::{Daemon, Setup, TOKEN_A, log_lines};

const WAIT: Duration = Duration::from_secs(60);
/// What the config watcher logs (at TRACE) when a check finds the file as it was.
const UNCHANGED: &str = "The config file is unchanged";

fn telegram_section(fake: &FakeTelegram, allowed_users: &str) -> String {
    format!(
        "channels:\n  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {api}\n    poll_timeout: 1\n    allowed_users: [{allowed_users}]\n",
        api = fake.api_url()
    )
}

/// Rewrites the config file with each `(from, to)` applied.
fn edit(path: &Path, changes: &[(&str, &str)]) {
    let mut text = std::fs::read_to_string(path).expect("read config");
    for (from, to) in changes {
        assert!(
            text.contains(from),
            "{from:?} is not in the config:\n{text}"
        );
        text = text.replace(from, to);
    }
    std::fs::write(path, text).expect("write config");
}

/// Polls `/readyz` until `check` holds and returns that answer.
async fn readyz_until(daemon: &Daemon, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let ready = daemon.readyz().await;
        if check(&ready) {
            return ready;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {ready}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn outcome(ready: &Value) -> &str {
    ready["reload"]["outcome"].as_str().unwrap_or("")
}

fn telegram_state(ready: &Value) -> &str {
    ready["channels"]["telegram"]["state"]
        .as_str()
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_channel_credential_rolls_the_whole_edit_back() {
    let telegram = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let setup = Setup::new(&model.base_url(), &telegram_section(&telegram, "1, 2"));
    let notify_path = setup.dir.path().join("notify.sock");
    let mut notify = NotifySocket::bind(&notify_path);
    // The watcher's checks of the unchanged file are logged at TRACE.
    let log = setup.dir.path().join("daemon.log");
    let daemon = Daemon::spawn(
        &setup.config_path,
        &[
            ("NOTIFY_SOCKET", notify_path.to_str().unwrap()),
            ("RUST_LOG", "warn,antler::config::watch=trace"),
        ],
        Some(&log),
    );
    telegram
        .wait_for(WAIT, "the first poll", |f| {
            !f.calls_of("getUpdates").is_empty()
        })
        .await;

    // One edit: a token the platform refuses, and user 2 dropped from the allowlist.
    let token = format!("bot_token: \"{FAKE_BOT_TOKEN}\"");
    edit(
        &setup.config_path,
        &[
            (token.as_str(), "bot_token: \"999:REFUSED\""),
            ("allowed_users: [1, 2]", "allowed_users: [1]"),
        ],
    );
    daemon.signal("HUP");
    let ready = readyz_until(&daemon, "the rollback", |r| outcome(r) == "rolled_back").await;
    let rolled_back_at = ready["reload"]["at"].clone();
    let detail = ready["reload"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("telegram: ") && detail.contains("401"),
        "{detail}"
    );
    assert!(
        !detail.contains("REFUSED"),
        "no token in the detail: {detail}"
    );
    // systemd heard READY for the reload at once; the rollback follows in the unit's STATUS.
    let status = notify.wait_until("a rollback STATUS", |line| {
        line.starts_with("STATUS=config change rolled back, ") && line.contains("telegram: ")
    });
    assert!(!status.contains("REFUSED"), "{status}");
    readyz_until(&daemon, "the old bot to reconnect", |r| {
        telegram_state(r) == "running"
    })
    .await;
    assert_eq!(
        telegram.calls_of("getMe").len(),
        3,
        "at start, with the refused token, with the old token again"
    );

    // The old bot answers user 2: nothing of the failed edit stayed.
    model.push(Reply::text("old bot, still yours"));
    telegram.send_text(private_chat(2), 2, "are you there?");
    telegram
        .wait_for(WAIT, "the old bot's answer to user 2", |f| {
            f.chat_texts(2).iter().any(|t| t == "old bot, still yours")
        })
        .await;

    let metrics = daemon.metrics().await;
    assert!(
        metrics.contains("antler_config_reloads_total{outcome=\"rolled_back\"} 1"),
        "{metrics}"
    );
    let status = antler(&setup.config_path, &["status"], "").await;
    let out = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{out}");
    assert!(out.contains("reload    rolled_back 20"), "{out}");
    assert!(out.contains("telegram  running"), "{out}");

    // The file still holds the refused token, but it is read again only when it changes (or on
    // SIGHUP): no reconnect loop. Two more checks of the file (the second one began after the
    // rollback) find it unchanged, and nothing was applied meanwhile.
    let seen = log_lines(&log, UNCHANGED, 0).await.len();
    log_lines(&log, UNCHANGED, seen + 2).await;
    assert_eq!(telegram.calls_of("getMe").len(), 3, "no retry of the edit");
    let ready = readyz_until(&daemon, "the same record", |_| true).await;
    assert_eq!(outcome(&ready), "rolled_back");
    assert_eq!(ready["reload"]["at"], rolled_back_at, "no reload since");

    // A fixed edit (the right token, a new poll timeout: a restart that works) applies and stays.
    edit(
        &setup.config_path,
        &[
            ("bot_token: \"999:REFUSED\"", token.as_str()),
            ("poll_timeout: 1", "poll_timeout: 2"),
        ],
    );
    readyz_until(&daemon, "the fixed edit", |r| outcome(r) == "reloaded").await;
    telegram
        .wait_for(WAIT, "the restart with the fixed edit", |f| {
            f.calls_of("getMe").len() == 4
        })
        .await;
    readyz_until(&daemon, "the channel", |r| telegram_state(r) == "running").await;
    model.push(Reply::text("new settings"));
    telegram.send_text(private_chat(1), 1, "hello");
    telegram
        .wait_for(WAIT, "an answer under the fixed edit", |f| {
            f.chat_texts(1).iter().any(|t| t == "new settings")
        })
        .await;
    let ready = readyz_until(&daemon, "the record", |_| true).await;
    assert_eq!(outcome(&ready), "reloaded", "the fixed edit was kept");
}

/// The texts of the memory-update requests the fake answered so far.
fn memory_requests(model: &FakeOpenAi) -> Vec<String> {
    model
        .background_requests()
        .iter()
        .map(|request| request.body.to_string())
        .filter(|body| body.contains("You are a memory management system"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_memory_debounce_applies_to_new_work_and_queued_updates_still_run() {
    let model = FakeOpenAi::start().await;
    let setup = Setup::new(&model.base_url(), "memory:\n  debounce_seconds: 300\n");
    let mut daemon = Daemon::spawn(&setup.config_path, &[], None);
    model.push(Reply::text("Noted."));
    let first = daemon.create_thread(TOKEN_A).await;
    let answer = daemon
        .run_wait(TOKEN_A, &first, "I drink tea every morning")
        .await;
    assert_eq!(answer.status(), 200);

    edit(
        &setup.config_path,
        &[("debounce_seconds: 300", "debounce_seconds: 1")],
    );
    daemon.signal("HUP");
    readyz_until(&daemon, "the reload", |r| outcome(r) == "reloaded").await;
    model.push(Reply::text("Noted too."));
    let second = daemon.create_thread(TOKEN_A).await;
    let answer = daemon.run_wait(TOKEN_A, &second, "I cycle to work").await;
    assert_eq!(answer.status(), 200);
    // Far less than the old 300 s, however slow the machine.
    let deadline = Instant::now() + WAIT;
    while !memory_requests(&model)
        .iter()
        .any(|body| body.contains("I cycle to work"))
    {
        assert!(
            Instant::now() < deadline,
            "the second thread's memory update did not run within the new 1 s debounce"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !memory_requests(&model)
            .iter()
            .any(|body| body.contains("I drink tea")),
        "the first thread keeps the 300 s it was queued with"
    );

    // Queued before the reload, it is not dropped: the shutdown flush runs it.
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)), Some(0));
    assert!(
        memory_requests(&model)
            .iter()
            .any(|body| body.contains("I drink tea")),
        "the update queued before the reload ran at shutdown"
    );
}

/// The `model` field of each scripted request whose conversation holds `text`.
fn models_asked(model: &FakeOpenAi, text: &str) -> Vec<String> {
    model
        .requests()
        .iter()
        .filter(|body| body.to_string().contains(text))
        .map(|body| body["model"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_keeps_its_config_and_the_next_run_uses_the_reloaded_one() {
    let model = FakeOpenAi::start().await;
    let setup = Setup::new(&model.base_url(), "");
    let daemon = Daemon::spawn(&setup.config_path, &[], None);
    // The first step asks for a tool, and its answer waits until the reload is in.
    let reloaded = Gate::new();
    model
        .push(Reply::tool_call("ls", json!({"path": "/mnt/user-data"})).hold_after(0, &reloaded))
        .push(Reply::text("Listed the files."));
    let thread = daemon.create_thread(TOKEN_A).await;
    let reload = async {
        let deadline = Instant::now() + WAIT;
        while models_asked(&model, "which files").is_empty() {
            assert!(Instant::now() < deadline, "the run never called the model");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        edit(
            &setup.config_path,
            &[("model: fake-model\n", "model: fake-model-2\n")],
        );
        daemon.signal("HUP");
        readyz_until(&daemon, "the reload", |r| outcome(r) == "reloaded").await;
        let at = Instant::now();
        reloaded.open();
        at
    };
    let run = async {
        let answer = daemon.run_wait(TOKEN_A, &thread, "which files").await;
        (answer, Instant::now())
    };
    let ((answer, answered), reloaded) = tokio::join!(run, reload);
    assert!(
        reloaded < answered,
        "the reload landed while the run was in flight"
    );
    assert_eq!(answer.status(), 200);
    let body = answer.text().await.expect("run answer");
    assert!(body.contains("Listed the files."), "{body}");

    model.push(Reply::text("Second answer."));
    let answer = daemon.run_wait(TOKEN_A, &thread, "and now").await;
    assert_eq!(answer.status(), 200);
    assert_eq!(
        models_asked(&model, "which files"),
        ["fake-model", "fake-model", "fake-model-2"],
        "both steps of the run in flight on its own config, the next run on the new one"
    );
}

/// The tool names offered in each scripted request whose conversation holds `text`.
fn tools_offered(model: &FakeOpenAi, text: &str) -> Vec<Vec<String>> {
    model
        .requests()
        .iter()
        .filter(|body| body.to_string().contains(text))
        .map(|body| {
            let tools = body["tools"].as_array().cloned().unwrap_or_default();
            tools
                .iter()
                .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_removed_from_the_config_is_gone_from_the_next_run() {
    let model = FakeOpenAi::start().await;
    let tools = "tools:\n  - name: ls\n    group: file:read\n    use: ls\n  - name: read_file\n    group: file:read\n    use: read_file\n";
    let setup = Setup::new(&model.base_url(), tools);
    let daemon = Daemon::spawn(&setup.config_path, &[], None);
    let thread = daemon.create_thread(TOKEN_A).await;
    model.push(Reply::text("One."));
    let answer = daemon.run_wait(TOKEN_A, &thread, "first question").await;
    assert_eq!(answer.status(), 200);

    edit(
        &setup.config_path,
        &[("  - name: ls\n    group: file:read\n    use: ls\n", "")],
    );
    daemon.signal("HUP");
    readyz_until(&daemon, "the reload", |r| outcome(r) == "reloaded").await;
    model.push(Reply::text("Two."));
    let answer = daemon.run_wait(TOKEN_A, &thread, "second question").await;
    assert_eq!(answer.status(), 200);

    let offered = tools_offered(&model, "first question");
    assert_eq!(offered.len(), 2, "{offered:?}");
    assert!(offered[0].iter().any(|t| t == "ls"), "{offered:?}");
    assert!(offered[1].iter().any(|t| t == "read_file"), "{offered:?}");
    assert!(!offered[1].iter().any(|t| t == "ls"), "{offered:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_edit_is_rejected_counted_and_shown_and_the_running_config_stays() {
    let model = FakeOpenAi::start().await;
    let setup = Setup::new(&model.base_url(), "");
    let daemon = Daemon::spawn(&setup.config_path, &[], None);
    // `antler status` reads the data dir from a config: give it one that still parses.
    let readable = setup.dir.path().join("readable.yaml");
    std::fs::copy(&setup.config_path, &readable).expect("copy config");
    edit(&setup.config_path, &[("models:\n", "models: [oops\n")]);
    daemon.signal("HUP");
    let ready = readyz_until(&daemon, "the rejection", |r| outcome(r) == "rejected").await;
    assert_eq!(ready["status"], "ready", "{ready}");
    let metrics = daemon.metrics().await;
    assert!(
        metrics.contains("antler_config_reloads_total{outcome=\"rejected\"} 1"),
        "{metrics}"
    );
    let status = antler(&readable, &["status"], "").await;
    let out = String::from_utf8_lossy(&status.stdout);
    assert!(out.contains("reload    rejected 20"), "{out}");
    assert!(out.contains("the changed config is invalid"), "{out}");
    model.push(Reply::text("Still answering."));
    let thread = daemon.create_thread(TOKEN_A).await;
    let answer = daemon.run_wait(TOKEN_A, &thread, "hello").await;
    assert_eq!(answer.status(), 200, "the running config serves on");
}

/// A reload whose secret reads as an unset variable is rejected without printing the secret:
/// not in the daemon's log, not in `antler status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_reload_never_prints_a_secret_that_starts_with_a_dollar() {
    let model = FakeOpenAi::start().await;
    let setup = Setup::new(&model.base_url(), "");
    let log = setup.dir.path().join("daemon.log");
    let daemon = Daemon::spawn(&setup.config_path, &[], Some(&log));
    let readable = setup.dir.path().join("readable.yaml");
    std::fs::copy(&setup.config_path, &readable).expect("copy config");
    edit(
        &setup.config_path,
        &[(
            "    timeout: 30\n",
            "    timeout: 30\n    api_key: \"$uperSecret42\"\n",
        )],
    );
    daemon.signal("HUP");
    readyz_until(&daemon, "the rejection", |r| outcome(r) == "rejected").await;
    let logged = std::fs::read_to_string(&log).expect("read the log");
    assert!(logged.contains("models[0].api_key"), "{logged}");
    assert!(!logged.contains("uperSecret42"), "{logged}");
    let status = antler(&readable, &["status"], "").await;
    let out = String::from_utf8_lossy(&status.stdout).into_owned()
        + &String::from_utf8_lossy(&status.stderr);
    assert!(out.contains("rejected"), "{out}");
    assert!(!out.contains("uperSecret42"), "{out}");
}
