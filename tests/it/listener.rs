//! The daemon's listener: backlog, connection cap, request-head limit and idle timeout, on a
//! real socket with a small router.

use std::time::Duration;

use antler::listener::{ListenerLimits, bind, serve};
use axum::Router;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

async fn start(limits: ListenerLimits) -> (std::net::SocketAddr, CancellationToken) {
    let listener = bind("127.0.0.1:0".parse().unwrap(), limits.backlog).unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/", get(|| async { "hello" }));
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, app, limits, stop.clone()));
    (addr, stop)
}

fn limits() -> ListenerLimits {
    ListenerLimits {
        backlog: 1024,
        max_connections: 64,
        max_header_bytes: 16 * 1024,
        idle_timeout: Duration::from_secs(60),
    }
}

/// Sends one request on `stream` and returns the response head's status line.
async fn request(stream: &mut TcpStream, extra_header: &str) -> String {
    let head = format!("GET / HTTP/1.1\r\nhost: x\r\n{extra_header}\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut buffer = vec![0; 4096];
    let n = stream.read(&mut buffer).await.unwrap();
    String::from_utf8_lossy(&buffer[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn connections_past_the_cap_wait_in_the_backlog_and_are_served_later() {
    let (addr, stop) = start(ListenerLimits {
        max_connections: 1,
        ..limits()
    })
    .await;
    let mut first = TcpStream::connect(addr).await.unwrap();
    assert_eq!(request(&mut first, "").await, "HTTP/1.1 200 OK");
    // 300 more clients at once: the one slot is taken, yet every handshake completes, because
    // they fit in the backlog (the kernel's default of 128 would leave most unanswered).
    let waiting = futures::future::join_all((0..300).map(|_| TcpStream::connect(addr))).await;
    let mut waiting: Vec<TcpStream> = waiting.into_iter().map(Result::unwrap).collect();
    let mut second = waiting.pop().unwrap();
    second
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buffer = [0; 64];
    let early = tokio::time::timeout(Duration::from_millis(300), second.read(&mut buffer)).await;
    assert!(
        early.is_err(),
        "a connection past the cap must not be served yet"
    );
    drop(waiting);
    drop(first);
    let n = tokio::time::timeout(Duration::from_secs(10), second.read(&mut buffer))
        .await
        .expect("served once a slot is free")
        .unwrap();
    assert!(String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 200"));
    stop.cancel();
}

#[tokio::test]
async fn an_oversized_request_head_is_refused() {
    let (addr, stop) = start(limits()).await;
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
    let (addr, stop) = start(ListenerLimits {
        idle_timeout: Duration::from_secs(1),
        ..limits()
    })
    .await;
    // Kept alive after a request, then silent: closed by the server.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    assert_eq!(request(&mut stream, "").await, "HTTP/1.1 200 OK");
    let mut buffer = [0; 16];
    let closed = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
        .await
        .expect("the server hangs up");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    // A client that starts a request head and stalls is cut off too.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nhost:").await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(10), slow.read(&mut buffer))
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
    let closed = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut buffer))
        .await
        .expect("the server hangs up on a client that sends nothing");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    stop.cancel();
}

#[tokio::test]
async fn stopping_lets_open_requests_finish_and_refuses_new_connections() {
    let (addr, stop) = start(limits()).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    assert_eq!(request(&mut stream, "").await, "HTTP/1.1 200 OK");
    stop.cancel();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the listener is closed"
    );
}

#[tokio::test]
async fn http2_with_prior_knowledge_and_http1_are_both_served() {
    let (addr, stop) = start(limits()).await;
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
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
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
