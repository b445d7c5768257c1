//! The daemon's listener: backlog, connection caps (in all, per client, idle connections
//! closed first), request-head limit, idle timeout and the protocol sniff, on a real socket
//! with a small router.

use std::sync::Arc;
use std::time::{Duration, Instant};

use antler::daemon::listener::{ListenerLimits, bind, serve};
use axum::Router;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// A listener serving a router with `/` (answers at once) and `/hold`, which answers only once
/// `gate` has a permit for it: a request in flight for as long as the test wants. `served`
/// ends when the listener has stopped.
struct Server {
    addr: std::net::SocketAddr,
    stop: CancellationToken,
    gate: Arc<Semaphore>,
    served: tokio::task::JoinHandle<()>,
}

async fn start(
    limits: ListenerLimits,
) -> (std::net::SocketAddr, CancellationToken, Arc<Semaphore>) {
    let server = start_server(limits).await;
    (server.addr, server.stop, server.gate)
}

async fn start_server(limits: ListenerLimits) -> Server {
    let listener = bind("127.0.0.1:0".parse().unwrap(), limits.backlog).unwrap();
    let addr = listener.local_addr().unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let held = gate.clone();
    let app = Router::new().route("/", get(|| async { "hello" })).route(
        "/hold",
        get(move || {
            let held = held.clone();
            async move {
                held.acquire().await.unwrap().forget();
                "released"
            }
        }),
    );
    let stop = CancellationToken::new();
    let served = tokio::spawn(serve(listener, app, limits, stop.clone()));
    Server {
        addr,
        stop,
        gate,
        served,
    }
}

fn limits() -> ListenerLimits {
    ListenerLimits {
        backlog: 1024,
        max_connections: 64,
        max_connections_per_ip: 64,
        max_header_bytes: 16 * 1024,
        idle_timeout: Duration::from_secs(60),
        sniff_timeout: Duration::from_secs(5),
    }
}

/// Sends one request on `stream` and returns the response head's status line.
async fn request(stream: &mut TcpStream, extra_header: &str) -> String {
    let head = format!("GET / HTTP/1.1\r\nhost: x\r\n{extra_header}\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    status_line(stream).await
}

async fn status_line(stream: &mut TcpStream) -> String {
    let mut buffer = vec![0; 4096];
    let n = stream.read(&mut buffer).await.unwrap();
    String::from_utf8_lossy(&buffer[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Starts `GET /hold` on a new connection, which stays busy until the gate lets it answer.
async fn busy(addr: std::net::SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /hold HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    stream
}

/// Whether the server closed `stream` within `limit` (a read ends with EOF or a reset).
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let mut buffer = [0; 256];
    matches!(
        tokio::time::timeout(limit, stream.read(&mut buffer)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn past_the_cap_with_every_connection_busy_new_ones_wait_and_are_served_later() {
    let (addr, stop, gate) = start(ListenerLimits {
        max_connections: 2,
        ..limits()
    })
    .await;
    let mut held = [busy(addr).await, busy(addr).await];
    // Both slots busy: the third connection is accepted but waits for one.
    let mut third = TcpStream::connect(addr).await.unwrap();
    third
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buffer = [0; 64];
    // On paused time the clock moves only once every task is idle: the listener has done all
    // it would do with the third connection before the wait below ends.
    tokio::time::pause();
    let early = tokio::time::timeout(Duration::from_millis(300), third.read(&mut buffer)).await;
    tokio::time::resume();
    assert!(
        early.is_err(),
        "a connection past the cap must not be served yet"
    );
    // The busy requests end; their connections go idle, and the waiting one is served.
    gate.add_permits(2);
    for stream in &mut held {
        assert_eq!(status_line(stream).await, "HTTP/1.1 200 OK");
    }
    let n = tokio::time::timeout(Duration::from_secs(60), third.read(&mut buffer))
        .await
        .expect("served once a slot is free")
        .unwrap();
    assert!(String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 200"));
    stop.cancel();
}

#[tokio::test]
async fn at_the_cap_the_connection_idle_longest_is_closed_to_make_room() {
    let (addr, stop, gate) = start(ListenerLimits {
        max_connections: 4,
        ..limits()
    })
    .await;
    // One connection served a request and went idle; two others never spoke; one is busy.
    let mut idle_oldest = TcpStream::connect(addr).await.unwrap();
    assert_eq!(request(&mut idle_oldest, "").await, "HTTP/1.1 200 OK");
    let mut silent = [
        TcpStream::connect(addr).await.unwrap(),
        TcpStream::connect(addr).await.unwrap(),
    ];
    let mut held = busy(addr).await;
    // Two newcomers: each closes the connection idle longest, never the busy one.
    let mut newcomer = TcpStream::connect(addr).await.unwrap();
    assert_eq!(request(&mut newcomer, "").await, "HTTP/1.1 200 OK");
    assert!(closed_within(&mut idle_oldest, Duration::from_secs(60)).await);
    let mut second = TcpStream::connect(addr).await.unwrap();
    assert_eq!(request(&mut second, "").await, "HTTP/1.1 200 OK");
    assert!(closed_within(&mut silent[0], Duration::from_secs(60)).await);
    gate.add_permits(1);
    assert_eq!(status_line(&mut held).await, "HTTP/1.1 200 OK");
    // The other silent connection was left open: it is served.
    assert_eq!(request(&mut silent[1], "").await, "HTTP/1.1 200 OK");
    stop.cancel();
}

#[tokio::test]
async fn a_client_past_its_cap_loses_idle_connections_then_is_refused_while_all_are_busy() {
    let (addr, stop, gate) = start(ListenerLimits {
        max_connections_per_ip: 3,
        ..limits()
    })
    .await;
    // 20 idle connections from one client: only the 3 newest stay open.
    let mut idle = Vec::new();
    for _ in 0..20 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    let mut closed = 0;
    for stream in &mut idle[..17] {
        closed += usize::from(closed_within(stream, Duration::from_secs(60)).await);
    }
    assert_eq!(closed, 17, "the oldest idle connections are closed");
    // With its 3 connections busy, the client's next one is refused at once.
    drop(idle);
    let mut held = [busy(addr).await, busy(addr).await, busy(addr).await];
    let mut refused = TcpStream::connect(addr).await.unwrap();
    let _ = refused
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await;
    assert!(closed_within(&mut refused, Duration::from_secs(60)).await);
    gate.add_permits(3);
    for stream in &mut held {
        assert_eq!(status_line(stream).await, "HTTP/1.1 200 OK");
    }
    stop.cancel();
}

#[tokio::test]
async fn one_byte_that_could_start_the_h2_preface_is_closed_after_the_sniff_timeout() {
    let (addr, stop, _gate) = start(ListenerLimits {
        sniff_timeout: Duration::from_secs(1),
        ..limits()
    })
    .await;
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(b"P").await.unwrap();
    assert!(closed_within(&mut stream, Duration::from_secs(60)).await);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "closed too early"
    );
    // The preface sent in pieces, with pauses, is still told as h2c: the server answers the
    // client's SETTINGS frame with its own (an HTTP/1.1 parser would answer 400).
    let mut h2 = TcpStream::connect(addr).await.unwrap();
    for piece in [&b"P"[..], b"RI * HTTP/2.0\r\n", b"\r\nSM\r\n\r\n"] {
        h2.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    h2.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    let mut frame = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(60), h2.read_exact(&mut frame))
        .await
        .expect("the server's first frame")
        .unwrap();
    assert_eq!(frame[3], 4, "a SETTINGS frame: {frame:?}");
    stop.cancel();
}

#[tokio::test]
async fn an_oversized_request_head_is_refused() {
    let (addr, stop, _gate) = start(limits()).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let big = format!("x-big: {}\r\n", "a".repeat(64 * 1024));
    let status = request(&mut stream, &big).await;
    assert!(status.starts_with("HTTP/1.1 431"), "{status}");
    let mut ok = TcpStream::connect(addr).await.unwrap();
    let normal = format!("x-fine: {}\r\n", "a".repeat(4 * 1024));
    assert_eq!(request(&mut ok, &normal).await, "HTTP/1.1 200 OK");
    stop.cancel();
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_timeout() {
    let (addr, stop, _gate) = start(ListenerLimits {
        idle_timeout: Duration::from_secs(1),
        ..limits()
    })
    .await;
    // Kept alive after a request, then silent: closed by the server.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    assert_eq!(request(&mut stream, "").await, "HTTP/1.1 200 OK");
    let mut buffer = [0; 16];
    let closed = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buffer))
        .await
        .expect("the server hangs up");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    // A client that starts a request head and stalls is cut off too.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nhost:").await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(60), slow.read(&mut buffer))
        .await
        .expect("the server hangs up on a stalled head");
    // hyper may answer 408 before closing; either way the connection ends.
    if let Ok(n) = closed
        && n > 0
    {
        assert!(String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 408"));
    }
    // A client that connects and never sends a byte is cut off too.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(60), silent.read(&mut buffer))
        .await
        .expect("the server hangs up on a client that sends nothing");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    stop.cancel();
}

#[tokio::test]
async fn stopping_lets_open_requests_finish_and_refuses_new_connections() {
    let server = start_server(limits()).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    assert_eq!(request(&mut stream, "").await, "HTTP/1.1 200 OK");
    server.stop.cancel();
    tokio::time::timeout(Duration::from_secs(60), server.served)
        .await
        .expect("the listener stops once its idle connection is closed")
        .expect("serve");
    assert!(
        TcpStream::connect(server.addr).await.is_err(),
        "the listener is closed"
    );
}

#[tokio::test]
async fn http2_with_prior_knowledge_and_http1_are_both_served() {
    let (addr, stop, _gate) = start(limits()).await;
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let response = h2.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.text().await.unwrap(), "hello");
    // A request whose first byte ("P", as HTTP/2's preface begins) arrives on its own is
    // still HTTP/1.1 once the next bytes come.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(b"P").await.unwrap();
    stream.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    stream
        .write_all(b"OST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        .await
        .unwrap();
    let mut buffer = vec![0; 1024];
    let n = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buffer))
        .await
        .expect("answered")
        .unwrap();
    // The route only has GET: hyper parsed the request and axum answered it.
    assert!(
        String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 405"),
        "{}",
        String::from_utf8_lossy(&buffer[..n])
    );
    stop.cancel();
}
