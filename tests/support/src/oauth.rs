//! An OAuth 2.0 token endpoint (RFC 6749 §4.4 client credentials, §6 refresh) and an
//! authorization-checking reverse proxy in front of an MCP server, for MCP client tests.
//!
//! The endpoint issues `tok-1`, `tok-2`, … with the configured `expires_in` and records every
//! request it received; it publishes RFC 8414 metadata listing the client authentication
//! methods it was given, and accepts `client_secret_basic` (RFC 6749 §2.3.1),
//! `client_secret_post` and `private_key_jwt` (RFC 7523; the assertion is recorded for the
//! test to verify). The proxy records each request's `Authorization` header, answers 401
//! without one, and forwards everything else (streaming the answer, SSE included); started
//! with [`AuthProxy::protected`] it is an MCP 2025-11-25 resource server: protected-resource
//! metadata (RFC 9728), 401 with a `resource_metadata` challenge, and 403
//! `insufficient_scope` for `tools/call` without a scripted scope.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;

/// The client the endpoint knows.
const CLIENT_ID: &str = "antler";
const CLIENT_SECRET: &str = "s3cret";
const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// One request to the token endpoint, as received.
#[derive(Clone, Debug)]
pub struct SeenTokenRequest {
    pub form: Vec<(String, String)>,
    pub authorization: Option<String>,
}

impl SeenTokenRequest {
    pub fn field(&self, name: &str) -> Option<String> {
        self.form
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    /// The client authentication method the request used.
    pub fn method(&self) -> &'static str {
        if self
            .authorization
            .as_deref()
            .is_some_and(|a| a.starts_with("Basic "))
        {
            "client_secret_basic"
        } else if self.field("client_assertion").is_some() {
            "private_key_jwt"
        } else if self.field("client_secret").is_some() {
            "client_secret_post"
        } else {
            "none"
        }
    }
}

#[derive(Default)]
struct TokenState {
    requests: Vec<SeenTokenRequest>,
    expires_in: u64,
    auth_methods: Vec<String>,
    /// Scopes never granted (dropped from what is asked).
    withheld: Vec<String>,
    /// The scopes of every token issued.
    scopes: std::collections::HashMap<String, Vec<String>>,
    issuer: String,
}

/// The token endpoint at `{url}` (`{issuer}/token`), with its metadata at
/// `{issuer}/.well-known/oauth-authorization-server`.
#[derive(Clone)]
pub struct FakeTokenEndpoint {
    pub url: String,
    /// The authorization server's issuer (its base URL).
    pub issuer: String,
    state: Arc<Mutex<TokenState>>,
}

impl FakeTokenEndpoint {
    /// Tokens live `expires_in` seconds; the metadata lists no authentication method.
    pub async fn start(expires_in: u64) -> Self {
        Self::start_with(expires_in, &[], &[]).await
    }

    /// `auth_methods`: the metadata's `token_endpoint_auth_methods_supported` (omitted when
    /// empty); `withheld`: scopes never granted, whatever the client asks.
    pub async fn start_with(expires_in: u64, auth_methods: &[&str], withheld: &[&str]) -> Self {
        let state = Arc::new(Mutex::new(TokenState {
            expires_in,
            auth_methods: auth_methods.iter().map(|m| m.to_string()).collect(),
            withheld: withheld.iter().map(|m| m.to_string()).collect(),
            ..TokenState::default()
        }));
        let app = Router::new()
            .route("/token", post(issue))
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .with_state(state.clone());
        let addr = serve(app).await;
        let issuer = format!("http://{addr}");
        state.lock().unwrap().issuer = issuer.clone();
        Self {
            url: format!("{issuer}/token"),
            issuer,
            state,
        }
    }

    /// Every form posted so far, as (key, value) pairs in order.
    pub fn forms(&self) -> Vec<Vec<(String, String)>> {
        self.requests().into_iter().map(|r| r.form).collect()
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenTokenRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The scopes granted to `token` (`None`: not issued here).
    pub fn scopes_of(&self, token: &str) -> Option<Vec<String>> {
        self.state.lock().unwrap().scopes.get(token).cloned()
    }
}

async fn metadata(State(state): State<Arc<Mutex<TokenState>>>) -> Response {
    let state = state.lock().unwrap();
    let mut body = serde_json::json!({
        "issuer": state.issuer,
        "token_endpoint": format!("{}/token", state.issuer),
        "grant_types_supported": ["client_credentials", "refresh_token"],
    });
    if !state.auth_methods.is_empty() {
        body["token_endpoint_auth_methods_supported"] = serde_json::json!(state.auth_methods);
    }
    axum::Json(body).into_response()
}

async fn issue(
    State(state): State<Arc<Mutex<TokenState>>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let seen = SeenTokenRequest {
        form: url::form_urlencoded::parse(body.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    };
    let grant = seen.field("grant_type").unwrap_or_default();
    let mut state = state.lock().unwrap();
    let valid = match grant.as_str() {
        "client_credentials" => client_authenticated(&seen),
        "refresh_token" => seen.field("refresh_token").is_some(),
        _ => false,
    };
    let asked = seen.field("scope").unwrap_or_default();
    state.requests.push(seen);
    if !valid {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(serde_json::json!({
                "error": "invalid_client",
                "error_description": "unknown client or bad credentials",
            })),
        )
            .into_response();
    }
    let number = state.requests.len();
    let token = format!("tok-{number}");
    let granted: Vec<String> = asked
        .split_whitespace()
        .filter(|s| !state.withheld.iter().any(|w| w == s))
        .map(str::to_string)
        .collect();
    state.scopes.insert(token.clone(), granted.clone());
    let mut answer = serde_json::json!({
        "access_token": token,
        "token_type": "bearer",
        "expires_in": state.expires_in,
        "refresh_token": format!("refresh-{number}"),
    });
    if !granted.is_empty() {
        answer["scope"] = serde_json::json!(granted.join(" "));
    }
    axum::Json(answer).into_response()
}

/// The client proved it is [`CLIENT_ID`]: a Basic pair (form-urlencoded, RFC 6749 §2.3.1), the
/// secret in the form, or a JWT assertion naming it (its signature is the test's to verify).
fn client_authenticated(seen: &SeenTokenRequest) -> bool {
    if let Some(basic) = seen
        .authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Basic "))
    {
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(basic) else {
            return false;
        };
        let pair = String::from_utf8_lossy(&decoded).into_owned();
        let as_form = pair.replacen(':', "=", 1);
        let mut parts = url::form_urlencoded::parse(as_form.as_bytes());
        return parts
            .next()
            .is_some_and(|(id, secret)| id == CLIENT_ID && secret == CLIENT_SECRET);
    }
    if seen.field("client_assertion_type").as_deref() == Some(JWT_BEARER) {
        return seen.field("client_assertion").is_some()
            && seen.field("client_id").is_none_or(|id| id == CLIENT_ID);
    }
    seen.field("client_id").as_deref() == Some(CLIENT_ID)
        && seen.field("client_secret").as_deref() == Some(CLIENT_SECRET)
}

#[derive(Clone)]
struct ProxyState {
    upstream: String,
    seen: Arc<Mutex<Vec<Option<String>>>>,
    http: reqwest::Client,
    /// `Some`: a protected resource of this authorization server.
    guard: Option<Arc<Guard>>,
}

/// What [`AuthProxy::protected`] checks.
struct Guard {
    tokens: FakeTokenEndpoint,
    /// The scope `tools/call` needs.
    call_scope: Option<String>,
    /// The resource's `scopes_supported`.
    scopes_supported: Vec<String>,
    /// The proxy's own base URL (set once listening).
    base: Mutex<String>,
    prm_requests: Mutex<Vec<String>>,
}

/// A reverse proxy to `upstream` (an MCP server's base URL) that demands `Authorization`.
pub struct AuthProxy {
    pub url: String,
    seen: Arc<Mutex<Vec<Option<String>>>>,
    guard: Option<Arc<Guard>>,
}

impl AuthProxy {
    pub async fn start(upstream: &str) -> Self {
        Self::start_inner(upstream, None).await
    }

    /// A protected resource whose tokens `tokens` issues: its metadata at
    /// `/.well-known/oauth-protected-resource/mcp` (resource `{url}/mcp`, `scopes_supported`),
    /// a 401 naming it for a missing or unknown token, and a 403 `insufficient_scope` for a
    /// `tools/call` whose token lacks `call_scope`.
    pub async fn protected(
        upstream: &str,
        tokens: &FakeTokenEndpoint,
        scopes_supported: &[&str],
        call_scope: Option<&str>,
    ) -> Self {
        let guard = Arc::new(Guard {
            tokens: tokens.clone(),
            call_scope: call_scope.map(str::to_string),
            scopes_supported: scopes_supported.iter().map(|s| s.to_string()).collect(),
            base: Mutex::new(String::new()),
            prm_requests: Mutex::new(Vec::new()),
        });
        Self::start_inner(upstream, Some(guard)).await
    }

    async fn start_inner(upstream: &str, guard: Option<Arc<Guard>>) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = ProxyState {
            upstream: upstream.trim_end_matches('/').to_string(),
            seen: seen.clone(),
            http: reqwest::Client::new(),
            guard: guard.clone(),
        };
        let app = Router::new()
            .route(
                "/.well-known/oauth-protected-resource/{*path}",
                get(resource_metadata),
            )
            .fallback(forward)
            .with_state(state);
        let addr = serve(app).await;
        let url = format!("http://{addr}");
        if let Some(guard) = &guard {
            *guard.base.lock().unwrap() = url.clone();
        }
        Self { url, seen, guard }
    }

    /// The `Authorization` header of every request, in order (`None` when absent).
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.seen.lock().unwrap().clone()
    }

    /// The paths of the protected-resource metadata requests, in order.
    pub fn metadata_requests(&self) -> Vec<String> {
        self.guard
            .as_ref()
            .map(|g| g.prm_requests.lock().unwrap().clone())
            .unwrap_or_default()
    }
}

async fn resource_metadata(State(state): State<ProxyState>, request: Request) -> Response {
    let Some(guard) = &state.guard else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let path = request.uri().path().to_string();
    guard.prm_requests.lock().unwrap().push(path.clone());
    if path != "/.well-known/oauth-protected-resource/mcp" {
        return StatusCode::NOT_FOUND.into_response();
    }
    let base = guard.base.lock().unwrap().clone();
    let mut body = serde_json::json!({
        "resource": format!("{base}/mcp"),
        "authorization_servers": [guard.tokens.issuer],
    });
    if !guard.scopes_supported.is_empty() {
        body["scopes_supported"] = serde_json::json!(guard.scopes_supported);
    }
    axum::Json(body).into_response()
}

/// The guard's verdict on one request: `None` to forward it.
fn refuse(guard: &Guard, auth: Option<&str>, body: &[u8]) -> Option<Response> {
    let base = guard.base.lock().unwrap().clone();
    let metadata = format!("{base}/.well-known/oauth-protected-resource/mcp");
    let scopes = auth
        .and_then(|a| a.strip_prefix("Bearer "))
        .and_then(|token| guard.tokens.scopes_of(token));
    let Some(scopes) = scopes else {
        let challenge = format!("Bearer resource_metadata=\"{metadata}\"");
        return Some((StatusCode::UNAUTHORIZED, [("www-authenticate", challenge)]).into_response());
    };
    let method = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("method").and_then(|m| m.as_str()).map(str::to_string));
    if let Some(needed) = &guard.call_scope
        && method.as_deref() == Some("tools/call")
        && !scopes.contains(needed)
    {
        let challenge = format!(
            "Bearer error=\"insufficient_scope\", scope=\"{needed}\", resource_metadata=\"{metadata}\""
        );
        return Some((StatusCode::FORBIDDEN, [("www-authenticate", challenge)]).into_response());
    }
    None
}

async fn forward(State(state): State<ProxyState>, request: Request) -> Response {
    let auth = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    state.seen.lock().unwrap().push(auth.clone());
    if state.guard.is_none() && auth.is_none() {
        return (StatusCode::UNAUTHORIZED, [("www-authenticate", "Bearer")]).into_response();
    }
    let method = reqwest::Method::from_bytes(request.method().as_str().as_bytes()).unwrap();
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in request.headers() {
        if matches!(name.as_str(), "host" | "authorization" | "content-length") {
            continue;
        }
        headers.insert(name.clone(), value.clone());
    }
    let body = axum::body::to_bytes(request.into_body(), 10 * 1024 * 1024)
        .await
        .unwrap_or_default();
    if let Some(guard) = &state.guard
        && let Some(refusal) = refuse(guard, auth.as_deref(), &body)
    {
        return refusal;
    }
    let upstream = state
        .http
        .request(method, format!("{}{path}", state.upstream))
        .headers(headers)
        .body(body)
        .send()
        .await;
    let upstream = match upstream {
        Ok(response) => response,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    let mut response = Response::builder().status(upstream.status().as_u16());
    let mut copied = HeaderMap::new();
    for (name, value) in upstream.headers() {
        if matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            continue;
        }
        copied.insert(name.clone(), value.clone());
    }
    if let Some(headers) = response.headers_mut() {
        headers.extend(copied);
    }
    response
        .body(Body::from_stream(upstream.bytes_stream()))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}
