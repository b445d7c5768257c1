//! A fake Docker Engine API on 127.0.0.1: the container, exec and image endpoints bollard
//! calls, with containers kept in memory and every call recorded.
//!
//! Paths are accepted with or without the `/v1.NN` version prefix. `POST /exec/{id}/start`
//! answers like the real engine for a non-tty exec: `101 Switching Protocols`, then the
//! multiplexed stream (8-byte frame headers: stream type 1 = stdout / 2 = stderr, three zero
//! bytes, big-endian payload length). What a command prints is scripted with
//! [`FakeDocker::on_exec`]; nothing is ever run.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::serve;

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct DockerCall {
    pub method: String,
    /// Without the version prefix, e.g. `/containers/create`.
    pub path: String,
    pub query: BTreeMap<String, String>,
    /// The JSON body, or `Null` when there was none.
    pub body: Value,
}

impl DockerCall {
    /// `METHOD /path` — handy for asserting call sequences.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// A container the fake knows.
#[derive(Clone, Debug)]
pub struct FakeContainer {
    pub id: String,
    pub name: String,
    pub image: String,
    pub labels: BTreeMap<String, String>,
    pub running: bool,
    /// The create body as sent (`Image`, `Cmd`, `HostConfig`, …).
    pub config: Value,
}

/// What an exec prints and how it ends.
#[derive(Clone, Debug, Default)]
pub struct ExecReply {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i64,
    /// Keep the output stream open forever (a command that never finishes).
    pub hang: bool,
}

impl ExecReply {
    pub fn stdout(text: impl Into<String>) -> Self {
        Self {
            stdout: text.into(),
            ..Self::default()
        }
    }

    pub fn stderr(mut self, text: impl Into<String>) -> Self {
        self.stderr = text.into();
        self
    }

    pub fn exit_code(mut self, code: i64) -> Self {
        self.exit_code = code;
        self
    }

    pub fn hang() -> Self {
        Self {
            hang: true,
            ..Self::default()
        }
    }
}

type ExecHandler = Arc<dyn Fn(&[String]) -> ExecReply + Send + Sync>;

struct Exec {
    container_id: String,
    cmd: Vec<String>,
    reply: Option<ExecReply>,
}

#[derive(Default)]
struct Engine {
    containers: Vec<FakeContainer>,
    execs: HashMap<String, Exec>,
    calls: Vec<DockerCall>,
    missing_images: BTreeSet<String>,
    next_id: u64,
}

impl Engine {
    fn new_id(&mut self) -> String {
        self.next_id += 1;
        format!("{:064x}", 0xd0c0_0000_u64 + self.next_id)
    }

    /// By id, id prefix or name (with or without the leading '/').
    fn find(&mut self, key: &str) -> Option<&mut FakeContainer> {
        let key = key.trim_start_matches('/');
        self.containers
            .iter_mut()
            .find(|c| c.name == key || c.id == key || (key.len() >= 12 && c.id.starts_with(key)))
    }
}

#[derive(Clone)]
struct Shared {
    engine: Arc<Mutex<Engine>>,
    on_exec: Arc<Mutex<ExecHandler>>,
}

impl Shared {
    fn engine(&self) -> MutexGuard<'_, Engine> {
        self.engine
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The fake engine; point `sandbox.docker.host` at [`FakeDocker::url`].
pub struct FakeDocker {
    addr: SocketAddr,
    shared: Shared,
}

impl FakeDocker {
    pub async fn start() -> Self {
        let default_handler: ExecHandler = Arc::new(|_: &[String]| ExecReply::default());
        let shared = Shared {
            engine: Arc::default(),
            on_exec: Arc::new(Mutex::new(default_handler)),
        };
        let state = shared.clone();
        let router = Router::new().fallback(move |request: Request| {
            let state = state.clone();
            async move { handle(state, request).await }
        });
        let addr = serve(router).await;
        Self { addr, shared }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Decides what each exec prints from its full command line (`Cmd`).
    pub fn on_exec(&self, handler: impl Fn(&[String]) -> ExecReply + Send + Sync + 'static) {
        *self
            .shared
            .on_exec
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(handler);
    }

    /// Pretends a container already exists (left over from an earlier run); returns its id.
    pub fn add_container(
        &self,
        name: &str,
        image: &str,
        labels: &[(&str, &str)],
        running: bool,
    ) -> String {
        let mut engine = self.shared.engine();
        let id = engine.new_id();
        engine.containers.push(FakeContainer {
            id: id.clone(),
            name: name.to_string(),
            image: image.to_string(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            running,
            config: Value::Null,
        });
        id
    }

    /// Makes `image` unknown until it is pulled (`POST /images/create`).
    pub fn remove_image(&self, image: &str) {
        self.shared
            .engine()
            .missing_images
            .insert(image.to_string());
    }

    pub fn calls(&self) -> Vec<DockerCall> {
        self.shared.engine().calls.clone()
    }

    /// Calls as `METHOD /path` lines, without the health checks (`/_ping`, `/version`).
    pub fn call_lines(&self) -> Vec<String> {
        self.calls()
            .iter()
            .filter(|c| c.path != "/_ping" && c.path != "/version")
            .map(DockerCall::line)
            .collect()
    }

    pub fn clear_calls(&self) {
        self.shared.engine().calls.clear();
    }

    pub fn containers(&self) -> Vec<FakeContainer> {
        self.shared.engine().containers.clone()
    }

    pub fn container(&self, name: &str) -> Option<FakeContainer> {
        self.shared.engine().find(name).cloned()
    }

    /// Command lines of every exec created so far.
    pub fn exec_commands(&self) -> Vec<Vec<String>> {
        let engine = self.shared.engine();
        let mut execs: Vec<(&String, &Exec)> = engine.execs.iter().collect();
        execs.sort_by_key(|(id, _)| (*id).clone());
        execs.into_iter().map(|(_, e)| e.cmd.clone()).collect()
    }
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn error(status: StatusCode, message: String) -> Response {
    json_response(status, json!({ "message": message }))
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// `/v1.47/containers/json` → `/containers/json`.
fn strip_version(path: &str) -> &str {
    let Some(rest) = path.strip_prefix("/v") else {
        return path;
    };
    match rest.find('/') {
        Some(slash)
            if rest[..slash]
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.') =>
        {
            &rest[slash..]
        }
        _ => path,
    }
}

async fn handle(state: Shared, mut request: Request) -> Response {
    let method = request.method().clone();
    let path = strip_version(request.uri().path()).to_string();
    let query: BTreeMap<String, String> =
        axum::extract::Query::<BTreeMap<String, String>>::try_from_uri(request.uri())
            .map(|q| q.0)
            .unwrap_or_default();
    let upgrade = request
        .extensions_mut()
        .remove::<hyper::upgrade::OnUpgrade>();
    let bytes = axum::body::to_bytes(std::mem::take(request.body_mut()), usize::MAX)
        .await
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    state.engine().calls.push(DockerCall {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        body: body.clone(),
    });
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (&method, segments.as_slice()) {
        (&Method::GET | &Method::HEAD, ["_ping"]) => {
            ([(header::CONTENT_TYPE, "text/plain")], "OK").into_response()
        }
        (&Method::GET, ["version"]) => json_response(
            StatusCode::OK,
            json!({"Version": "27.3.1", "ApiVersion": "1.47", "MinAPIVersion": "1.24",
                   "Os": "linux", "Arch": "amd64"}),
        ),
        (&Method::POST, ["images", "create"]) => {
            let image = query.get("fromImage").cloned().unwrap_or_default();
            let mut engine = state.engine();
            engine.missing_images.remove(&image);
            if let Some(tag) = query.get("tag") {
                engine.missing_images.remove(&format!("{image}:{tag}"));
            }
            json_response(StatusCode::OK, json!({"status": format!("Pulled {image}")}))
        }
        (&Method::POST, ["containers", "create"]) => create(&state, &query, body),
        (&Method::GET, ["containers", "json"]) => list(&state, &query),
        (&Method::GET, ["containers", id, "json"]) => inspect(&state, id),
        (&Method::POST, ["containers", id, "start"]) => set_running(&state, id, true),
        (&Method::POST, ["containers", id, "stop"]) => set_running(&state, id, false),
        (&Method::DELETE, ["containers", id]) => remove(&state, id, &query),
        (&Method::POST, ["containers", id, "exec"]) => create_exec(&state, id, &body),
        (&Method::POST, ["exec", id, "start"]) => start_exec(&state, id, upgrade),
        (&Method::GET, ["exec", id, "json"]) => inspect_exec(&state, id),
        _ => error(
            StatusCode::NOT_FOUND,
            format!("fake docker: no route for {method} {path}"),
        ),
    }
}

fn create(state: &Shared, query: &BTreeMap<String, String>, body: Value) -> Response {
    let name = query.get("name").cloned().unwrap_or_default();
    let image = body["Image"].as_str().unwrap_or_default().to_string();
    let mut engine = state.engine();
    if engine.missing_images.contains(&image) {
        return error(StatusCode::NOT_FOUND, format!("No such image: {image}"));
    }
    if !name.is_empty() && engine.find(&name).is_some() {
        return error(
            StatusCode::CONFLICT,
            format!("Conflict. The container name \"/{name}\" is already in use"),
        );
    }
    let id = engine.new_id();
    let labels = body["Labels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    engine.containers.push(FakeContainer {
        id: id.clone(),
        name: if name.is_empty() { id.clone() } else { name },
        image,
        labels,
        running: false,
        config: body,
    });
    json_response(StatusCode::CREATED, json!({"Id": id, "Warnings": []}))
}

fn list(state: &Shared, query: &BTreeMap<String, String>) -> Response {
    let all = query.get("all").is_some_and(|v| v == "true" || v == "1");
    let filters: HashMap<String, Vec<String>> = query
        .get("filters")
        .and_then(|f| serde_json::from_str(f).ok())
        .unwrap_or_default();
    let label_filters = filters.get("label").cloned().unwrap_or_default();
    let engine = state.engine();
    let listed: Vec<Value> = engine
        .containers
        .iter()
        .filter(|c| all || c.running)
        .filter(|c| {
            label_filters
                .iter()
                .all(|filter| match filter.split_once('=') {
                    Some((key, value)) => c.labels.get(key).is_some_and(|v| v == value),
                    None => c.labels.contains_key(filter),
                })
        })
        .map(|c| {
            json!({
                "Id": c.id,
                "Names": [format!("/{}", c.name)],
                "Image": c.image,
                "Labels": c.labels,
                "State": if c.running { "running" } else { "exited" },
                "Status": if c.running { "Up 1 minute" } else { "Exited (0)" },
            })
        })
        .collect();
    json_response(StatusCode::OK, Value::Array(listed))
}

fn inspect(state: &Shared, id: &str) -> Response {
    let mut engine = state.engine();
    let Some(c) = engine.find(id) else {
        return error(StatusCode::NOT_FOUND, format!("No such container: {id}"));
    };
    json_response(
        StatusCode::OK,
        json!({
            "Id": c.id,
            "Name": format!("/{}", c.name),
            "State": {"Running": c.running, "Status": if c.running { "running" } else { "exited" }},
            "Config": {"Image": c.image, "Labels": c.labels},
        }),
    )
}

fn set_running(state: &Shared, id: &str, running: bool) -> Response {
    let mut engine = state.engine();
    let Some(c) = engine.find(id) else {
        return error(StatusCode::NOT_FOUND, format!("No such container: {id}"));
    };
    if c.running == running {
        return StatusCode::NOT_MODIFIED.into_response();
    }
    c.running = running;
    no_content()
}

fn remove(state: &Shared, id: &str, query: &BTreeMap<String, String>) -> Response {
    let force = query.get("force").is_some_and(|v| v == "true" || v == "1");
    let mut engine = state.engine();
    let Some(c) = engine.find(id) else {
        return error(StatusCode::NOT_FOUND, format!("No such container: {id}"));
    };
    if c.running && !force {
        return error(
            StatusCode::CONFLICT,
            format!("cannot remove container \"/{id}\": container is running"),
        );
    }
    let gone = c.id.clone();
    engine.containers.retain(|c| c.id != gone);
    no_content()
}

fn create_exec(state: &Shared, id: &str, body: &Value) -> Response {
    let mut engine = state.engine();
    let Some(c) = engine.find(id) else {
        return error(StatusCode::NOT_FOUND, format!("No such container: {id}"));
    };
    if !c.running {
        return error(
            StatusCode::CONFLICT,
            format!("container {id} is not running"),
        );
    }
    let container_id = c.id.clone();
    let cmd = body["Cmd"]
        .as_array()
        .map(|cmd| {
            cmd.iter()
                .map(|a| a.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    let exec_id = engine.new_id();
    engine.execs.insert(
        exec_id.clone(),
        Exec {
            container_id,
            cmd,
            reply: None,
        },
    );
    json_response(StatusCode::CREATED, json!({"Id": exec_id}))
}

/// One frame of Docker's multiplexed stream.
fn frame(stream: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![stream, 0, 0, 0];
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn start_exec(state: &Shared, id: &str, upgrade: Option<hyper::upgrade::OnUpgrade>) -> Response {
    let handler = state
        .on_exec
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    let reply = {
        let mut engine = state.engine();
        let Some(exec) = engine.execs.get_mut(id) else {
            return error(
                StatusCode::NOT_FOUND,
                format!("No such exec instance: {id}"),
            );
        };
        let reply = handler(&exec.cmd);
        exec.reply = Some(reply.clone());
        reply
    };
    let mut stream = Vec::new();
    if !reply.stdout.is_empty() {
        stream.extend(frame(1, reply.stdout.as_bytes()));
    }
    if !reply.stderr.is_empty() {
        stream.extend(frame(2, reply.stderr.as_bytes()));
    }
    let Some(upgrade) = upgrade else {
        // A client that did not ask to upgrade gets the stream as the response body.
        return Response::builder()
            .status(StatusCode::OK)
            .header(
                header::CONTENT_TYPE,
                "application/vnd.docker.multiplexed-stream",
            )
            .body(Body::from(stream))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    };
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else {
            return;
        };
        let mut io = hyper_util::rt::TokioIo::new(upgraded);
        if reply.hang {
            // Holds the connection open; the client gives up at its deadline.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return;
        }
        let _ = io.write_all(&stream).await;
        let _ = io.shutdown().await;
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "tcp")
        .header(
            header::CONTENT_TYPE,
            "application/vnd.docker.multiplexed-stream",
        )
        .body(Body::empty())
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn inspect_exec(state: &Shared, id: &str) -> Response {
    let engine = state.engine();
    let Some(exec) = engine.execs.get(id) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("No such exec instance: {id}"),
        );
    };
    let running = exec.reply.as_ref().is_some_and(|r| r.hang);
    let exit_code = match &exec.reply {
        Some(reply) if !reply.hang => json!(reply.exit_code),
        _ => Value::Null,
    };
    json_response(
        StatusCode::OK,
        json!({"ID": id, "Running": running, "ExitCode": exit_code,
               "ContainerID": exec.container_id, "Pid": 0}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_only_a_version_prefix() {
        assert_eq!(strip_version("/v1.47/containers/json"), "/containers/json");
        assert_eq!(strip_version("/containers/json"), "/containers/json");
        assert_eq!(strip_version("/version"), "/version");
        assert_eq!(frame(2, b"hi"), [2, 0, 0, 0, 0, 0, 0, 2, b'h', b'i']);
    }
}
