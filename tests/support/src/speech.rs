//! A fake OpenAI-compatible speech endpoint: `POST /v1/audio/speech` recorded (its JSON body and
//! headers), answered with a few bytes of OGG/Opus as `audio/ogg`, or refused like a service in
//! trouble (`fail_with`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::RecordedRequest;

/// What the fake answers: the start of an OGG stream (`OggS`, version 0, a BOS page) with an
/// `OpusHead` packet, enough for any player to recognise the container.
pub const FAKE_SPEECH_AUDIO: &[u8] = b"OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x4a\x41\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x13OpusHead\x01\x01\x38\x01\x80\xbb\x00\x00\x00\x00\x00";

#[derive(Default)]
struct SpeechState {
    requests: Vec<RecordedRequest>,
    /// Answer this status and body instead of audio.
    failure: Option<(u16, Value)>,
}

/// The fake speech server.
#[derive(Clone)]
pub struct FakeSpeech {
    state: Arc<Mutex<SpeechState>>,
    addr: SocketAddr,
}

impl FakeSpeech {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(SpeechState::default()));
        let router = Router::new()
            .route("/v1/audio/speech", post(speak))
            .with_state(state.clone());
        let addr = crate::serve(router).await;
        Self { state, addr }
    }

    /// The API root to set as `voice.speech.base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The audio every request is answered with.
    pub fn audio(&self) -> &'static [u8] {
        FAKE_SPEECH_AUDIO
    }

    /// From now on every request is answered `status` with OpenAI's error body carrying
    /// `message`.
    pub fn fail_with(&self, status: u16, message: &str) {
        let body = json!({"error": {"message": message, "type": "server_error"}});
        self.lock().failure = Some((status, body));
    }

    /// The requests received, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// The `input` of each request, in order.
    pub fn inputs(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| r.body["input"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, SpeechState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

async fn speak(
    State(state): State<Arc<Mutex<SpeechState>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = RecordedRequest {
        path: "/v1/audio/speech".into(),
        headers: headers
            .iter()
            .filter_map(|(name, value)| {
                Some((name.as_str().to_string(), value.to_str().ok()?.to_string()))
            })
            .collect(),
        body: serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into())),
        body_len: body.len(),
    };
    let failure = {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        state.requests.push(recorded.clone());
        state.failure.clone()
    };
    if let Some((status, body)) = failure {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return (status, axum::Json(body)).into_response();
    }
    let fields = ["model", "input", "voice"];
    if fields.iter().any(|field| !recorded.body[field].is_string()) {
        let body = json!({"error": {"message": "model, input and voice are required", "type": "invalid_request_error"}});
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    }
    let mime = match recorded.body["response_format"].as_str().unwrap_or("mp3") {
        "opus" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "aac" => "audio/aac",
        "flac" => "audio/flac",
        _ => "application/octet-stream",
    };
    ([("content-type", mime)], FAKE_SPEECH_AUDIO).into_response()
}
