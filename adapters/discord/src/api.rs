//! Discord's REST API for the requests the adapter makes (messages, edits, typing, reactions,
//! threads, uploads), with Discord's rate limits kept per route.
//!
//! Our own small client on reqwest (the version serenity brings) rather than serenity's `Http`:
//! serenity's REST honours a base URL only with its rate limiter disabled, and then a 429 comes
//! back as `UnsuccessfulRequest` with `retry_after` and `Retry-After` thrown away. Here every
//! answer's `X-RateLimit-*` headers are read: a bucket left with nothing (`Remaining: 0`) pauses
//! its route until `Reset-After`, a 429 pauses its route (or everything, when `global`) for
//! `retry_after`, and a paused route is refused at once with `RateLimited` without reaching
//! Discord, so only that route waits. The daemon's shared rate budget paces the rest.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use antler_channel::ChannelError;
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::time::Instant;

/// Discord itself when `api_url` is unset.
pub const DEFAULT_API_URL: &str = "https://discord.com";
/// No platform call may hang a turn or the transport.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Uploads may take longer than a message.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// When Discord rate-limits without saying for how long.
const DEFAULT_RETRY_AFTER: f64 = 1.0;
/// The pause key of the global limit.
const GLOBAL: &str = "global";

/// A request body.
pub(crate) enum Body {
    Empty,
    Json(Value),
    Multipart(reqwest::multipart::Form),
}

/// A refused request: Discord's own error (status and JSON `code`), or a transport failure
/// already in the daemon's terms.
#[derive(Debug)]
pub(crate) enum ApiError {
    Discord {
        status: u16,
        code: i64,
        message: String,
    },
    Channel(ChannelError),
}

impl ApiError {
    /// Discord's JSON error code, when Discord answered with one.
    pub(crate) fn code(&self) -> Option<i64> {
        match self {
            ApiError::Discord { code, .. } => Some(*code),
            ApiError::Channel(_) => None,
        }
    }

    /// What the daemon branches on. Messages name the action, never people's text.
    pub(crate) fn into_channel(self, action: &str) -> ChannelError {
        match self {
            ApiError::Channel(error) => error,
            ApiError::Discord { status: 401, .. } => ChannelError::Unauthorized(format!(
                "discord refused the token while trying to {action}; set channels.discord.bot_token to the bot's current token (Developer Portal → Bot)"
            )),
            ApiError::Discord {
                status: 403,
                code,
                message,
            } => ChannelError::Platform(format!(
                "discord forbade {action} ({code}: {message}); give the bot the permissions it needs in that channel (View Channel, Send Messages, Send Messages in Threads, Create Public Threads, Add Reactions, Attach Files, Read Message History)"
            )),
            ApiError::Discord {
                status,
                code,
                message,
            } => ChannelError::Platform(format!(
                "discord could not {action}: HTTP {status}, code {code}: {message}"
            )),
        }
    }
}

impl From<ChannelError> for ApiError {
    fn from(error: ChannelError) -> Self {
        ApiError::Channel(error)
    }
}

pub(crate) struct DiscordApi {
    http: reqwest::Client,
    /// `{api_url}/api/v10/`.
    base: url::Url,
    authorization: HeaderValue,
    paused: Mutex<HashMap<String, Instant>>,
}

impl DiscordApi {
    pub(crate) fn new(api_url: Option<&str>, token: &str) -> Result<Self, ChannelError> {
        let origin = origin(api_url.unwrap_or(DEFAULT_API_URL));
        let base = url::Url::parse(&format!("{origin}/api/v10/")).map_err(|e| {
            ChannelError::Config(format!(
                "channels.discord.api_url {origin:?} is not a URL: {e}"
            ))
        })?;
        let mut authorization =
            HeaderValue::from_str(&format!("Bot {}", token.trim())).map_err(|_| {
                ChannelError::Config(
                    "channels.discord.bot_token contains characters a token cannot have".into(),
                )
            })?;
        authorization.set_sensitive(true);
        let http = reqwest::Client::builder()
            .user_agent(concat!(
                "DiscordBot (https://github.com/antler, ",
                env!("CARGO_PKG_VERSION"),
                ")"
            ))
            .timeout(UPLOAD_TIMEOUT)
            .build()
            .map_err(|e| ChannelError::Config(format!("cannot build the discord client: {e}")))?;
        Ok(Self {
            http,
            base,
            authorization,
            paused: Mutex::new(HashMap::new()),
        })
    }

    /// The server's origin (`https://discord.com`), for serenity's gateway client.
    pub(crate) fn origin(&self) -> String {
        let mut origin = self.base.clone();
        origin.set_path("");
        origin.as_str().trim_end_matches('/').to_string()
    }

    /// The API's base URL, for deciding which file URLs may be fetched.
    pub(crate) fn base(&self) -> &url::Url {
        &self.base
    }

    /// One request to `path` (below `/api/v10/`); `route` is its rate-limit bucket, e.g.
    /// `edit:{channel}`. Answers the JSON body (`null` for 204).
    pub(crate) async fn call(
        &self,
        method: Method,
        route: &str,
        path: &str,
        body: Body,
    ) -> Result<Value, ApiError> {
        if let Some(wait) = self.paused_for(route) {
            return Err(ChannelError::RateLimited {
                retry_after_secs: wait.as_secs_f64(),
            }
            .into());
        }
        let url = self.base.join(path).map_err(|e| {
            ApiError::Channel(ChannelError::Platform(format!("bad discord path: {e}")))
        })?;
        let mut request = self
            .http
            .request(method, url)
            .header(reqwest::header::AUTHORIZATION, self.authorization.clone());
        let timeout = match body {
            Body::Empty => CALL_TIMEOUT,
            Body::Json(value) => {
                request = request.json(&value);
                CALL_TIMEOUT
            }
            Body::Multipart(form) => {
                request = request.multipart(form);
                UPLOAD_TIMEOUT
            }
        };
        let response = match tokio::time::timeout(timeout, request.send()).await {
            Err(_) => {
                return Err(ChannelError::Network(format!(
                    "discord did not answer within {} s",
                    timeout.as_secs()
                ))
                .into());
            }
            Ok(Err(error)) => {
                return Err(
                    ChannelError::Network(format!("discord: {}", error.without_url())).into(),
                );
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| ChannelError::Network(format!("discord: {}", e.without_url())))?;
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status == StatusCode::TOO_MANY_REQUESTS {
            let (retry_after, global) = rate_limit(&headers, &body);
            self.pause(if global { GLOBAL } else { route }, retry_after);
            tracing::info!(
                route,
                global,
                retry_after_secs = retry_after.as_secs_f64(),
                "Discord rate-limited a route"
            );
            return Err(ChannelError::RateLimited {
                retry_after_secs: retry_after.as_secs_f64(),
            }
            .into());
        }
        if let Some(reset) = exhausted(&headers) {
            self.pause(route, reset);
        }
        if status.is_success() {
            return Ok(body);
        }
        if status.is_server_error() {
            return Err(ChannelError::Network(format!("discord answered HTTP {status}")).into());
        }
        Err(ApiError::Discord {
            status: status.as_u16(),
            code: body["code"].as_i64().unwrap_or(0),
            message: body["message"].as_str().unwrap_or("").to_string(),
        })
    }

    /// Fetches a file (an attachment's CDN URL) without credentials, at most `max_bytes`.
    pub(crate) async fn download(
        &self,
        url: url::Url,
        max_bytes: u64,
    ) -> Result<bytes::Bytes, ChannelError> {
        use futures::StreamExt;
        let too_large = |size: u64| ChannelError::TooLarge {
            size,
            limit: max_bytes,
        };
        let response = tokio::time::timeout(CALL_TIMEOUT, self.http.get(url).send())
            .await
            .map_err(|_| ChannelError::Network("discord file download timed out".into()))?
            .map_err(|e| {
                ChannelError::Network(format!("discord file download: {}", e.without_url()))
            })?;
        if !response.status().is_success() {
            return Err(ChannelError::Platform(format!(
                "discord file download: HTTP {}",
                response.status()
            )));
        }
        if let Some(size) = response.content_length().filter(|size| *size > max_bytes) {
            return Err(too_large(size));
        }
        let mut stream = response.bytes_stream();
        let mut bytes = bytes::BytesMut::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                ChannelError::Network(format!("discord file download: {}", e.without_url()))
            })?;
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > max_bytes {
                return Err(too_large(bytes.len() as u64));
            }
        }
        Ok(bytes.freeze())
    }

    fn pause(&self, route: &str, wait: Duration) {
        let until = Instant::now() + wait;
        let mut paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        let slot = paused.entry(route.to_string()).or_insert(until);
        *slot = (*slot).max(until);
    }

    fn paused_for(&self, route: &str) -> Option<Duration> {
        let now = Instant::now();
        let mut paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        paused.retain(|_, until| *until > now);
        [route, GLOBAL]
            .iter()
            .filter_map(|key| paused.get(*key))
            .max()
            .map(|until| *until - now)
    }
}

/// `https://discord.com/api/v10/` → `https://discord.com`: `api_url` may name the origin or
/// the API root.
fn origin(api_url: &str) -> &str {
    let trimmed = api_url.trim().trim_end_matches('/');
    let trimmed = trimmed.strip_suffix("/v10").unwrap_or(trimmed);
    trimmed.strip_suffix("/api").unwrap_or(trimmed)
}

fn header_f64(headers: &HeaderMap, name: &str) -> Option<f64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// How long a 429 asks to wait and whether it is the global limit: the body's `retry_after`
/// (seconds, fractional), else `Retry-After`, else a second.
fn rate_limit(headers: &HeaderMap, body: &Value) -> (Duration, bool) {
    let seconds = body["retry_after"]
        .as_f64()
        .or_else(|| header_f64(headers, "retry-after"))
        .or_else(|| header_f64(headers, "x-ratelimit-reset-after"))
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(DEFAULT_RETRY_AFTER);
    let global = body["global"].as_bool().unwrap_or(false)
        || headers
            .get("x-ratelimit-global")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || headers
            .get("x-ratelimit-scope")
            .and_then(|v| v.to_str().ok())
            == Some("global");
    (Duration::from_secs_f64(seconds.min(3600.0)), global)
}

/// A bucket with no requests left: wait `Reset-After` before its next request.
fn exhausted(headers: &HeaderMap) -> Option<Duration> {
    let remaining = header_f64(headers, "x-ratelimit-remaining")?;
    let reset_after = header_f64(headers, "x-ratelimit-reset-after")?;
    (remaining <= 0.0 && reset_after.is_finite() && reset_after > 0.0)
        .then(|| Duration::from_secs_f64(reset_after.min(3600.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_origin_is_found_from_either_form() {
        assert_eq!(origin("https://discord.com"), "https://discord.com");
        assert_eq!(
            origin("https://discord.com/api/v10/"),
            "https://discord.com"
        );
        assert_eq!(origin("http://127.0.0.1:9/api"), "http://127.0.0.1:9");
        let api = DiscordApi::new(Some("http://127.0.0.1:9/api/v10"), "t").expect("api");
        assert_eq!(api.origin(), "http://127.0.0.1:9");
        assert_eq!(api.base().as_str(), "http://127.0.0.1:9/api/v10/");
    }

    #[test]
    fn rate_limit_answers_are_read_from_the_body_then_the_headers() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("3"));
        let body = serde_json::json!({"message": "You are being rate limited.", "retry_after": 1.5, "global": false});
        assert_eq!(
            rate_limit(&headers, &body),
            (Duration::from_millis(1500), false)
        );
        assert_eq!(
            rate_limit(&headers, &Value::Null),
            (Duration::from_secs(3), false)
        );
        headers.insert("x-ratelimit-global", HeaderValue::from_static("true"));
        assert!(rate_limit(&headers, &Value::Null).1);
        let mut bucket = HeaderMap::new();
        bucket.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        bucket.insert("x-ratelimit-reset-after", HeaderValue::from_static("0.25"));
        assert_eq!(exhausted(&bucket), Some(Duration::from_millis(250)));
        bucket.insert("x-ratelimit-remaining", HeaderValue::from_static("4"));
        assert_eq!(exhausted(&bucket), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_paused_route_is_refused_without_a_request_and_others_go_on() {
        let api = DiscordApi::new(Some("http://127.0.0.1:9"), "t").expect("api");
        api.pause("edit:1", Duration::from_secs(2));
        assert!(api.paused_for("edit:1").is_some());
        assert!(api.paused_for("send:1").is_none(), "only its bucket waits");
        let refused = api
            .call(
                Method::PATCH,
                "edit:1",
                "channels/1/messages/2",
                Body::Empty,
            )
            .await;
        assert!(matches!(
            refused,
            Err(ApiError::Channel(ChannelError::RateLimited { .. }))
        ));
        api.pause(GLOBAL, Duration::from_secs(5));
        assert!(
            api.paused_for("send:1").is_some(),
            "a global limit stops every route"
        );
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(api.paused_for("edit:1").is_none());
    }
}
