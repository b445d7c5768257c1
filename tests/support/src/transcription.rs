//! A fake OpenAI-compatible transcription service: `POST /v1/audio/transcriptions`, read with
//! axum's `Multipart` as OpenAI, Groq and the Whisper servers read it, every request recorded
//! (its fields, the file part's name, type and size, whether the file is OGG), answered from a
//! script (a transcript, or an error status and body), else with a default transcript.
//! `FakeTelegram::send_voice` sends a voice note through the fake Telegram.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// A real voice note: 1.5 seconds of espeak-ng's voice saying "testing one two three",
/// OGG/Opus as Telegram records them (how it was made: tests/fixtures/README.md).
pub const VOICE_NOTE_OGG: &[u8] = include_bytes!("../../fixtures/voice_note.ogg");

/// What the fake answers when nothing is scripted.
pub const FAKE_TRANSCRIPT: &str = "this is what the fake service heard";

/// One transcription request as the fake received it.
#[derive(Clone, Debug, Default)]
pub struct TranscriptionRequest {
    /// The text parts (`model`, `response_format`, `language`, …).
    pub fields: BTreeMap<String, String>,
    /// The `file` part's file name and content type.
    pub file_name: Option<String>,
    pub content_type: Option<String>,
    /// The `file` part's bytes (`None`: the request had no `file` part).
    pub file: Option<Vec<u8>>,
    /// `Authorization` as sent.
    pub authorization: Option<String>,
    /// Parts that were neither text nor the file, or a body that was not multipart.
    pub malformed: Option<String>,
}

impl TranscriptionRequest {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    pub fn file_len(&self) -> usize {
        self.file.as_ref().map_or(0, Vec::len)
    }

    /// The file starts with an OGG page (`OggS`).
    pub fn is_ogg(&self) -> bool {
        self.file
            .as_ref()
            .is_some_and(|bytes| bytes.starts_with(b"OggS"))
    }
}

/// A scripted answer.
#[derive(Clone, Debug)]
pub enum TranscriptionReply {
    /// `{"text": …}`, with `duration` (seconds) when given.
    Text { text: String, duration: Option<f64> },
    /// This status and JSON body.
    Error { status: u16, body: Value },
    /// Answers after this long (a service slower than the client's timeout).
    Slow(Duration, Box<TranscriptionReply>),
}

impl TranscriptionReply {
    pub fn text(text: &str) -> Self {
        Self::Text {
            text: text.into(),
            duration: None,
        }
    }

    /// An OpenAI-style error: `{"error": {"message", "type"}}`.
    pub fn error(status: u16, message: &str) -> Self {
        Self::Error {
            status,
            body: json!({"error": {"message": message, "type": "invalid_request_error"}}),
        }
    }
}

#[derive(Default)]
struct Recorded {
    queue: VecDeque<TranscriptionReply>,
    requests: Vec<TranscriptionRequest>,
}

#[derive(Clone, Default)]
struct Shared {
    state: Arc<Mutex<Recorded>>,
    news: Arc<Notify>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Recorded> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct FakeTranscription {
    addr: SocketAddr,
    shared: Shared,
}

impl FakeTranscription {
    pub async fn start() -> Self {
        let shared = Shared::default();
        let router = Router::new()
            .route("/v1/audio/transcriptions", post(transcribe))
            .with_state(shared.clone());
        let addr = crate::serve(router).await;
        Self { addr, shared }
    }

    /// `http://127.0.0.1:PORT/v1`, for `voice.transcription.base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The next request gets this answer (then the next scripted one, then the default).
    pub fn push(&self, reply: TranscriptionReply) -> &Self {
        self.shared.lock().queue.push_back(reply);
        self
    }

    pub fn requests(&self) -> Vec<TranscriptionRequest> {
        self.shared.lock().requests.clone()
    }

    /// Waits until `count` requests arrived; panics after `limit`.
    pub async fn wait_for_requests(&self, count: usize, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let news = self.shared.news.notified();
            if self.shared.lock().requests.len() >= count {
                return;
            }
            if tokio::time::timeout_at(deadline, news).await.is_err() {
                panic!(
                    "timed out waiting for {count} transcription requests; got {}",
                    self.shared.lock().requests.len()
                );
            }
        }
    }
}

async fn transcribe(
    State(shared): State<Shared>,
    headers: HeaderMap,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    let mut request = TranscriptionRequest {
        authorization: headers
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .map(str::to_string),
        ..TranscriptionRequest::default()
    };
    match multipart {
        Ok(multipart) => read_parts(multipart, &mut request).await,
        Err(rejection) => request.malformed = Some(rejection.body_text()),
    }
    let reply = {
        let mut state = shared.lock();
        state.requests.push(request.clone());
        state.queue.pop_front()
    };
    shared.news.notify_waiters();
    if let Some(problem) = &request.malformed {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {"message": problem}})),
        )
            .into_response();
    }
    if request.file.is_none() || request.field("model").is_none() {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {"message": "'file' and 'model' are required"}})),
        )
            .into_response();
    }
    answer(reply.unwrap_or_else(|| TranscriptionReply::text(FAKE_TRANSCRIPT))).await
}

async fn read_parts(mut multipart: Multipart, request: &mut TranscriptionRequest) {
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => return,
            Err(error) => {
                request.malformed = Some(error.body_text());
                return;
            }
        };
        let name = field.name().unwrap_or_default().to_string();
        if name == "file" {
            request.file_name = field.file_name().map(str::to_string);
            request.content_type = field.content_type().map(str::to_string);
            match field.bytes().await {
                Ok(bytes) => request.file = Some(bytes.to_vec()),
                Err(error) => request.malformed = Some(error.body_text()),
            }
        } else {
            match field.text().await {
                Ok(text) => {
                    request.fields.insert(name, text);
                }
                Err(error) => request.malformed = Some(error.body_text()),
            }
        }
    }
}

async fn answer(reply: TranscriptionReply) -> Response {
    let mut reply = reply;
    while let TranscriptionReply::Slow(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    match reply {
        TranscriptionReply::Text { text, duration } => {
            let mut body = json!({"text": text});
            if let Some(duration) = duration {
                body["duration"] = json!(duration);
            }
            axum::Json(body).into_response()
        }
        TranscriptionReply::Error { status, body } => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            axum::Json(body),
        )
            .into_response(),
        TranscriptionReply::Slow(..) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

impl crate::FakeTelegram {
    /// Queues a voice note of `seconds` (Telegram's `voice`: OGG/Opus, `duration` as the app
    /// measured it) from `user_id` in `chat`, its bytes downloadable. Returns the message id.
    pub fn send_voice(&self, chat: Value, user_id: i64, bytes: Vec<u8>, seconds: u32) -> i64 {
        let size = bytes.len();
        let file_id = self.add_file("voice.oga", bytes);
        let voice = json!({"file_id": file_id, "file_unique_id": format!("U{file_id}"),
            "duration": seconds, "mime_type": "audio/ogg", "file_size": size});
        self.send_message(chat, user_id, json!({"voice": voice}))
    }
}
