//! Two daemons' leased transports on one store, in paused time: one transport at a time, a
//! takeover within two leases of the holder going silent.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use antler_channel::{InboundMessage, SinkError, TransportContext};
use antler_store::{BatchOp, Expect, KeyValues, MemoryStore, Store, StoreError, StoreRef};
use async_trait::async_trait;

use super::*;
use crate::cluster::TokioWallClock;

const LEASE: Duration = Duration::from_secs(15);

/// A store that can become unreachable, as a daemon's database connection does when the host
/// dies or is cut off: it can neither renew nor release its leases.
struct Cuttable {
    inner: MemoryStore,
    down: AtomicBool,
}

impl Cuttable {
    fn check(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Io("connection refused".into()));
        }
        Ok(())
    }
}

/// One shared store seen through a per-daemon connection that can be cut.
struct Connection {
    shared: Arc<Cuttable>,
    down: AtomicBool,
}

impl Connection {
    fn check(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Io("connection refused".into()));
        }
        self.shared.check()
    }
}

impl Store for Connection {
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.check()?;
        self.shared.inner.get(tree, key)
    }
    fn put(&self, tree: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.check()?;
        self.shared.inner.put(tree, key, value)
    }
    fn delete(&self, tree: &str, key: &[u8]) -> Result<(), StoreError> {
        self.check()?;
        self.shared.inner.delete(tree, key)
    }
    fn scan_prefix(&self, tree: &str, prefix: &[u8]) -> Result<KeyValues, StoreError> {
        self.check()?;
        self.shared.inner.scan_prefix(tree, prefix)
    }
    fn apply_batch(&self, ops: Vec<BatchOp>) -> Result<(), StoreError> {
        self.check()?;
        self.shared.inner.apply_batch(ops)
    }
    fn apply_batch_if(&self, expect: &Expect, ops: Vec<BatchOp>) -> Result<bool, StoreError> {
        self.check()?;
        self.shared.inner.apply_batch_if(expect, ops)
    }
    fn flush(&self) -> Result<(), StoreError> {
        self.shared.inner.flush()
    }
}

/// The platform's side of a bot token, as Telegram keeps it: one poller at a time, a second
/// concurrent one is refused with 409 and counted.
#[derive(Default)]
struct Platform {
    polling: AtomicUsize,
    overlaps: AtomicUsize,
    /// Which daemon's transport ran, in order of starting.
    runs: Mutex<Vec<&'static str>>,
}

struct Poller {
    daemon: &'static str,
    platform: Arc<Platform>,
}

#[async_trait]
impl Transport for Poller {
    async fn run(&self, ctx: TransportContext) -> Result<(), ChannelError> {
        if self.platform.polling.fetch_add(1, Ordering::SeqCst) > 0 {
            self.platform.polling.fetch_sub(1, Ordering::SeqCst);
            self.platform.overlaps.fetch_add(1, Ordering::SeqCst);
            return Err(ChannelError::Conflict(
                "terminated by other getUpdates".into(),
            ));
        }
        self.platform.runs.lock().expect("runs").push(self.daemon);
        ctx.report_live();
        ctx.stop.cancelled().await;
        self.platform.polling.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

struct NullSink;

#[async_trait]
impl InboundSink for NullSink {
    async fn accept(&self, _messages: Vec<InboundMessage>) -> Result<(), SinkError> {
        Ok(())
    }
}

struct Daemon {
    cluster: Cluster,
    connection: Arc<Connection>,
    health: HealthBoard,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), ChannelError>>,
}

fn start(store: &Arc<Cuttable>, name: &'static str, platform: &Arc<Platform>) -> Daemon {
    let poller = Arc::new(Poller {
        daemon: name,
        platform: platform.clone(),
    });
    start_with(store, name, poller, Arc::new(NullSink), LEASE)
}

fn start_with(
    store: &Arc<Cuttable>,
    name: &'static str,
    transport: Arc<dyn Transport>,
    sink: Arc<dyn InboundSink>,
    lease_for: Duration,
) -> Daemon {
    let connection = Arc::new(Connection {
        shared: store.clone(),
        down: AtomicBool::new(false),
    });
    let cluster = Cluster::new(
        connection.clone() as StoreRef,
        name,
        lease_for,
        "memory",
        Arc::new(TokioWallClock::new()),
    );
    let health = HealthBoard::default();
    let stop = CancellationToken::new();
    let lease = lease_name("telegram", Some(&Secret::new("123:token")));
    let task = {
        let (cluster, health, stop) = (cluster.clone(), health.clone(), stop.clone());
        tokio::spawn(async move {
            let phase: PhaseReport = Arc::new(|_| {});
            LeasedTransport {
                cluster: &cluster,
                lease: &lease,
                channel: "telegram",
                transport,
                sink,
                health: &health,
                phase: &phase,
            }
            .run(&stop)
            .await
        })
    };
    Daemon {
        cluster,
        connection,
        health,
        stop,
        task,
    }
}

async fn until(what: &str, check: impl Fn() -> bool) {
    tokio::time::timeout(LEASE * 4, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

fn shared_store() -> Arc<Cuttable> {
    Arc::new(Cuttable {
        inner: MemoryStore::new(),
        down: AtomicBool::new(false),
    })
}

#[test]
fn the_lease_is_named_by_a_digest_of_the_token_never_the_token() {
    let token = Secret::new("123456:SECRET-PART");
    let name = lease_name("telegram", Some(&token));
    assert!(name.starts_with("telegram:transport:"), "{name}");
    assert!(
        !name.contains("SECRET") && !name.contains("123456"),
        "{name}"
    );
    assert_eq!(name, lease_name("telegram", Some(&token)), "stable");
    assert_ne!(name, lease_name("telegram", Some(&Secret::new("1:other"))));
    assert_eq!(lease_name("slack", None), "slack:transport:default");
}

#[tokio::test(start_paused = true)]
async fn one_transport_runs_at_a_time_and_the_other_takes_over_within_two_leases() {
    let store = shared_store();
    let platform = Arc::new(Platform::default());
    let a = start(&store, "a", &platform);
    until("a polls", || {
        a.health.get("telegram") == Some(ChannelHealth::Running)
    })
    .await;
    let b = start(&store, "b", &platform);
    until("b stands by", || {
        b.health.get("telegram") == Some(ChannelHealth::Standby)
    })
    .await;
    // Many leases later a still polls alone: renewals keep b waiting.
    tokio::time::sleep(LEASE * 5).await;
    assert_eq!(*platform.runs.lock().expect("runs"), ["a"]);
    assert_eq!(platform.overlaps.load(Ordering::SeqCst), 0);

    // a goes silent (its host is cut off): it can neither renew nor release.
    a.connection.down.store(true, Ordering::SeqCst);
    let silent = tokio::time::Instant::now();
    until("b polls", || {
        b.health.get("telegram") == Some(ChannelHealth::Running)
    })
    .await;
    assert!(silent.elapsed() <= LEASE * 2, "{:?}", silent.elapsed());
    assert_eq!(*platform.runs.lock().expect("runs"), ["a", "b"]);
    assert_eq!(
        platform.overlaps.load(Ordering::SeqCst),
        0,
        "a stopped at its lease's deadline, before b could start"
    );
    assert_eq!(b.cluster.held_names().len(), 1);
    assert!(a.cluster.held_names().is_empty());

    // a comes back and stands by; b keeps the transport.
    a.connection.down.store(false, Ordering::SeqCst);
    until("a stands by", || {
        a.health.get("telegram") == Some(ChannelHealth::Standby)
    })
    .await;
    tokio::time::sleep(LEASE * 3).await;
    assert_eq!(*platform.runs.lock().expect("runs"), ["a", "b"]);
    assert_eq!(platform.overlaps.load(Ordering::SeqCst), 0);

    for daemon in [a, b] {
        daemon.stop.cancel();
        assert!(daemon.task.await.expect("join").is_ok());
        daemon.cluster.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_stopped_holder_hands_the_transport_over_at_once() {
    let store = shared_store();
    let platform = Arc::new(Platform::default());
    let a = start(&store, "a", &platform);
    until("a polls", || {
        a.health.get("telegram") == Some(ChannelHealth::Running)
    })
    .await;
    let b = start(&store, "b", &platform);
    until("b stands by", || {
        b.health.get("telegram") == Some(ChannelHealth::Standby)
    })
    .await;
    a.stop.cancel();
    assert!(a.task.await.expect("join").is_ok());
    let stopped = tokio::time::Instant::now();
    until("b polls", || {
        b.health.get("telegram") == Some(ChannelHealth::Running)
    })
    .await;
    // Released, not expired: b's next try (every third of a lease) takes it.
    assert!(stopped.elapsed() <= LEASE / 3 + Duration::from_secs(1));
    assert_eq!(platform.overlaps.load(Ordering::SeqCst), 0);
    b.stop.cancel();
    assert!(b.task.await.expect("join").is_ok());
    a.cluster.shutdown().await;
    b.cluster.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_conflict_from_a_poller_outside_the_cluster_stays_fatal() {
    let store = shared_store();
    let platform = Arc::new(Platform::default());
    // Someone else's process polls the same token.
    platform.polling.store(1, Ordering::SeqCst);
    let a = start(&store, "a", &platform);
    let result = tokio::time::timeout(LEASE, a.task)
        .await
        .expect("ended")
        .expect("join");
    assert!(
        matches!(result, Err(ChannelError::Conflict(_))),
        "{result:?}"
    );
    a.cluster.shutdown().await;
}

/// Keeps the text of every message a daemon's transport journalled.
#[derive(Default)]
struct Journal(Mutex<Vec<String>>);

#[async_trait]
impl InboundSink for Journal {
    async fn accept(&self, messages: Vec<InboundMessage>) -> Result<(), SinkError> {
        let mut texts = self.0.lock().expect("journal");
        texts.extend(messages.into_iter().map(|m| m.text));
        Ok(())
    }
}

/// The real Telegram poller (teloxide) against the fake Bot API, which answers a concurrent
/// `getUpdates` with 409: one poller at a time, and the other one takes over when the first
/// is cut off from the store, in real time with a one-second lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_telegram_pollers_on_one_token_never_poll_at_once() {
    use antler_channel::ChannelConfig;
    use antler_test_support::{FAKE_BOT_TOKEN, FakeTelegram, private_chat};

    const SHORT: Duration = Duration::from_secs(1);
    let telegram = FakeTelegram::start().await;
    telegram.refuse_concurrent_polls();
    let config: antler_telegram::TelegramConfig = serde_json::from_value(serde_json::json!({
        "enabled": true, "bot_token": FAKE_BOT_TOKEN, "api_url": telegram.api_url(),
        "poll_timeout": 1,
    }))
    .expect("config");
    let store = shared_store();
    let mut daemons = Vec::new();
    let mut journals = Vec::new();
    for name in ["a", "b"] {
        let connection = config.adapter().connect().await.expect("connect");
        let transport = connection.transport.expect("polling has a transport");
        let journal = Arc::new(Journal::default());
        daemons.push(start_with(&store, name, transport, journal.clone(), SHORT));
        journals.push(journal);
    }
    let deadline = tokio::time::Instant::now() + SHORT * 10;
    let running = |d: &Daemon| d.health.get("telegram") == Some(ChannelHealth::Running);
    let poller = loop {
        match (running(&daemons[0]), running(&daemons[1])) {
            (true, false) => break 0,
            (false, true) => break 1,
            _ => assert!(tokio::time::Instant::now() < deadline, "nobody polls"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let survivor = 1 - poller;
    assert_eq!(
        daemons[survivor].health.get("telegram"),
        Some(ChannelHealth::Standby)
    );
    telegram.send_text(private_chat(1), 1, "first");
    telegram
        .wait_for(SHORT * 10, "three lease lengths of polls", |t| {
            t.calls_of("getupdates").len() >= 6
        })
        .await;
    let journalled = |i: usize| journals[i].0.lock().expect("journal").clone();
    assert_eq!(journalled(poller), ["first"]);
    assert_eq!(telegram.overlaps(), 0);

    // The poller is cut off from the store: it stops at its lease's deadline and the other
    // polls within two leases.
    daemons[poller]
        .connection
        .down
        .store(true, Ordering::SeqCst);
    let cut = tokio::time::Instant::now();
    while !running(&daemons[survivor]) {
        assert!(cut.elapsed() <= SHORT * 2, "no takeover within two leases");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    telegram.send_text(private_chat(1), 1, "second");
    let deadline = tokio::time::Instant::now() + SHORT * 10;
    while journalled(survivor).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the survivor never got it"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(journalled(survivor).contains(&"second".to_string()));
    assert_eq!(telegram.overlaps(), 0, "never two getUpdates at once");
    for daemon in daemons {
        daemon.stop.cancel();
        assert!(daemon.task.await.expect("join").is_ok());
        daemon.cluster.shutdown().await;
    }
}
