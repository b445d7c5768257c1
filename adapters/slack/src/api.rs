//! The Web API client: slack-morphism over our own rustls connector, every call bounded by a
//! timeout, and Slack's per-method rate limits remembered.
//!
//! slack-morphism's own connector trusts the system's roots and speaks only https; ours pins
//! the ring provider and webpki roots (no process-wide CryptoProvider needed, no OpenSSL) and
//! allows plain http only when `api_url` itself is http (tests, local Slack-compatible servers).
//! A 429 pauses its method for `Retry-After`: later calls of that method fail at once with
//! `RateLimited` instead of reaching Slack inside the window (Slack limits per method).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use antler_channel::ChannelError;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::SlackClientHyperConnector;
use slack_morphism::{
    ClientResult, SlackApiToken, SlackApiTokenValue, SlackClient, SlackClientSession,
};
use tokio::time::Instant;

pub(crate) type Connector = SlackClientHyperConnector<HttpsConnector<HttpConnector>>;
pub(crate) type Session<'a> = SlackClientSession<'a, Connector>;

/// Slack's Web API when `api_url` is unset.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";
/// No platform call may hang a turn or the transport.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// When Slack rate-limits without saying for how long.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Answers that mean the token itself is bad: retrying cannot help.
const AUTH_ERRORS: &[&str] = &[
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
    "invalid_token",
];

pub(crate) struct SlackApi {
    client: SlackClient<Connector>,
    bot_token: SlackApiToken,
    /// The API's base URL, for deciding where the bot token may be sent.
    pub(crate) base_url: url::Url,
    paused: Mutex<HashMap<&'static str, Instant>>,
}

impl SlackApi {
    pub(crate) fn new(api_url: Option<&str>, bot_token: &str) -> Result<Self, ChannelError> {
        let raw = api_url.unwrap_or(DEFAULT_API_URL).trim_end_matches('/');
        let base_url = url::Url::parse(raw).map_err(|e| {
            ChannelError::Config(format!("channels.slack.api_url {raw:?} is not a URL: {e}"))
        })?;
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| ChannelError::Config(format!("cannot set up TLS for slack: {e}")))?;
        let builder = if base_url.scheme() == "http" {
            builder.https_or_http()
        } else {
            builder.https_only()
        };
        let https = builder.enable_http1().enable_http2().build();
        let connector = SlackClientHyperConnector::with_connector(https).with_slack_api_url(raw);
        Ok(Self {
            client: SlackClient::new(connector),
            bot_token: token(bot_token),
            base_url,
            paused: Mutex::new(HashMap::new()),
        })
    }

    /// A session with the bot token.
    pub(crate) fn bot(&self) -> Session<'_> {
        self.client.open_session(&self.bot_token)
    }

    /// The bot token itself, for requests slack-morphism does not make (file downloads).
    pub(crate) fn bot_token_value(&self) -> &str {
        &self.bot_token.token_value.0
    }

    /// A session with another token (the app-level token of Socket Mode).
    pub(crate) fn session<'a>(&'a self, token: &'a SlackApiToken) -> Session<'a> {
        self.client.open_session(token)
    }

    /// Runs one call of `method`: refused at once while the method is rate-limited, bounded by
    /// [`CALL_TIMEOUT`], its error mapped for the daemon.
    pub(crate) async fn call<T>(
        &self,
        method: &'static str,
        request: impl Future<Output = ClientResult<T>>,
    ) -> Result<T, ChannelError> {
        if let Some(wait) = self.paused_for(method) {
            return Err(ChannelError::RateLimited {
                retry_after_secs: wait.as_secs_f64(),
            });
        }
        match tokio::time::timeout(CALL_TIMEOUT, request).await {
            Err(_) => Err(ChannelError::Network(format!(
                "slack {method} did not answer within {} s",
                CALL_TIMEOUT.as_secs()
            ))),
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                let error = channel_error(method, error);
                if let ChannelError::RateLimited { retry_after_secs } = &error {
                    self.pause(method, Duration::from_secs_f64(*retry_after_secs));
                    tracing::info!(method, retry_after_secs, "Slack rate-limited a method");
                }
                Err(error)
            }
        }
    }

    fn pause(&self, method: &'static str, wait: Duration) {
        let until = Instant::now() + wait;
        let mut paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        let slot = paused.entry(method).or_insert(until);
        *slot = (*slot).max(until);
    }

    fn paused_for(&self, method: &'static str) -> Option<Duration> {
        let now = Instant::now();
        let mut paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        paused.retain(|_, until| *until > now);
        paused.get(method).map(|until| *until - now)
    }
}

pub(crate) fn token(value: &str) -> SlackApiToken {
    SlackApiToken::new(SlackApiTokenValue::new(value.to_string()))
}

/// The Slack error code of an `ok: false` answer.
pub(crate) fn api_error_code(error: &ChannelError) -> Option<&str> {
    match error {
        ChannelError::Platform(text) => text.split_once(" failed: ").map(|(_, code)| code),
        _ => None,
    }
}

/// slack-morphism's error → what the daemon branches on. Response bodies are left out: they
/// can quote people's messages.
pub(crate) fn channel_error(method: &str, error: SlackClientError) -> ChannelError {
    match error {
        SlackClientError::RateLimitError(limit) => ChannelError::RateLimited {
            retry_after_secs: limit
                .retry_after
                .unwrap_or(DEFAULT_RETRY_AFTER)
                .as_secs_f64(),
        },
        SlackClientError::ApiError(api) if AUTH_ERRORS.contains(&api.code.as_str()) => {
            ChannelError::Unauthorized(format!("slack {method} answered {}", api.code))
        }
        SlackClientError::ApiError(api) => {
            ChannelError::Platform(format!("slack {method} failed: {}", api.code))
        }
        SlackClientError::HttpError(http) => {
            ChannelError::Platform(format!("slack {method}: HTTP {}", http.status_code))
        }
        SlackClientError::HttpProtocolError(protocol) => {
            ChannelError::Network(format!("slack {method}: {protocol}"))
        }
        other => ChannelError::Platform(format!("slack {method}: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use slack_morphism::errors::{SlackClientApiError, SlackRateLimitError};

    use super::*;

    #[test]
    fn errors_the_daemon_branches_on() {
        let limited = channel_error(
            "chat.update",
            SlackClientError::RateLimitError(
                SlackRateLimitError::new().with_retry_after(Duration::from_secs(7)),
            ),
        );
        assert!(
            matches!(limited, ChannelError::RateLimited { retry_after_secs } if retry_after_secs == 7.0)
        );
        let revoked = channel_error(
            "auth.test",
            SlackClientError::ApiError(SlackClientApiError::new("token_revoked".into())),
        );
        assert!(revoked.is_fatal());
        let missing = channel_error(
            "chat.postMessage",
            SlackClientError::ApiError(SlackClientApiError::new("channel_not_found".into())),
        );
        assert!(!missing.is_fatal());
        assert_eq!(api_error_code(&missing), Some("channel_not_found"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limited_method_is_refused_without_a_request_until_the_window_ends() {
        let api = SlackApi::new(Some("http://127.0.0.1:9/api"), "xoxb-1").expect("api");
        api.pause("chat.update", Duration::from_secs(2));
        let refused = api
            .call("chat.update", async {
                panic!("no request inside the window") as ClientResult<()>
            })
            .await;
        assert!(matches!(refused, Err(ChannelError::RateLimited { .. })));
        let other = api.call("chat.postMessage", async { Ok(5) }).await;
        assert_eq!(other.expect("other methods are not paused"), 5);
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(
            api.call("chat.update", async { Ok(1) })
                .await
                .expect("after"),
            1
        );
    }
}
