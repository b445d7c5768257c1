//! HTTP plumbing shared by the providers: error mapping, `Retry-After`, and SSE decoding.

use std::collections::VecDeque;
use std::error::Error as StdError;
use std::time::{Duration, SystemTime};

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::HeaderMap;
use reqwest::{RequestBuilder, Response};

use crate::config::{ModelConfig, ModelSetting, ModelSources, Secret};
use crate::model::{ModelError, ModelEvent, ModelStream, provider_error};
use antler_store::messages::AiMessage;

/// Longest error body kept in [`ModelError::Status`]; provider error pages can be large HTML.
const MAX_ERROR_BODY_CHARS: usize = 500;

/// A request body the HTTP client lets go of once it is written. reqwest keeps a plain `Bytes`
/// body (to resend it on a 307/308 redirect, and for its retries of HTTP/2 refusals), whatever
/// the redirect policy, until the answer's headers arrive: ~7 KB per run in flight while the
/// model thinks, a tenth of what a run holds. The model client follows no redirects
/// (`ModelRegistry::http_client`), and `RetryingModel` retries refusals (they fail as connect
/// errors).
pub(crate) fn unkept_body(body: bytes::Bytes) -> reqwest::Body {
    reqwest::Body::wrap(http_body_util::Full::new(body))
}

/// Where one provider sends its requests; everything error mapping needs to know.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    /// The configured `models[].name`.
    pub(crate) model: String,
    /// The configured `base_url`, as the user wrote it (shown in connect errors).
    pub(crate) base_url: String,
    pub(crate) timeout: Duration,
    pub(crate) api_key: Option<Secret>,
    /// The provider's model id (named when the server does not know it).
    pub(crate) model_id: String,
    /// Where the settings came from: errors name the variable to change.
    pub(crate) sources: ModelSources,
}

impl Endpoint {
    pub(crate) fn for_model(config: &ModelConfig) -> Self {
        Self {
            model: config.name.clone(),
            base_url: config.base_url.clone(),
            // A zero, negative or absurd timeout is a config mistake; the schema default applies.
            timeout: Duration::try_from_secs_f64(config.timeout)
                .ok()
                .filter(|timeout| !timeout.is_zero())
                .unwrap_or(Duration::from_secs(600)),
            api_key: config.api_key.clone(),
            model_id: config.model.clone(),
            sources: config.sources.clone(),
        }
    }

    /// What to set to change `setting` of this model (its variable, else its key).
    fn fix(&self, setting: ModelSetting) -> String {
        self.sources.fix(&self.model, setting)
    }

    /// The API key when one is configured and non-empty (local servers need none).
    pub(crate) fn key(&self) -> Option<&str> {
        self.api_key
            .as_ref()
            .map(Secret::expose)
            .filter(|key| !key.is_empty())
    }

    /// Sends the request; a non-2xx answer becomes the matching [`ModelError`].
    pub(crate) async fn send(&self, request: RequestBuilder) -> Result<Response, ModelError> {
        let response = request
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|error| self.send_error(&error))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        if status.is_redirection() {
            // Not followed (see `ModelRegistry::http_client`): name the new address instead.
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .map_or_else(|| "another address".to_string(), display_endpoint);
            return Err(ModelError::Config(format!(
                "model '{}': {} redirects to {location}; set the model's base_url to that address",
                self.model,
                display_endpoint(&self.base_url)
            )));
        }
        let status = status.as_u16();
        let retry_after = parse_retry_after(response.headers(), SystemTime::now());
        if status == 429 {
            return Err(ModelError::RateLimited {
                model: self.model.clone(),
                retry_after,
            });
        }
        let body = self.error_body(&response.text().await.unwrap_or_default());
        // The raw body is for whoever debugs the provider; people read one sentence.
        tracing::debug!(model = %self.model, status, %body, "The model answered with an error");
        Err(self.status_error(status, &body, retry_after))
    }

    /// The error for an HTTP error answer (not 429), from its status and (redacted) body.
    fn status_error(&self, status: u16, body: &str, retry_after: Option<Duration>) -> ModelError {
        let endpoint = display_endpoint(&self.base_url);
        if matches!(status, 401 | 403) {
            return ModelError::Unauthorized {
                model: self.model.clone(),
                status,
                endpoint,
                fix: self.fix(ModelSetting::ApiKey),
                keyless: self.key().is_none(),
            };
        }
        let said = provider_error::read(body);
        if matches!(status, 400 | 404) && said.model_not_found {
            return ModelError::ModelNotFound {
                model: self.model.clone(),
                model_id: self.model_id.clone(),
                endpoint,
                status,
                fix: self.fix(ModelSetting::Model),
            };
        }
        let hint = match status {
            404 => format!(
                "{endpoint} has no such API; check {} (OpenAI-compatible URLs usually end in /v1)",
                self.fix(ModelSetting::BaseUrl)
            ),
            500..=599 => "try again, or look at the model server's log".to_string(),
            _ => String::new(),
        };
        ModelError::Status {
            model: self.model.clone(),
            status,
            body: said.message.unwrap_or_default(),
            retry_after,
            hint,
        }
    }

    fn send_error(&self, error: &reqwest::Error) -> ModelError {
        if error.is_timeout() {
            return ModelError::Timeout {
                model: self.model.clone(),
                timeout: self.timeout,
            };
        }
        if error.is_builder() {
            return ModelError::Config(format!(
                "model '{}' has an unusable base_url '{}': {}",
                self.model,
                self.base_url,
                causes(error)
            ));
        }
        // Anything else failed before a response arrived (refused, reset, DNS, TLS): the server
        // could not be reached, which is what the user has to fix.
        ModelError::Connect {
            model: self.model.clone(),
            // Shown in chat replies and logs: no password or query string from the URL.
            base_url: display_endpoint(&self.base_url),
            detail: causes(error),
            fix: self.fix(ModelSetting::BaseUrl),
        }
    }

    /// A provider error body, shortened and with the key blanked out: some providers echo
    /// (part of) a rejected key, and error strings end up in logs and chat replies.
    fn error_body(&self, body: &str) -> String {
        let mut body = body.trim().to_string();
        if let Some(key) = self.key() {
            body = body.replace(key, "***");
        }
        if body.chars().count() > MAX_ERROR_BODY_CHARS {
            body = body.chars().take(MAX_ERROR_BODY_CHARS).collect::<String>() + "…";
        }
        if body.is_empty() {
            body = "(empty body)".into();
        }
        body
    }

    fn stream_error(&self, error: EventStreamError<reqwest::Error>) -> ModelError {
        match error {
            EventStreamError::Transport(error) if error.is_timeout() => ModelError::Timeout {
                model: self.model.clone(),
                timeout: self.timeout,
            },
            EventStreamError::Transport(error) => ModelError::Stream {
                model: self.model.clone(),
                detail: causes(&error),
            },
            EventStreamError::Utf8(error) => ModelError::Malformed {
                model: self.model.clone(),
                detail: format!("the stream is not valid UTF-8: {error}"),
            },
            EventStreamError::Parser(error) => ModelError::Malformed {
                model: self.model.clone(),
                detail: format!("the stream is not valid server-sent events: {error}"),
            },
        }
    }
}

/// The delay a server asked for: `retry-after-ms`, else `Retry-After` as seconds or HTTP date.
pub(crate) fn parse_retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(millis) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && millis >= 0.0
    {
        return Duration::try_from_secs_f64(millis / 1000.0).ok();
    }
    let raw = header("retry-after")?;
    if let Ok(seconds) = raw.parse::<f64>() {
        return (seconds >= 0.0)
            .then(|| Duration::try_from_secs_f64(seconds).ok())
            .flatten();
    }
    let at = httpdate::parse_http_date(raw).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Turns provider SSE events into model events; one implementation per wire format.
pub(crate) trait SseDecoder: Send + 'static {
    /// Handles one SSE event. A returned [`ModelEvent::Completed`] ends the stream.
    fn feed(&mut self, event: &Event) -> Result<Vec<ModelEvent>, ModelError>;

    /// The body ended without a terminator: the message if it is complete anyway, else an error.
    fn finish_early(&mut self) -> Result<AiMessage, ModelError>;
}

struct DriveState<D> {
    events: BoxStream<'static, Result<Event, EventStreamError<reqwest::Error>>>,
    decoder: D,
    pending: VecDeque<Result<ModelEvent, ModelError>>,
    done: bool,
    endpoint: Endpoint,
}

/// Decodes a streaming response: deltas as they arrive, then one `Completed` or one error.
pub(crate) fn decode_sse<D: SseDecoder>(
    endpoint: &Endpoint,
    response: Response,
    decoder: D,
) -> ModelStream {
    let state = DriveState {
        events: response.bytes_stream().eventsource().boxed(),
        decoder,
        pending: VecDeque::new(),
        done: false,
        endpoint: endpoint.clone(),
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.pending.pop_front() {
                return Some((item, state));
            }
            if state.done {
                return None;
            }
            step(&mut state).await;
        }
    })
    .boxed()
}

async fn step<D: SseDecoder>(state: &mut DriveState<D>) {
    match state.events.next().await {
        Some(Ok(event)) => match state.decoder.feed(&event) {
            Ok(events) => {
                for event in events {
                    state.done |= matches!(event, ModelEvent::Completed(_));
                    state.pending.push_back(Ok(event));
                    if state.done {
                        break;
                    }
                }
            }
            Err(error) => {
                state.done = true;
                state.pending.push_back(Err(error));
            }
        },
        Some(Err(error)) => {
            state.done = true;
            state
                .pending
                .push_back(Err(state.endpoint.stream_error(error)));
        }
        None => {
            state.done = true;
            let last = state.decoder.finish_early().map(ModelEvent::Completed);
            state.pending.push_back(last);
        }
    }
}

/// The causes of an error without the top-level "error sending request for url (…)" line.
/// `base_url` for logs and status output: no user info (it may hold a password), no query or
/// fragment (some gateways take keys there).
pub fn display_endpoint(base_url: &str) -> String {
    match url::Url::parse(base_url.trim()) {
        Ok(mut url) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.set_fragment(None);
            url.to_string().trim_end_matches('/').to_string()
        }
        // Not a URL: show nothing of it that could be a secret, only that it is unusable.
        Err(_) => "(not a valid URL)".to_string(),
    }
}

pub(crate) fn causes(error: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    if parts.is_empty() {
        parts.push(error.to_string());
    }
    parts.join(": ")
}

/// Parses one JSON SSE payload, mapping failure to [`ModelError::Malformed`].
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    model: &str,
    data: &str,
) -> Result<T, ModelError> {
    serde_json::from_str(data).map_err(|error| ModelError::Malformed {
        model: model.to_string(),
        detail: format!("{error} in chunk '{}'", shorten(data, 200)),
    })
}

fn shorten(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    text.chars().take(max_chars).collect::<String>() + "…"
}

/// Feeds events straight into a decoder, the way [`decode_sse`] does (tests only).
#[cfg(test)]
pub(crate) fn decode_events<D: SseDecoder>(
    decoder: &mut D,
    events: impl IntoIterator<Item = Event>,
) -> Vec<Result<ModelEvent, ModelError>> {
    let mut out = Vec::new();
    for event in events {
        match decoder.feed(&event) {
            Ok(events) => {
                let completed = events.iter().any(|e| matches!(e, ModelEvent::Completed(_)));
                out.extend(events.into_iter().map(Ok));
                if completed {
                    return out;
                }
            }
            Err(error) => {
                out.push(Err(error));
                return out;
            }
        }
    }
    out.push(decoder.finish_early().map(ModelEvent::Completed));
    out
}

/// An SSE event as the parser would produce it (tests only).
#[cfg(test)]
pub(crate) fn sse_event(name: &str, data: &str) -> Event {
    Event {
        event: name.to_string(),
        data: data.to_string(),
        id: String::new(),
        retry: None,
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn retry_after_accepts_seconds_dates_and_millis() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let at = |h: &[(&'static str, &str)]| parse_retry_after(&headers(h), now);
        assert_eq!(at(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
        assert_eq!(
            at(&[("retry-after", " 1.5 ")]),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            at(&[("retry-after-ms", "250")]),
            Some(Duration::from_millis(250))
        );
        // retry-after-ms is more precise, so it wins over the seconds header.
        assert_eq!(
            at(&[("retry-after", "9"), ("retry-after-ms", "20")]),
            Some(Duration::from_millis(20))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(at(&[("retry-after", &date)]), Some(Duration::from_secs(30)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(at(&[("retry-after", &past)]), Some(Duration::ZERO));
        assert_eq!(at(&[("retry-after", "-3")]), None);
        assert_eq!(at(&[("retry-after", "soon")]), None);
        assert_eq!(at(&[("retry-after", "1e300")]), None);
        assert_eq!(at(&[]), None);
    }

    fn endpoint() -> Endpoint {
        Endpoint {
            model: "default".into(),
            base_url: "http://127.0.0.1:11434/v1".into(),
            timeout: Duration::from_secs(1),
            api_key: Some(Secret::new("sk-secret-123")),
            model_id: "qwen9".into(),
            sources: ModelSources {
                index: Some(0),
                model: Some("ANTLER_MODEL".into()),
                base_url: Some("ANTLER_MODEL_URL".into()),
                api_key: Some("ANTLER_MODEL_API_KEY".into()),
            },
        }
    }

    /// Each error answer is one sentence with the fix, naming the variable the shipped config
    /// reads, and never the raw JSON body.
    #[test]
    fn error_answers_read_as_one_sentence_with_the_fix() {
        let endpoint = endpoint();
        let text = |status: u16, body: &str| endpoint.status_error(status, body, None).to_string();
        assert_eq!(
            text(
                401,
                r#"{"error":{"message":"Incorrect API key provided: ***.","code":"invalid_api_key"}}"#
            ),
            "model 'default' at http://127.0.0.1:11434/v1 refused the API key (HTTP 401); set \
             ANTLER_MODEL_API_KEY to a key that server accepts"
        );
        assert_eq!(
            text(
                404,
                r#"{"error":{"message":"model \"qwen9\" not found, try pulling it first","type":"api_error"}}"#
            ),
            "model id 'qwen9' is not served at http://127.0.0.1:11434/v1 (HTTP 404); set \
             ANTLER_MODEL to a model id that server has (`antler status` lists them)"
        );
        assert_eq!(
            text(404, "404 page not found"),
            "model 'default' refused the request (HTTP 404): 404 page not found; \
             http://127.0.0.1:11434/v1 has no such API; check ANTLER_MODEL_URL (OpenAI-compatible \
             URLs usually end in /v1)"
        );
        assert_eq!(
            text(502, "<html>Bad Gateway</html>"),
            "model 'default' failed on the server's side (HTTP 502); try again, or look at the \
             model server's log"
        );
        let bad_request = text(
            400,
            r#"{"error":{"message":"max_tokens is too large.","type":"invalid_request_error"}}"#,
        );
        assert_eq!(
            bad_request,
            "model 'default' refused the request (HTTP 400): max_tokens is too large"
        );
        let keyless = Endpoint {
            api_key: None,
            sources: ModelSources::default(),
            ..endpoint.clone()
        };
        assert_eq!(
            keyless.status_error(401, "", None).to_string(),
            "model 'default' at http://127.0.0.1:11434/v1 refused to answer without an API key \
             (HTTP 401); set models[].api_key of 'default' to a key that server accepts"
        );
    }

    #[test]
    fn error_bodies_are_truncated_and_never_contain_the_key() {
        let endpoint = endpoint();
        let body = endpoint.error_body("Incorrect API key provided: sk-secret-123.");
        assert_eq!(body, "Incorrect API key provided: ***.");
        let long = endpoint.error_body(&"é".repeat(2000));
        assert_eq!(long.chars().count(), MAX_ERROR_BODY_CHARS + 1);
        assert_eq!(endpoint.error_body("  "), "(empty body)");
    }
}
