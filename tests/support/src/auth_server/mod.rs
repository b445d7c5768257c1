//! A complete OAuth 2.1 authorization server and a protected MCP resource in front of a real
//! MCP server, for tests of the authorization-code flow (and anything else that discovers its
//! authorization server).
//!
//! Two listeners on 127.0.0.1:
//! - the resource (`resource_url()`, an MCP endpoint at `/mcp`): protected-resource metadata
//!   (RFC 9728) at `/.well-known/oauth-protected-resource/mcp` and at the root well-known
//!   path; requests without a valid, unexpired access token get 401 with
//!   `WWW-Authenticate: Bearer resource_metadata="…"` (plus `scope="…"` when configured);
//!   valid ones are forwarded to the upstream MCP server, streaming the answer.
//! - the authorization server (`issuer()`): metadata (RFC 8414) with configurable fields,
//!   `/register` (RFC 7591), `/authorize` that approves at once and redirects with a code (or
//!   with the configured `error`), `/token` that checks the PKCE S256 verifier, the redirect
//!   URI, the client's authentication by its method and issues rotating refresh tokens.
//!
//! Every request to either is recorded (`requests()`), so tests assert on what the client
//! sent, not only on whether it got through.

mod endpoints;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// What the fake publishes and demands. `Default` is a permissive server: dynamic registration
/// on, `none`/`client_secret_basic`/`client_secret_post` accepted, no scopes.
#[derive(Clone, Debug)]
pub struct AuthServerOptions {
    /// The AS metadata's `scopes_supported` (`None`: omitted).
    pub scopes_supported: Option<Vec<String>>,
    /// The AS metadata's `token_endpoint_auth_methods_supported`.
    pub token_endpoint_auth_methods: Vec<String>,
    /// Whether `registration_endpoint` is published and `/register` answers.
    pub registration: bool,
    /// The AS metadata's `client_id_metadata_document_supported` (`None`: omitted); when
    /// `Some(true)`, an `https://` or `http://` client id is accepted unregistered, as a public
    /// client.
    pub client_id_metadata_document_supported: Option<bool>,
    /// The method `/register` assigns (`None`: the one the request asked for, else `none`
    /// when allowed, else the first supported).
    pub registered_auth_method: Option<String>,
    /// A pre-registered client: (client id, client secret, method).
    pub preregistered: Option<(String, String, String)>,
    /// The protected resource's `scopes_supported` (`None`: omitted).
    pub resource_scopes: Option<Vec<String>>,
    /// The scope the resource's challenge names (`scope="…"`), when any.
    pub challenge_scope: Option<String>,
    /// Lifetime of the access tokens `/token` issues.
    pub expires_in: u64,
    /// `/authorize` redirects back with this `error` instead of a code.
    pub authorize_error: Option<String>,
    /// The MCP server (base URL, e.g. `http://127.0.0.1:PORT`) valid requests are forwarded to.
    pub upstream: Option<String>,
}

impl Default for AuthServerOptions {
    fn default() -> Self {
        Self {
            scopes_supported: None,
            token_endpoint_auth_methods: vec![
                "none".into(),
                "client_secret_basic".into(),
                "client_secret_post".into(),
            ],
            registration: true,
            client_id_metadata_document_supported: None,
            registered_auth_method: None,
            preregistered: None,
            resource_scopes: None,
            challenge_scope: None,
            expires_in: 3600,
            authorize_error: None,
            upstream: None,
        }
    }
}

/// One request either listener received.
#[derive(Clone, Debug)]
pub struct AuthRequest {
    /// `resource` or `as`.
    pub server: &'static str,
    pub method: String,
    /// The path without the query.
    pub path: String,
    /// Query parameters (GET) or form fields (POST `/token`), in order.
    pub params: Vec<(String, String)>,
    /// The JSON body (`/register`).
    pub json: Option<Value>,
    pub authorization: Option<String>,
}

impl AuthRequest {
    /// The first parameter named `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The fake authorization server and protected resource.
#[derive(Clone)]
pub struct FakeAuthServer {
    resource_base: String,
    issuer: String,
    state: Arc<Mutex<AuthState>>,
}

#[derive(Clone)]
pub(super) struct Client {
    secret: Option<String>,
    method: String,
}

pub(super) struct Code {
    client_id: String,
    challenge: Option<String>,
    redirect_uri: String,
    scope: Option<String>,
}

pub(super) struct Grant {
    client_id: String,
    scope: Option<String>,
}

pub(super) struct AuthState {
    options: AuthServerOptions,
    resource_base: String,
    issuer: String,
    requests: Vec<AuthRequest>,
    clients: HashMap<String, Client>,
    codes: HashMap<String, Code>,
    /// Access token → when it stops being accepted.
    access_tokens: HashMap<String, Instant>,
    refresh_tokens: HashMap<String, Grant>,
    counter: u64,
    http: reqwest::Client,
}

impl FakeAuthServer {
    pub async fn start(options: AuthServerOptions) -> Self {
        let resource_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let as_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let resource_base = format!("http://{}", resource_listener.local_addr().unwrap());
        let issuer = format!("http://{}", as_listener.local_addr().unwrap());
        let mut clients = HashMap::new();
        if let Some((id, secret, method)) = &options.preregistered {
            clients.insert(
                id.clone(),
                Client {
                    secret: Some(secret.clone()),
                    method: method.clone(),
                },
            );
        }
        let state = Arc::new(Mutex::new(AuthState {
            options,
            resource_base: resource_base.clone(),
            issuer: issuer.clone(),
            requests: Vec::new(),
            clients,
            codes: HashMap::new(),
            access_tokens: HashMap::new(),
            refresh_tokens: HashMap::new(),
            counter: 0,
            http: reqwest::Client::new(),
        }));
        let resource = Router::new()
            .fallback(resource_handler)
            .with_state(state.clone());
        let auth = Router::new().fallback(as_handler).with_state(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(resource_listener, resource).await;
        });
        tokio::spawn(async move {
            let _ = axum::serve(as_listener, auth).await;
        });
        Self {
            resource_base,
            issuer,
            state,
        }
    }

    /// The protected MCP endpoint (`{base}/mcp`), what a client is configured with.
    pub fn resource_url(&self) -> String {
        format!("{}/mcp", self.resource_base)
    }

    /// The authorization server's issuer (its base URL).
    pub fn issuer(&self) -> String {
        self.issuer.clone()
    }

    /// `{issuer}/token`.
    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.issuer)
    }

    /// Every request received so far, both listeners, in order.
    pub fn requests(&self) -> Vec<AuthRequest> {
        self.lock().requests.clone()
    }

    /// The requests to one path of one listener (`"as"`, `"/token"`), in order.
    pub fn requests_to(&self, server: &str, path: &str) -> Vec<AuthRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.server == server && r.path == path)
            .collect()
    }

    /// Makes every access token issued so far invalid (the resource answers 401), as if they
    /// had expired: the client must refresh.
    pub fn expire_access_tokens(&self) {
        self.lock().access_tokens.clear();
    }

    /// Whether `token` is a live access token.
    pub fn is_valid_access_token(&self, token: &str) -> bool {
        self.lock()
            .access_tokens
            .get(token)
            .is_some_and(|until| Instant::now() < *until)
    }

    fn lock(&self) -> MutexGuard<'_, AuthState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn authorization(headers: &HeaderMap) -> Option<String> {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn parse_pairs(text: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(text.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

pub(super) fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

async fn resource_handler(
    State(state): State<Arc<Mutex<AuthState>>>,
    request: Request,
) -> Response {
    let path = request.uri().path().to_string();
    let auth = authorization(request.headers());
    let (prm_url, metadata, challenge_scope, upstream, http, valid) = {
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        s.requests.push(AuthRequest {
            server: "resource",
            method: request.method().to_string(),
            path: path.clone(),
            params: parse_pairs(request.uri().query().unwrap_or("")),
            json: None,
            authorization: auth.clone(),
        });
        let mut metadata = json!({
            "resource": format!("{}/mcp", s.resource_base),
            "authorization_servers": [s.issuer],
            "bearer_methods_supported": ["header"],
        });
        if let Some(scopes) = &s.options.resource_scopes {
            metadata["scopes_supported"] = json!(scopes);
        }
        let token = auth
            .as_deref()
            .and_then(|a| a.strip_prefix("Bearer "))
            .unwrap_or("");
        let valid = s
            .access_tokens
            .get(token)
            .is_some_and(|until| Instant::now() < *until);
        (
            format!(
                "{}/.well-known/oauth-protected-resource/mcp",
                s.resource_base
            ),
            metadata,
            s.options.challenge_scope.clone(),
            s.options.upstream.clone(),
            s.http.clone(),
            valid,
        )
    };
    if path.starts_with("/.well-known/oauth-protected-resource") {
        return axum::Json(metadata).into_response();
    }
    if !valid {
        let mut challenge = format!("Bearer resource_metadata=\"{prm_url}\"");
        if auth.is_some() {
            challenge.push_str(", error=\"invalid_token\"");
        }
        if let Some(scope) = challenge_scope {
            challenge.push_str(&format!(", scope=\"{scope}\""));
        }
        return (StatusCode::UNAUTHORIZED, [("www-authenticate", challenge)]).into_response();
    }
    match upstream {
        Some(upstream) => forward(&http, &upstream, request).await,
        None => (StatusCode::BAD_GATEWAY, "no upstream MCP server configured").into_response(),
    }
}

async fn forward(http: &reqwest::Client, upstream: &str, request: Request) -> Response {
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
    let answer = http
        .request(method, format!("{}{path}", upstream.trim_end_matches('/')))
        .headers(headers)
        .body(body)
        .send()
        .await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    let mut response = Response::builder().status(answer.status().as_u16());
    if let Some(headers) = response.headers_mut() {
        for (name, value) in answer.headers() {
            if !matches!(
                name.as_str(),
                "content-length" | "transfer-encoding" | "connection"
            ) {
                headers.insert(name.clone(), value.clone());
            }
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

async fn as_handler(State(state): State<Arc<Mutex<AuthState>>>, request: Request) -> Response {
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or("").to_string();
    let auth = authorization(request.headers());
    let body = axum::body::to_bytes(request.into_body(), 1024 * 1024)
        .await
        .unwrap_or_default();
    let body = String::from_utf8_lossy(&body).into_owned();
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    let (params, json_body) = match (method.as_str(), path.as_str()) {
        ("POST", "/register") => (Vec::new(), serde_json::from_str(&body).ok()),
        ("POST", _) => (parse_pairs(&body), None),
        _ => (parse_pairs(&query), None),
    };
    s.requests.push(AuthRequest {
        server: "as",
        method: method.clone(),
        path: path.clone(),
        params: params.clone(),
        json: json_body.clone(),
        authorization: auth.clone(),
    });
    match (method.as_str(), path.as_str()) {
        ("GET", "/.well-known/oauth-authorization-server")
        | ("GET", "/.well-known/openid-configuration") => endpoints::metadata(&s).into_response(),
        ("POST", "/register") if s.options.registration => {
            endpoints::register(&mut s, json_body.unwrap_or(Value::Null))
        }
        ("GET", "/authorize") => endpoints::authorize(&mut s, &params),
        ("POST", "/token") => endpoints::token(&mut s, &params, auth.as_deref()),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}
