//! The CLI's way to a running daemon: its HTTP API over the Unix socket in the data dir.
//!
//! Every command finds its daemon first (`cli_locate`, which builds on this). A daemon that
//! answers on the socket is used through the ordinary HTTP API, as the local operator (see
//! [`crate::daemon::local_socket`]); with no daemon the CLI opens the data dir itself; a data dir whose
//! store is locked by a process that does not answer is an error saying so, never a hang or a
//! sled error.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::Method;
use serde_json::Value;

use crate::http::peer::USER_HEADER;

/// How long a daemon gets to answer the first `/healthz` before it counts as not answering.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Time limit of one ordinary request (runs stream as long as they take).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The authority of every request; the socket decides where it goes.
const BASE: &str = "http://localhost";

#[derive(Debug, thiserror::Error)]
pub enum DaemonClientError {
    #[error(
        "the data directory {data_dir} is locked by another process (an antler daemon?), but \
         nothing answers on its socket {socket} ({detail}); if the daemon is starting or \
         stopping, retry in a moment, otherwise stop the process that holds the data directory"
    )]
    NotAnswering {
        data_dir: String,
        socket: String,
        detail: String,
    },
    #[error(
        "the daemon on {socket} did not answer: {detail}; check that it still runs (antler status)"
    )]
    Unreachable { socket: String, detail: String },
    /// The daemon refused the request; `message` says why and what to do.
    #[error("{message}")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    #[error("the daemon sent an answer antler cannot read: {0}")]
    Protocol(String),
}

/// One Server-Sent Event of a run: its name (`messages`, `custom`, `error`, `end`, …) and data.
#[derive(Clone, Debug, PartialEq)]
pub struct SseFrame {
    pub event: String,
    pub data: Value,
}

/// A POST's answer: a JSON body, or an event stream.
pub enum Streamed {
    Json(Value),
    Events(BoxStream<'static, Result<SseFrame, DaemonClientError>>),
}

/// A client of one daemon's HTTP API over its socket. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DaemonClient {
    http: reqwest::Client,
    socket: PathBuf,
    /// The user requests act as (the `x-antler-user` header); `None`: the daemon's `local`.
    user: Option<String>,
}

impl DaemonClient {
    /// Connects to the daemon on `socket` and checks that it answers `/healthz`; the error says
    /// why not (no socket file, refused, timed out).
    pub async fn connect(socket: &Path) -> Result<Self, String> {
        if !socket.exists() {
            return Err("no socket file".to_string());
        }
        let http = reqwest::Client::builder()
            .unix_socket(socket)
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
        let client = Self {
            http,
            socket: socket.to_path_buf(),
            user: None,
        };
        let answer = client
            .request(Method::GET, "/healthz")
            .timeout(CONNECT_TIMEOUT)
            .send()
            .await
            .map_err(error_detail)?;
        if !answer.status().is_success() {
            return Err(format!("/healthz answered HTTP {}", answer.status()));
        }
        Ok(client)
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The same daemon, with requests acting as `user`.
    pub fn acting_as(mut self, user: &str) -> Self {
        self.user = Some(user.to_string());
        self
    }

    /// GETs `path` and returns the JSON body whatever the status (for `/readyz`, whose 503
    /// carries the reason).
    pub async fn get_any_status(&self, path: &str) -> Result<(u16, Value), DaemonClientError> {
        let response = self
            .request(Method::GET, path)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let status = response.status().as_u16();
        let body = response
            .json()
            .await
            .map_err(|e| DaemonClientError::Protocol(e.to_string()))?;
        Ok((status, body))
    }

    /// Sends a request with an optional JSON body; a non-2xx answer becomes
    /// [`DaemonClientError::Api`] with the daemon's message.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, DaemonClientError> {
        let mut request = self.request(method, path).timeout(REQUEST_TIMEOUT);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| self.unreachable(e))?;
        self.answer(response).await
    }

    /// POSTs one file as `multipart/form-data` (field `file`); errors as [`Self::send`].
    pub async fn send_file(
        &self,
        path: &str,
        file_name: &str,
        bytes: Vec<u8>,
    ) -> Result<Value, DaemonClientError> {
        let part = reqwest::multipart::Part::bytes(bytes).file_name(file_name.to_string());
        let form = reqwest::multipart::Form::new().part("file", part);
        let response = self
            .request(Method::POST, path)
            .timeout(REQUEST_TIMEOUT)
            .multipart(form)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        self.answer(response).await
    }

    /// The JSON body of a success, else the API error it carries (a non-JSON body kept as text).
    async fn answer(&self, response: reqwest::Response) -> Result<Value, DaemonClientError> {
        let status = response.status();
        let text = response.text().await.map_err(|e| self.unreachable(e))?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            Ok(body)
        } else {
            Err(api_error(status.as_u16(), &body))
        }
    }

    /// Starts a run on `thread_id` with the `/runs/stream` body `body` and returns its events.
    pub async fn run_stream(
        &self,
        thread_id: &str,
        body: &Value,
    ) -> Result<BoxStream<'static, Result<SseFrame, DaemonClientError>>, DaemonClientError> {
        let path = format!("/api/threads/{}/runs/stream", segment(thread_id));
        match self.post_streaming(&path, body).await? {
            Streamed::Events(frames) => Ok(frames),
            Streamed::Json(_) => Err(DaemonClientError::Protocol(
                "the daemon answered a run with JSON instead of its events".into(),
            )),
        }
    }

    /// POSTs `body` to `path` asking for an event stream: routes that may go on to run
    /// (`/api/commands` after `/approve`) answer with one, and with JSON otherwise.
    pub async fn post_streaming(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<Streamed, DaemonClientError> {
        use eventsource_stream::Eventsource;
        let response = self
            .request(Method::POST, path)
            .header(
                reqwest::header::ACCEPT,
                "text/event-stream, application/json",
            )
            .json(body)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let status = response.status();
        let is_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if !status.is_success() || !is_stream {
            return self.answer(response).await.map(Streamed::Json);
        }
        let socket = self.socket.display().to_string();
        let frames = response.bytes_stream().eventsource().map(move |event| {
            let event = event.map_err(|e| DaemonClientError::Unreachable {
                socket: socket.clone(),
                detail: format!("the event stream broke: {e}"),
            })?;
            let data = serde_json::from_str(&event.data).unwrap_or(Value::String(event.data));
            Ok(SseFrame {
                event: event.event,
                data,
            })
        });
        Ok(Streamed::Events(frames.boxed()))
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{BASE}{path}"));
        match &self.user {
            Some(user) => request.header(USER_HEADER, user),
            None => request,
        }
    }

    fn unreachable(&self, error: reqwest::Error) -> DaemonClientError {
        DaemonClientError::Unreachable {
            socket: self.socket.display().to_string(),
            detail: error_detail(error),
        }
    }
}

fn error_detail(error: reqwest::Error) -> String {
    if error.is_timeout() {
        "no answer in time".to_string()
    } else {
        crate::model::http::causes(&error.without_url())
    }
}

/// Percent-encodes one path segment (agent names and ids come from the command line).
pub fn segment(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The daemon's error as a value: `{"error": {"code", "message"}}`, or any looser shape
/// (`{"error": "…"}`, `{"message": "…"}`, plain text), so the CLI shows the daemon's words.
fn api_error(status: u16, body: &Value) -> DaemonClientError {
    let error = body.get("error").unwrap_or(body);
    let text =
        |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    let message = text(error, "message")
        .or_else(|| error.as_str().map(str::to_string))
        .or_else(|| text(body, "message"))
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| format!("the daemon answered HTTP {status}"));
    let code = text(error, "code")
        .or_else(|| text(body, "code"))
        .unwrap_or_default();
    DaemonClientError::Api {
        status,
        code,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn api_errors_keep_the_daemons_words_whatever_the_shape() {
        let cases = [
            (
                json!({"error": {"code": "agent_not_found", "message": "no agent"}}),
                "agent_not_found",
                "no agent",
            ),
            (json!({"error": "plain"}), "", "plain"),
            (json!({"message": "top", "code": "c"}), "c", "top"),
            (json!("plain text body"), "", "plain text body"),
            (json!(""), "", "the daemon answered HTTP 500"),
        ];
        for (body, code, message) in cases {
            let DaemonClientError::Api {
                code: got_code,
                message: got_message,
                ..
            } = api_error(500, &body)
            else {
                panic!("not an API error");
            };
            assert_eq!((got_code.as_str(), got_message.as_str()), (code, message));
        }
    }

    #[test]
    fn path_segments_cannot_escape() {
        assert_eq!(segment("../x?y"), "%2E%2E%2Fx%3Fy");
        assert_eq!(segment("helper"), "helper");
    }
}
