//! Connection slots against the real daemon and its default caps: 2,100 idle connections from
//! one client leave `/healthz` answering at once, and 2,000 clients that send one byte `P`
//! cost the idle daemon next to no CPU and are closed once the protocol sniff times out.

use std::time::{Duration, Instant};

use antler_test_support::FakeOpenAi;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Daemon, Setup};

fn addr(daemon: &Daemon) -> String {
    daemon.base.trim_start_matches("http://").to_owned()
}

/// Opens `count` connections to `addr` from the loopback address `from` (all of 127/8 is
/// loopback, so each is another client on the same host).
async fn open(addr: &str, from: &str, count: usize) -> Vec<TcpStream> {
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        streams.push(socket.connect(addr).await.expect("connect"));
    }
    streams
}

/// `/healthz` on a new connection answers within 30 s, however loaded the machine: starved,
/// it would wait for an idle connection to time out (600 s, as [`IDLE_FOR_LONG`] sets it).
async fn healthz_answers(daemon: &Daemon) {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let health = tokio::time::timeout(
        Duration::from_secs(30),
        client.get(daemon.url("/healthz")).send(),
    )
    .await
    .expect("/healthz answered while every other slot is taken")
    .unwrap();
    assert_eq!(health.status(), 200);
}

/// Idle connections are closed only after this long: no slot frees itself during a test.
const IDLE_FOR_LONG: &str = "  idle_timeout_seconds: 600\n";

/// Waits until at least `at_least` of `streams` are closed by the server (EOF or reset),
/// failing at `deadline`; returns how many were.
async fn closed_by(streams: &mut [TcpStream], at_least: usize, deadline: Instant) -> usize {
    let total = streams.len();
    let mut reads: FuturesUnordered<_> = streams
        .iter_mut()
        .map(|stream| async move {
            let mut buffer = [0u8; 64];
            matches!(stream.read(&mut buffer).await, Ok(0) | Err(_))
        })
        .collect();
    let mut closed = 0;
    while closed < at_least {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, reads.next()).await {
            Ok(Some(true)) => closed += 1,
            Ok(Some(false)) => {}
            Ok(None) | Err(_) => {
                panic!("only {closed} of {total} connections closed, expected {at_least}")
            }
        }
    }
    closed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_idle_connections_leave_healthz_answering() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::tokenless(&fake.base_url(), IDLE_FOR_LONG);
    let daemon = setup.start();
    let addr = addr(&daemon);
    // One client over max_connections_per_ip (256): the oldest idle ones are closed as the new
    // ones come, until it holds its 256. (Waiting for that proves the daemon took them all.)
    let mut one_client = open(&addr, "127.0.0.2", 2_100).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    closed_by(&mut one_client, 2_100 - 256, deadline).await;
    healthz_answers(&daemon).await;
    drop(one_client);
    // Ten clients of 210 each: under their own cap, over max_connections (2,048) together.
    let mut many = Vec::new();
    for client in 3..13 {
        many.extend(open(&addr, &format!("127.0.0.{client}"), 210).await);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    closed_by(&mut many, 2_100 - 2_048, deadline).await;
    healthz_answers(&daemon).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_byte_clients_cost_no_cpu_and_are_closed_after_the_sniff_timeout() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::tokenless(
        &fake.base_url(),
        "  max_connections: 4096\n  max_connections_per_ip: 4096\n",
    );
    let daemon = setup.start();
    let addr = addr(&daemon);
    let mut clients = open(&addr, "127.0.0.1", 2_000).await;
    let sent = Instant::now();
    for stream in &mut clients {
        stream.write_all(b"P").await.unwrap();
    }
    // While all 2,000 wait inside the sniff: the daemon sleeps (a 2 ms re-peek loop kept half a
    // core busy here). Measured over a window well inside the 5 s sniff timeout.
    let pid = daemon.child.id().to_string();
    let before = antler::cli::bench::cpu_time_of(&pid);
    let window = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = antler::cli::bench::cpu_time_of(&pid) - before;
    let share = used.as_secs_f64() / window.elapsed().as_secs_f64();
    assert!(
        share < 0.10,
        "the daemon used {used:?} of CPU ({share:.2} of a core)"
    );
    // Then each is closed: 5 s after its byte, with a margin for a loaded machine.
    let deadline = sent + antler::daemon::listener::SNIFF_TIMEOUT + Duration::from_secs(60);
    closed_by(&mut clients, 2_000, deadline).await;
    assert!(sent.elapsed() >= antler::daemon::listener::SNIFF_TIMEOUT);
}
