//! A minimal MCP server over streamable HTTP (one endpoint, `/mcp`) whose behaviour a test
//! scripts: the protocol version its `initialize` answers, and how it answers `tools/call`
//! (at once as JSON; on an event stream that ends before the answer, which then comes on the
//! GET that resumes the stream; or after asking the client to fill a form with
//! `elicitation/create`). Every request is recorded with the moment it arrived.
//!
//! Its one tool is `echo`; the answer's text is the call's arguments (JSON), or "resumed",
//! or the client's elicitation result (JSON).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures::StreamExt;
use futures::stream;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// The session id the fake hands out.
pub const FAKE_MCP_SESSION: &str = "fake-mcp-session";
/// The id of the event that primes a stream which then ends without the answer.
pub const FAKE_MCP_PRIMING_EVENT: &str = "prime-1";
/// The JSON-RPC id of the fake's `elicitation/create` request.
const ELICITATION_ID: u64 = 900;

/// How the fake answers `tools/call`.
#[derive(Clone, Debug)]
pub enum ToolCallReply {
    /// A JSON answer whose text is the call's arguments.
    Json,
    /// An event stream with one priming event (`id: prime-1`, `retry: retry_ms`, no data) that
    /// then ends without the answer (SEP-1699); the answer ("resumed") is sent on the GET that
    /// carries `Last-Event-ID`.
    ResumeAfterClose { retry_ms: u64 },
    /// An event stream that first sends `elicitation/create` with this `requestedSchema`,
    /// waits for the client's answer, then answers the call with it (as JSON text).
    Elicit { requested_schema: Value },
}

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct McpRequest {
    /// `GET`, `POST` or `DELETE`.
    pub http_method: String,
    /// The JSON-RPC method; `None` for a GET, a DELETE, or the client's answer to a request.
    pub rpc_method: Option<String>,
    /// Header names are lowercase.
    pub headers: BTreeMap<String, String>,
    pub body: Value,
    pub at: Instant,
}

impl McpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

#[derive(Default)]
struct Recorded {
    requests: Vec<McpRequest>,
    /// When the tools/call stream of `ResumeAfterClose` ended.
    stream_closed_at: Option<Instant>,
    /// The call waiting for a resumed stream.
    pending_call: Option<Value>,
    /// Where the client's answer to `elicitation/create` goes.
    elicitation_waiter: Option<oneshot::Sender<Value>>,
    elicitation_answers: Vec<Value>,
}

struct Shared {
    protocol_version: String,
    tool_call: ToolCallReply,
    recorded: Mutex<Recorded>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The fake server; it serves until the test's runtime ends.
pub struct FakeMcpServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeMcpServer {
    /// Starts a server whose `initialize` answers `protocol_version`.
    pub async fn start(protocol_version: &str, tool_call: ToolCallReply) -> Self {
        let shared = Arc::new(Shared {
            protocol_version: protocol_version.to_string(),
            tool_call,
            recorded: Mutex::new(Recorded::default()),
        });
        let router = Router::new()
            .route("/mcp", any(handle))
            .with_state(shared.clone());
        let addr = crate::serve(router).await;
        Self { addr, shared }
    }

    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn requests(&self) -> Vec<McpRequest> {
        self.shared.lock().requests.clone()
    }

    /// The first request with JSON-RPC method `method`.
    pub fn request(&self, method: &str) -> Option<McpRequest> {
        self.requests()
            .into_iter()
            .find(|r| r.rpc_method.as_deref() == Some(method))
    }

    /// GET requests (stream opens and resumptions).
    pub fn gets(&self) -> Vec<McpRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.http_method == "GET")
            .collect()
    }

    /// When the `ResumeAfterClose` stream ended.
    pub fn stream_closed_at(&self) -> Option<Instant> {
        self.shared.lock().stream_closed_at
    }

    /// The client's answers to `elicitation/create` (their `result` objects).
    pub fn elicitation_answers(&self) -> Vec<Value> {
        self.shared.lock().elicitation_answers.clone()
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let rpc_method = body["method"].as_str().map(str::to_string);
    shared.lock().requests.push(McpRequest {
        http_method: method.to_string(),
        rpc_method: rpc_method.clone(),
        headers: headers
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect(),
        body: body.clone(),
        at: Instant::now(),
    });
    match method {
        Method::GET => resume(&shared, &headers),
        Method::DELETE => StatusCode::OK.into_response(),
        Method::POST => post(&shared, rpc_method.as_deref(), body),
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

fn post(shared: &Arc<Shared>, rpc_method: Option<&str>, body: Value) -> Response {
    let id = body["id"].clone();
    let Some(rpc_method) = rpc_method else {
        // The client's answer to our request.
        let mut recorded = shared.lock();
        let answer = body["result"].clone();
        recorded.elicitation_answers.push(answer.clone());
        if let Some(waiter) = recorded.elicitation_waiter.take() {
            let _ = waiter.send(answer);
        }
        return StatusCode::ACCEPTED.into_response();
    };
    if id.is_null() {
        return StatusCode::ACCEPTED.into_response();
    }
    match rpc_method {
        "initialize" => json_answer(
            &id,
            json!({
                "protocolVersion": shared.protocol_version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake-mcp", "version": "1.0.0"}
            }),
        ),
        "tools/list" => json_answer(
            &id,
            json!({"tools": [{
                "name": "echo",
                "description": "Answers with its arguments",
                "inputSchema": {"type": "object", "properties": {}}
            }]}),
        ),
        "tools/call" => tool_call(shared, id, body["params"]["arguments"].clone()),
        _ => json_answer(&id, json!({})),
    }
}

fn tool_call(shared: &Arc<Shared>, id: Value, arguments: Value) -> Response {
    match &shared.tool_call {
        ToolCallReply::Json => json_answer(&id, text_result(&arguments.to_string())),
        ToolCallReply::ResumeAfterClose { retry_ms } => {
            shared.lock().pending_call = Some(id);
            let priming = format!("id: {FAKE_MCP_PRIMING_EVENT}\nretry: {retry_ms}\ndata: \n\n");
            let shared = shared.clone();
            let close = stream::once(async move {
                shared.lock().stream_closed_at = Some(Instant::now());
                None
            });
            let events = stream::iter([Some(priming)])
                .chain(close)
                .filter_map(futures::future::ready);
            event_stream(events)
        }
        ToolCallReply::Elicit { requested_schema } => {
            let (waiter, answer) = oneshot::channel();
            shared.lock().elicitation_waiter = Some(waiter);
            let request = json!({
                "jsonrpc": "2.0",
                "id": ELICITATION_ID,
                "method": "elicitation/create",
                "params": {
                    "message": "Please fill in the form",
                    "requestedSchema": requested_schema
                }
            });
            let first = stream::once(async move { event(None, &request) });
            let then = stream::once(async move {
                let answer = answer.await.unwrap_or(Value::Null);
                let result = text_result(&answer.to_string());
                event(None, &response(&id, result))
            });
            event_stream(first.chain(then))
        }
    }
}

/// A GET: the resumption of a stream that ended without its answer, or (without
/// `Last-Event-ID`, or with nothing pending) no standalone stream.
fn resume(shared: &Arc<Shared>, headers: &HeaderMap) -> Response {
    if headers.get("last-event-id").is_none() {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let Some(id) = shared.lock().pending_call.take() else {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    };
    let answer = event(Some("resumed-1"), &response(&id, text_result("resumed")));
    event_stream(stream::iter([answer]))
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn json_answer(id: &Value, result: Value) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (
                header::HeaderName::from_static("mcp-session-id"),
                FAKE_MCP_SESSION,
            ),
        ],
        response(id, result).to_string(),
    )
        .into_response()
}

fn event(id: Option<&str>, message: &Value) -> String {
    match id {
        Some(id) => format!("event: message\nid: {id}\ndata: {message}\n\n"),
        None => format!("event: message\ndata: {message}\n\n"),
    }
}

fn event_stream(events: impl futures::Stream<Item = String> + Send + 'static) -> Response {
    let body = Body::from_stream(events.map(|e| Ok::<_, Infallible>(Bytes::from(e))));
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (
                header::HeaderName::from_static("mcp-session-id"),
                FAKE_MCP_SESSION,
            ),
        ],
        body,
    )
        .into_response()
}
