//! The open API client: typed calls over reqwest, the `tenant_access_token` cache, and
//! Feishu's answers mapped to [`ChannelError`].
//!
//! Every answer is `{"code": 0, "msg": …, …}`; a non-zero code can come with HTTP 200, so the
//! code decides, not the status. A token Feishu calls invalid or expired (99991661/3/4/77) is
//! dropped and the call made once more with a fresh one; rate limits (HTTP 429 or code
//! 99991400) become [`ChannelError::RateLimited`] with Feishu's `x-ogw-ratelimit-reset`.
//! The token is cached until shortly before it expires; one refresh runs at a time (the cache's
//! async mutex is held across the request), so a burst of calls after expiry makes one request.

use std::time::Duration;

use antler_channel::{ChannelError, Secret};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::{Value, json};
use tokio::time::Instant;

/// No JSON call may hang a turn.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Uploads and downloads move up to tens of megabytes.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(180);
/// When Feishu rate-limits without saying for how long.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// A token is replaced this long before it expires (half its life when it is shorter).
const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// "request trigger frequency limit".
const RATE_LIMITED: i64 = 99_991_400;
/// The access token is missing, invalid or expired: a fresh one may succeed.
const TOKEN_INVALID: &[i64] = &[99_991_661, 99_991_663, 99_991_664, 99_991_668, 99_991_677];

/// The app lacks a permission (scope) or access to the resource.
const NO_PERMISSION: &[i64] = &[99_991_672, 99_991_679, 230_027];

const TOKEN_PATH: &str = "open-apis/auth/v3/tenant_access_token/internal";

pub(crate) struct FeishuApi {
    http: reqwest::Client,
    base: url::Url,
    app_id: String,
    app_secret: Secret,
    token: tokio::sync::Mutex<Option<CachedToken>>,
}

struct CachedToken {
    value: String,
    refresh_at: Instant,
}

/// What one attempt of a call ended with.
enum Attempt {
    Done(Value),
    StaleToken(String),
    Failed(ChannelError),
}

impl FeishuApi {
    pub(crate) fn new(
        base: url::Url,
        app_id: &str,
        app_secret: Secret,
    ) -> Result<Self, ChannelError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // The token must never leave over plain http unless the operator pointed the
            // domain at an http URL (tests, a local proxy).
            .https_only(base.scheme() == "https")
            .build()
            .map_err(|e| ChannelError::Config(format!("cannot build the feishu client: {e}")))?;
        Ok(Self {
            http,
            base,
            app_id: app_id.to_string(),
            app_secret,
            token: tokio::sync::Mutex::new(None),
        })
    }

    pub(crate) fn url(&self, path: &str) -> Result<url::Url, ChannelError> {
        self.base
            .join(path)
            .map_err(|e| ChannelError::Platform(format!("bad feishu path {path:?}: {e}")))
    }

    /// The app's id: what Feishu names as the sender of the bot's own messages.
    pub(crate) fn app_id(&self) -> &str {
        &self.app_id
    }

    /// A JSON call: `method` on `path` with an optional JSON body. Returns the whole answer.
    pub(crate) async fn json(
        &self,
        what: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ChannelError> {
        let url = self.url(path)?;
        self.call(what, CALL_TIMEOUT, |http| {
            let request = http.request(method.clone(), url.clone());
            match body {
                Some(body) => request.json(body),
                None => request,
            }
        })
        .await
    }

    /// A multipart upload; `form` builds the form again for a retry.
    pub(crate) async fn multipart(
        &self,
        what: &'static str,
        path: &str,
        form: impl Fn() -> reqwest::multipart::Form,
    ) -> Result<Value, ChannelError> {
        let url = self.url(path)?;
        self.call(what, TRANSFER_TIMEOUT, |http| {
            http.post(url.clone()).multipart(form())
        })
        .await
    }

    /// Downloads a binary resource, refusing to read more than `max_bytes`.
    pub(crate) async fn download(
        &self,
        what: &'static str,
        url: url::Url,
        max_bytes: u64,
    ) -> Result<Bytes, ChannelError> {
        let mut refreshed = false;
        loop {
            let token = self.token().await?;
            let response = self
                .http
                .get(url.clone())
                .bearer_auth(&token)
                .timeout(TRANSFER_TIMEOUT)
                .send()
                .await
                .map_err(|e| network(what, &e))?;
            if !response.status().is_success() {
                match classify(what, response, &token).await {
                    Attempt::StaleToken(stale) if !refreshed => {
                        refreshed = true;
                        self.forget(&stale).await;
                        continue;
                    }
                    Attempt::StaleToken(_) => return Err(still_refused(what)),
                    Attempt::Failed(error) => return Err(error),
                    Attempt::Done(_) => {
                        return Err(ChannelError::Platform(format!(
                            "feishu {what}: an answer without the file"
                        )));
                    }
                }
            }
            let bytes = read_capped(what, response, max_bytes).await?;
            // An error envelope instead of the file; a file that is itself JSON has no `code`.
            let envelope = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .filter(|body| body["code"].as_i64().is_some_and(|code| code != 0));
            let Some(body) = envelope else {
                return Ok(bytes);
            };
            match judge(what, StatusCode::OK, body, &token) {
                Attempt::StaleToken(stale) if !refreshed => {
                    refreshed = true;
                    self.forget(&stale).await;
                }
                Attempt::StaleToken(_) => return Err(still_refused(what)),
                Attempt::Failed(error) => return Err(error),
                Attempt::Done(_) => return Ok(bytes),
            }
        }
    }

    /// Runs a call with the current token; once more with a fresh one when Feishu says the
    /// token is stale.
    async fn call(
        &self,
        what: &'static str,
        timeout: Duration,
        build: impl Fn(&reqwest::Client) -> RequestBuilder,
    ) -> Result<Value, ChannelError> {
        let mut refreshed = false;
        loop {
            let token = self.token().await?;
            let response = build(&self.http)
                .bearer_auth(&token)
                .timeout(timeout)
                .send()
                .await
                .map_err(|e| network(what, &e))?;
            match classify(what, response, &token).await {
                Attempt::Done(value) => return Ok(value),
                Attempt::StaleToken(stale) if !refreshed => {
                    tracing::debug!(what, "Feishu refused the access token; refreshing it");
                    refreshed = true;
                    self.forget(&stale).await;
                }
                Attempt::StaleToken(_) => return Err(still_refused(what)),
                Attempt::Failed(error) => return Err(error),
            }
        }
    }

    /// The cached `tenant_access_token`, fetched when missing or about to expire.
    pub(crate) async fn token(&self) -> Result<String, ChannelError> {
        let mut cached = self.token.lock().await;
        if let Some(token) = cached.as_ref()
            && Instant::now() < token.refresh_at
        {
            return Ok(token.value.clone());
        }
        let (value, lifetime) = self.fetch_token().await?;
        let margin = REFRESH_MARGIN.min(lifetime / 2);
        *cached = Some(CachedToken {
            value: value.clone(),
            refresh_at: Instant::now() + lifetime - margin,
        });
        Ok(value)
    }

    /// Drops `stale` from the cache unless another call already replaced it.
    async fn forget(&self, stale: &str) {
        let mut cached = self.token.lock().await;
        if cached.as_ref().is_some_and(|token| token.value == stale) {
            *cached = None;
        }
    }

    async fn fetch_token(&self) -> Result<(String, Duration), ChannelError> {
        const WHAT: &str = "tenant_access_token";
        let response = self
            .http
            .post(self.url(TOKEN_PATH)?)
            .json(&json!({"app_id": self.app_id, "app_secret": self.app_secret.expose()}))
            .timeout(CALL_TIMEOUT)
            .send()
            .await
            .map_err(|e| network(WHAT, &e))?;
        if let Some(limited) = rate_limit(&response) {
            return Err(limited);
        }
        let status = response.status();
        let body: Value = match response.json().await {
            Ok(body) => body,
            Err(_) if status.is_server_error() => {
                return Err(ChannelError::Platform(format!(
                    "feishu {WHAT}: HTTP {status}"
                )));
            }
            Err(error) => return Err(network(WHAT, &error)),
        };
        let code = body["code"].as_i64().unwrap_or(-1);
        if code == RATE_LIMITED {
            return Err(ChannelError::RateLimited {
                retry_after_secs: DEFAULT_RETRY_AFTER.as_secs_f64(),
            });
        }
        let token = body["tenant_access_token"].as_str().unwrap_or("");
        if code != 0 || token.is_empty() {
            return Err(ChannelError::Unauthorized(format!(
                "feishu refused the app credentials (code {code}: {}); check channels.feishu.app_id and app_secret",
                message(&body)
            )));
        }
        let expire = body["expire"].as_u64().unwrap_or(7200).max(2);
        Ok((token.to_string(), Duration::from_secs(expire)))
    }
}

/// Reads Feishu's answer to one attempt.
async fn classify(what: &'static str, response: Response, token: &str) -> Attempt {
    if let Some(limited) = rate_limit(&response) {
        return Attempt::Failed(limited);
    }
    let status = response.status();
    let body: Value = match response.json().await {
        Ok(body) => body,
        Err(_) => {
            return Attempt::Failed(ChannelError::Platform(format!(
                "feishu {what}: HTTP {status} without a JSON answer"
            )));
        }
    };
    judge(what, status, body, token)
}

/// What Feishu's `code` means.
fn judge(what: &'static str, status: StatusCode, body: Value, token: &str) -> Attempt {
    match body["code"].as_i64() {
        Some(0) if status.is_success() => Attempt::Done(body),
        Some(RATE_LIMITED) => Attempt::Failed(ChannelError::RateLimited {
            retry_after_secs: DEFAULT_RETRY_AFTER.as_secs_f64(),
        }),
        Some(code) if TOKEN_INVALID.contains(&code) => Attempt::StaleToken(token.to_string()),
        Some(code) if NO_PERMISSION.contains(&code) => {
            Attempt::Failed(ChannelError::MissingPermission(format!(
                "feishu {what} is not permitted (code {code}: {}); grant the app the permission \
                 it names in the developer console and publish a new version",
                message(&body)
            )))
        }
        Some(code) => Attempt::Failed(ChannelError::Platform(format!(
            "feishu {what} failed: code {code} ({})",
            message(&body)
        ))),
        None => Attempt::Failed(ChannelError::Platform(format!(
            "feishu {what}: HTTP {status} without a code"
        ))),
    }
}

/// HTTP 429 → the wait Feishu asks for (`x-ogw-ratelimit-reset`, else `Retry-After`).
fn rate_limit(response: &Response) -> Option<ChannelError> {
    if response.status() != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|secs| secs.is_finite() && *secs >= 0.0)
    };
    let retry_after_secs = header("x-ogw-ratelimit-reset")
        .or_else(|| header("retry-after"))
        .unwrap_or(DEFAULT_RETRY_AFTER.as_secs_f64())
        .max(0.1);
    Some(ChannelError::RateLimited { retry_after_secs })
}

async fn read_capped(
    what: &'static str,
    response: Response,
    max_bytes: u64,
) -> Result<Bytes, ChannelError> {
    let too_large = |size| ChannelError::TooLarge {
        size,
        limit: max_bytes,
    };
    if let Some(length) = response.content_length().filter(|len| *len > max_bytes) {
        return Err(too_large(length));
    }
    let mut body = BytesMut::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| network(what, &e))?;
        if (body.len() + chunk.len()) as u64 > max_bytes {
            return Err(too_large((body.len() + chunk.len()) as u64));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// Feishu's `msg`, shortened: it names the problem, and never needs to be long in a log.
fn message(body: &Value) -> String {
    body["msg"]
        .as_str()
        .unwrap_or("no message")
        .chars()
        .take(200)
        .collect()
}

fn network(what: &str, error: &reqwest::Error) -> ChannelError {
    // reqwest's Display includes the URL, which carries no secret (the token is a header).
    ChannelError::Network(format!("feishu {what}: {error}"))
}

fn still_refused(what: &str) -> ChannelError {
    ChannelError::Unauthorized(format!(
        "feishu refused a fresh tenant_access_token for {what}; check that the app is enabled and channels.feishu.app_id/app_secret belong to it"
    ))
}

/// The `data` object of an answer.
pub(crate) fn data(body: &Value) -> &Value {
    &body["data"]
}

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
