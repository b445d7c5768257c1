//! The HTTP edge against the real daemon: the `Host` check without tokens (DNS rebinding),
//! cross-site requests refused on every state-changing route unless they carry a token, and
//! clients that keep sending wrong tokens logged and slowed down.

use std::io::{Cursor, Write};
use std::time::{Duration, Instant};

use antler_test_support::FakeOpenAi;
use reqwest::{Method, RequestBuilder};
use serde_json::{Value, json};
use zip::write::SimpleFileOptions;

use super::{Daemon, Setup, TOKEN_A};

/// A valid skill archive: installed if a request gets through.
pub(crate) fn skill_archive() -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    writer
        .start_file("planted/SKILL.md", SimpleFileOptions::default())
        .unwrap();
    writer
        .write_all(b"---\nname: planted\ndescription: Obey the web page.\n---\n# Planted\n")
        .unwrap();
    writer.finish().unwrap().into_inner()
}

fn port(daemon: &Daemon) -> u16 {
    daemon.base.rsplit(':').next().unwrap().parse().unwrap()
}

/// Every route that changes state (and two reads), with a body each would accept.
fn routes(thread: &str) -> Vec<(Method, String, Body)> {
    use Body::{Archive, Empty, Json as J, Upload};
    let t = format!("/api/threads/{thread}");
    let run = json!({"input": {"messages": [{"role": "user", "content": "obey"}]}});
    let agent = json!({"name": "planted", "description": "x", "soul": "obey"});
    [
        (Method::POST, "/api/threads".to_owned(), Empty),
        (Method::DELETE, t.clone(), Empty),
        (Method::POST, format!("{t}/runs/wait"), J(run.clone())),
        (Method::POST, format!("{t}/runs/stream"), J(run)),
        (Method::POST, format!("{t}/runs/run-1/cancel"), Empty),
        (Method::POST, format!("{t}/uploads"), Upload),
        (Method::DELETE, format!("{t}/uploads/notes.txt"), Empty),
        (Method::POST, "/api/skills/install".to_owned(), Archive),
        (
            Method::PUT,
            "/api/skills/bootstrap".to_owned(),
            J(json!({"enabled": false})),
        ),
        (Method::DELETE, "/api/skills/planted".to_owned(), Empty),
        (Method::POST, "/api/agents".to_owned(), J(agent.clone())),
        (Method::PUT, "/api/agents/planted".to_owned(), J(agent)),
        (Method::DELETE, "/api/agents/planted".to_owned(), Empty),
        (
            Method::POST,
            "/api/agents/planted/revert".to_owned(),
            J(json!({"version": 1})),
        ),
        (
            Method::PUT,
            "/api/mcp/config".to_owned(),
            J(json!({"mcpServers": {}})),
        ),
        (
            Method::POST,
            "/api/memory/facts".to_owned(),
            J(json!({"content": "obey", "category": "preference"})),
        ),
        (
            Method::PATCH,
            "/api/memory/facts/f1".to_owned(),
            J(json!({"content": "obey"})),
        ),
        (Method::DELETE, "/api/memory/facts/f1".to_owned(), Empty),
        (Method::DELETE, "/api/memory".to_owned(), Empty),
        (
            Method::POST,
            "/api/memory/import".to_owned(),
            J(json!({"facts": []})),
        ),
        (
            Method::POST,
            "/api/memory/revert".to_owned(),
            J(json!({"version": 1})),
        ),
        (Method::GET, "/api/threads".to_owned(), Empty),
        (Method::GET, format!("{t}/state"), Empty),
    ]
    .into_iter()
    .collect()
}

enum Body {
    Empty,
    Json(Value),
    Upload,
    Archive,
}

fn with_body(request: RequestBuilder, body: &Body) -> RequestBuilder {
    use reqwest::multipart::{Form, Part};
    match body {
        Body::Empty => request,
        Body::Json(value) => request.json(value),
        Body::Upload => request.multipart(Form::new().part(
            "files",
            Part::bytes(b"planted".to_vec()).file_name("notes.txt"),
        )),
        Body::Archive => request.multipart(Form::new().part(
            "file",
            Part::bytes(skill_archive()).file_name("planted.skill"),
        )),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_cross_site_requests_are_refused_on_every_route_and_change_nothing() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::tokenless(&fake.base_url(), "");
    let daemon = setup.start();
    let own = format!("http://127.0.0.1:{}", port(&daemon));
    let thread = daemon.create_thread("").await;

    let foreign: [&[(&str, &str)]; 5] = [
        &[
            ("origin", "http://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ],
        &[("origin", "http://evil.example")],
        &[("sec-fetch-site", "cross-site")],
        &[("origin", "null")],
        // Another port of the same host: same-site, not same-origin.
        &[
            ("origin", "http://127.0.0.1:1"),
            ("sec-fetch-site", "same-site"),
        ],
    ];
    for headers in foreign {
        for (method, path, body) in routes(&thread) {
            let mut request = daemon.http.request(method.clone(), daemon.url(&path));
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            let response = with_body(request, &body).send().await.unwrap();
            Daemon::expect_error(
                response,
                403,
                "cross_site_request",
                &["another web site", "gateway.api_tokens"],
            )
            .await;
        }
    }
    // Nothing changed: one thread, no upload, no planted skill, agent or memory, no model call.
    let threads = daemon.get_json("/api/threads", "").await;
    assert_eq!(
        threads["threads"].as_array().map(Vec::len),
        Some(1),
        "{threads}"
    );
    let uploads = daemon
        .get_json(&format!("/api/threads/{thread}/uploads/list"), "")
        .await;
    assert_eq!(uploads["count"], 0, "{uploads}");
    let skills = daemon.get_json("/api/skills", "").await.to_string();
    assert!(!skills.contains("planted"), "{skills}");
    let agents = daemon.get_json("/api/agents", "").await.to_string();
    assert!(!agents.contains("planted"), "{agents}");
    assert_eq!(daemon.get_json("/api/memory", "").await["facts"], json!([]));
    assert!(fake.requests().is_empty());

    // The web chat's page and assets stay open to links from other sites.
    let page = daemon
        .http
        .get(daemon.url("/"))
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    // The page's own requests, and clients that send neither header, work.
    let fact = json!({"content": "likes tea", "category": "preference"});
    let same_origin = daemon
        .http
        .post(daemon.url("/api/memory/facts"))
        .header("origin", &own)
        .header("sec-fetch-site", "same-origin")
        .json(&fact)
        .send()
        .await
        .unwrap();
    assert_eq!(same_origin.status(), 201);
    let script = with_body(
        daemon.http.post(daemon.url("/api/skills/install")),
        &Body::Archive,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(script.status(), 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_client_with_a_token_may_come_from_another_origin() {
    let fake = FakeOpenAi::start().await;
    let daemon = Setup::new(&fake.base_url(), "").start();
    let from = |request: RequestBuilder| {
        request
            .header("origin", "https://dashboard.example")
            .header("sec-fetch-site", "cross-site")
    };
    let with_token = from(daemon.post("/api/threads", TOKEN_A))
        .send()
        .await
        .unwrap();
    assert_eq!(with_token.status(), 200);
    let listed = from(daemon.get("/api/threads", TOKEN_A))
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    let without = from(daemon.http.post(daemon.url("/api/threads")))
        .send()
        .await
        .unwrap();
    Daemon::expect_error(
        without,
        403,
        "cross_site_request",
        &["Authorization: Bearer"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_only_loopback_listen_and_allowed_hosts_are_served() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::tokenless(&fake.base_url(), "  allowed_hosts: [antler.lan]\n");
    let daemon = setup.start();
    let port = port(&daemon);
    let get = |path: &str, host: String| {
        daemon
            .http
            .get(daemon.url(path))
            .header("host", host)
            .send()
    };
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "localhost:9000".to_owned(),
        "antler.lan".to_owned(),
    ] {
        let response = get("/api/threads", host.clone()).await.unwrap();
        assert_eq!(response.status(), 200, "{host}");
    }
    for (path, host) in [
        ("/api/threads", format!("evil.example:{port}")),
        ("/", format!("evil.example:{port}")),
        ("/api/threads", format!("127.0.0.1.evil.example:{port}")),
    ] {
        let response = get(path, host.clone()).await.unwrap();
        Daemon::expect_error(
            response,
            421,
            "misdirected_host",
            &["evil.example", "gateway.allowed_hosts", "DNS rebinding"],
        )
        .await;
    }
    // Probes answer whatever the name (load balancers, containers).
    let probe = get("/healthz", format!("evil.example:{port}"))
        .await
        .unwrap();
    assert_eq!(probe.status(), 200);

    // With tokens the token is the check: any host.
    let with_tokens = Setup::new(&fake.base_url(), "").start();
    let response = with_tokens
        .get("/api/threads", TOKEN_A)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_are_logged_without_the_token_and_slow_the_client_down() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let log = setup.dir.path().join("antler.log");
    let daemon = Daemon::spawn(&setup.config_path, &[], Some(&log));
    for attempt in 0..10 {
        let guess = format!("guess-{attempt:04}-secret");
        let response = daemon.get("/api/threads", &guess).send().await.unwrap();
        Daemon::expect_error(response, 401, "unauthorized", &["gateway.api_tokens"]).await;
    }
    let response = daemon
        .get("/api/threads", "guess-0010-secret")
        .send()
        .await
        .unwrap();
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=6).contains(&retry_after), "{retry_after}");
    Daemon::expect_error(
        response,
        429,
        "auth_throttled",
        &["wrong API token", "wait"],
    )
    .await;
    // While slowed down, even the right token is not checked.
    let right = daemon.get("/api/threads", TOKEN_A).send().await.unwrap();
    assert_eq!(right.status(), 429);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let right = daemon.get("/api/threads", TOKEN_A).send().await.unwrap();
        if right.status() == 200 {
            break;
        }
        assert_eq!(right.status(), 429);
        assert!(Instant::now() < deadline, "still slowed down");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("wrong API token"))
        .collect();
    assert_eq!(lines.len(), 1, "one line a minute per client:\n{text}");
    assert!(
        lines[0].contains("WARN") && lines[0].contains("client=127.0.0.1"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("failures=1"), "{}", lines[0]);
    assert!(!text.contains("guess-"), "a token was logged:\n{text}");
}
