//! An Events API client that posts like Slack: `X-Slack-Request-Timestamp` and
//! `X-Slack-Signature: v0=HMAC-SHA256(secret, "v0:{ts}:{body}")`, retries marked with
//! `X-Slack-Retry-Num`; and the forgeries Slack would never send.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Slack's request signature of `body` sent at `timestamp` (Unix seconds).
pub fn sign_slack_request(secret: &str, timestamp: &str, body: &str) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        Err(error) => panic!("test support: hmac key: {error}"),
    };
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// How a request is signed.
#[derive(Clone, Copy, Debug)]
pub enum Signing {
    Valid,
    /// Signed with another secret.
    WrongSecret,
    /// No signature and no timestamp headers.
    Missing,
    /// Correctly signed, but the timestamp is this old (a replay).
    Aged(Duration),
}

/// Posts to a daemon's `/channels/slack/webhook` as Slack does.
pub struct SlackEventsClient {
    url: String,
    secret: String,
    http: reqwest::Client,
}

impl SlackEventsClient {
    /// `url` is the full webhook URL; `secret` the signing secret the daemon was given.
    pub fn new(url: impl Into<String>, secret: impl Into<String>) -> Self {
        let http = match reqwest::Client::builder().no_proxy().build() {
            Ok(http) => http,
            Err(error) => panic!("test support: http client: {error}"),
        };
        Self {
            url: url.into(),
            secret: secret.into(),
            http,
        }
    }

    /// Posts a JSON body (an event callback or `url_verification`); returns status and body.
    pub async fn post_json(
        &self,
        body: &str,
        signing: Signing,
        retry_num: Option<u32>,
    ) -> (u16, String) {
        self.post(body, "application/json", signing, retry_num)
            .await
    }

    /// Posts a form body (a slash command).
    pub async fn post_form(&self, body: &str, signing: Signing) -> (u16, String) {
        self.post(body, "application/x-www-form-urlencoded", signing, None)
            .await
    }

    /// Posts an interactivity payload (a button click) as Slack does: the form field
    /// `payload` holding the JSON.
    pub async fn post_interaction(
        &self,
        payload: &serde_json::Value,
        signing: Signing,
    ) -> (u16, String) {
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &payload.to_string())
            .finish();
        self.post_form(&body, signing).await
    }

    async fn post(
        &self,
        body: &str,
        content_type: &str,
        signing: Signing,
        retry_num: Option<u32>,
    ) -> (u16, String) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", content_type)
            .body(body.to_string());
        let signed = |timestamp: u64, secret: &str| {
            let timestamp = timestamp.to_string();
            let signature = sign_slack_request(secret, &timestamp, body);
            (timestamp, signature)
        };
        let headers = match signing {
            Signing::Valid => Some(signed(now, &self.secret)),
            Signing::WrongSecret => Some(signed(now, "not-the-signing-secret")),
            Signing::Missing => None,
            Signing::Aged(age) => Some(signed(now.saturating_sub(age.as_secs()), &self.secret)),
        };
        if let Some((timestamp, signature)) = headers {
            request = request
                .header("x-slack-request-timestamp", timestamp)
                .header("x-slack-signature", signature);
        }
        if let Some(retry) = retry_num {
            request = request
                .header("x-slack-retry-num", retry.to_string())
                .header("x-slack-retry-reason", "http_timeout");
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.text().await.unwrap_or_default())
            }
            Err(error) => panic!("test support: posting to {}: {error}", self.url),
        }
    }
}
