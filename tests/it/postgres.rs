//! The daemon on PostgreSQL (`store.backend: postgres`): the real binary against a fresh
//! database and the fake model. A turn survives a restart with nothing in a local sled, and
//! `antler store copy` moves a sled data dir's threads into the database. Skipped (saying why)
//! without `ANTLER_TEST_DATABASE_URL`, failed instead under `ANTLER_REQUIRE_POSTGRES=1`.

use std::time::Duration;

use antler_test_support::postgres::{TestDatabase, fresh_database};
use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::daemon::cli::antler;
use crate::daemon::{Daemon, Setup, TOKEN_A};

/// `antler --config CONFIG ARGS…` with the database's URL in its environment.
async fn antler_on(
    config: &std::path::Path,
    database: &TestDatabase,
    args: &[&str],
) -> std::process::Output {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_antler"))
        .arg("--config")
        .arg(config)
        .args(args)
        .env("XDG_RUNTIME_DIR", config.with_file_name("run"))
        .env("ANTLER_DATABASE_URL", &database.url)
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .output();
    tokio::time::timeout(Duration::from_secs(60), output)
        .await
        .expect("antler finished in time")
        .expect("antler output")
}

const ON_POSTGRES: &str =
    "store:\n  backend: postgres\n  postgres:\n    url: $ANTLER_DATABASE_URL\n    pool_size: 4\n";

fn start(setup: &Setup, database: &TestDatabase) -> Daemon {
    Daemon::spawn(
        &setup.config_path,
        &[("ANTLER_DATABASE_URL", database.url.as_str())],
        None,
    )
}

async fn turn(daemon: &Daemon, thread: &str, text: &str) -> Value {
    daemon
        .post(&format!("/api/threads/{thread}/runs/wait"), TOKEN_A)
        .json(&json!({"input": {"messages": [{"role": "user", "content": text}]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn stop(mut daemon: Daemon) {
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_on_postgres_keeps_its_threads_across_a_restart_and_no_sled() {
    let Some(database) = fresh_database() else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("kept in postgres"));
    fake.push(Reply::text("second answer"));
    let setup = Setup::new(&fake.base_url(), ON_POSTGRES);
    let daemon = start(&setup, &database);
    let thread = daemon.create_thread(TOKEN_A).await;
    let waited = turn(&daemon, &thread, "remember this").await;
    assert_eq!(waited["stop_reason"], "completed", "{waited}");
    let before = daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    // Killed, not stopped: a committed transaction needs no flush to survive.
    daemon.signal("KILL");
    drop(daemon);

    let daemon = start(&setup, &database);
    let after = daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    assert_eq!(after["values"], before["values"]);
    assert!(after.to_string().contains("kept in postgres"), "{after}");
    let listed = daemon.get_json("/api/threads", TOKEN_A).await;
    assert!(listed.to_string().contains(&thread), "{listed}");
    let waited = turn(&daemon, &thread, "and this").await;
    assert_eq!(waited["stop_reason"], "completed", "{waited}");
    stop(daemon);

    assert!(
        !setup.data_dir().join("store").exists(),
        "a postgres daemon opens no sled store"
    );
    let rows = database
        .query_strings("SELECT count(*)::text FROM kv WHERE tree = 'log'")
        .unwrap();
    assert!(rows[0].parse::<u32>().unwrap() >= 4, "{rows:?}");
    let stats = antler_on(&setup.config_path, &database, &["store", "stats"]).await;
    let out = String::from_utf8_lossy(&stats.stdout);
    assert!(stats.status.success(), "{stats:?}");
    assert!(out.contains("backend: postgres"), "{out}");
    let compact = antler_on(&setup.config_path, &database, &["store", "compact"]).await;
    assert_eq!(compact.status.code(), Some(1));
    let err = String::from_utf8_lossy(&compact.stderr);
    assert!(err.contains("rewrites sled's files"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_copy_moves_a_sled_data_dir_into_postgres() {
    let Some(database) = fresh_database() else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("answered on sled"));
    fake.push(Reply::text("answered on postgres"));
    let setup = Setup::new(&fake.base_url(), "");
    let sled_daemon = setup.start();
    let thread = sled_daemon.create_thread(TOKEN_A).await;
    let waited = turn(&sled_daemon, &thread, "before the move").await;
    assert_eq!(waited["stop_reason"], "completed", "{waited}");
    let before = sled_daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;

    let copy_args = ["store", "copy", "--to", database.url.as_str()];
    let refused = antler(&setup.config_path, &copy_args, "").await;
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("stop it first"), "{err}");
    stop(sled_daemon);

    let copied = antler(&setup.config_path, &copy_args, "").await;
    let out = String::from_utf8_lossy(&copied.stdout).into_owned();
    assert!(copied.status.success(), "{copied:?}");
    for tree in ["threads", "heads", "log", "user_threads"] {
        assert!(out.lines().any(|l| l.starts_with(tree)), "{tree}: {out}");
    }
    assert!(out.contains("verified"), "{out}");
    let again = antler(&setup.config_path, &copy_args, "").await;
    let again_out = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{again:?}");
    let total = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("total"))
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
    };
    let (first, second) = (total(&out).unwrap(), total(&again_out).unwrap());
    assert_eq!(first[1], second[1], "the same keys: {out}\n{again_out}");
    assert_eq!(second[2], "0", "nothing copied twice: {again_out}");

    // The same config on postgres serves the copied thread and continues it.
    let on_postgres = setup.config_path.with_file_name("postgres.yaml");
    let yaml = std::fs::read_to_string(&setup.config_path).unwrap() + ON_POSTGRES;
    std::fs::write(&on_postgres, yaml).unwrap();
    std::fs::remove_dir_all(setup.data_dir().join("store")).unwrap();
    let daemon = Daemon::spawn(
        &on_postgres,
        &[("ANTLER_DATABASE_URL", database.url.as_str())],
        None,
    );
    let after = daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    assert_eq!(after["values"], before["values"]);
    let waited = turn(&daemon, &thread, "after the move").await;
    assert_eq!(waited["stop_reason"], "completed", "{waited}");
    assert!(waited.to_string().contains("answered on sled"), "{waited}");
    stop(daemon);
}
