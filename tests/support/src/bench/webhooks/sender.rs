//! The sending system: signs each delivery the Antler way at the moment it goes out and keeps
//! what came back.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::antler_headers;
use crate::bench::BenchError;
use crate::bench::webhooks::{Delivery, ENDPOINT, SECRET, Sent};

/// How long a sender keeps retrying one delivery.
const RETRY_FOR: Duration = Duration::from_secs(120);

/// Signs and posts deliveries like a sending system.
pub(super) struct Sender {
    http: reqwest::Client,
    url: String,
}

impl Sender {
    pub(super) fn new(base: &str) -> Result<Self, BenchError> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Self {
            http,
            url: format!("{base}/hooks/{ENDPOINT}"),
        })
    }

    /// Sends `delivery` until it is answered: like Alertmanager or GitHub, a request that got
    /// no answer (the daemon down) or a 5xx is sent again, re-signed, with the same delivery
    /// id, for up to `RETRY_FOR`; a 4xx is final.
    pub(super) async fn post(&self, index: usize, delivery: &Delivery, again: bool) -> Sent {
        let first = Instant::now();
        let mut attempts = 0;
        let mut pause = Duration::from_millis(100);
        loop {
            attempts += 1;
            let started = Instant::now();
            let (result, final_answer) = self.attempt(delivery).await;
            if final_answer || first.elapsed() > RETRY_FOR {
                return Sent {
                    index,
                    again,
                    result,
                    at: first,
                    after: started.elapsed(),
                    attempts,
                };
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// One request; whether its answer is final.
    async fn attempt(&self, delivery: &Delivery) -> (Result<(String, String), String>, bool) {
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let mut request = self.http.post(&self.url).body(delivery.body.clone());
        for (name, value) in antler_headers(SECRET, timestamp, &delivery.id, &delivery.body) {
            request = request.header(name, value);
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                match response.text().await {
                    Ok(text) => (accepted_ids(status, &text), status < 500),
                    Err(error) => (Err(format!("HTTP {status}, body cut: {error}")), false),
                }
            }
            Err(error) => (Err(format!("no answer: {error}")), false),
        }
    }
}

/// `run_id` and `thread_id` of a 202 body; anything else as an error naming the status.
fn accepted_ids(status: u16, body: &str) -> Result<(String, String), String> {
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    match (
        status,
        value["run_id"].as_str(),
        value["thread_id"].as_str(),
    ) {
        (202, Some(run), Some(thread)) => Ok((run.to_string(), thread.to_string())),
        _ => Err(format!(
            "HTTP {status}: {}",
            body.chars().take(200).collect::<String>()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_202_with_both_ids_is_accepted() {
        assert_eq!(
            accepted_ids(202, r#"{"run_id": "r1", "thread_id": "t1"}"#),
            Ok(("r1".into(), "t1".into()))
        );
        let refused = accepted_ids(401, r#"{"error": "bad signature"}"#).unwrap_err();
        assert!(refused.starts_with("HTTP 401: "), "{refused}");
        assert!(accepted_ids(202, "{}").is_err());
    }
}
