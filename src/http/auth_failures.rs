//! Wrong API tokens, per client: logged at most once a minute per client with their count, and
//! a client that keeps sending them is made to wait (429) before its tokens are checked again,
//! so guessing a token goes at a few tries a minute. The token itself is never logged.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio_util::sync::CancellationToken;

use crate::http::peer::ClientKey;

/// Wrong tokens a client may send at once before it is slowed down; it then earns one more try
/// every 60 / this many seconds.
const FAILURES_PER_MINUTE: u32 = 10;
/// How often at most one client's failures are logged.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(60);
/// How often the log task looks for lines due, so a burst's last failures are logged at most
/// this long after their minute is up.
const LOG_TICK: Duration = Duration::from_secs(15);
/// Clients remembered at most; past it, those quiet longest are forgotten.
const MAX_CLIENTS: usize = 4096;

/// The failed authentications of every client (shared by all requests).
pub struct AuthFailures {
    limiter: DefaultKeyedRateLimiter<ClientKey>,
    clients: Mutex<HashMap<ClientKey, Record>>,
}

/// One client's failures since its last log line, and its penalty.
#[derive(Clone, Copy, Debug)]
struct Record {
    failures: u64,
    refused: u64,
    last_logged: Option<Instant>,
    throttled_until: Option<Instant>,
    last_seen: Instant,
}

/// What a log line says about one client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) client: ClientKey,
    /// Wrong tokens since the last line.
    pub(crate) failures: u64,
    /// Requests refused unchecked while the client had to wait.
    pub(crate) refused: u64,
}

impl Default for AuthFailures {
    fn default() -> Self {
        let per_minute = NonZeroU32::new(FAILURES_PER_MINUTE).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: RateLimiter::keyed(Quota::per_minute(per_minute)),
            clients: Mutex::new(HashMap::new()),
        }
    }
}

impl AuthFailures {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ClientKey, Record>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long `client` must still wait before its tokens are checked again (the request is
    /// then refused and counted), or `None`.
    pub(crate) fn throttled(&self, client: ClientKey, now: Instant) -> Option<Duration> {
        let mut clients = self.lock();
        let record = clients.get_mut(&client)?;
        let wait = record
            .throttled_until?
            .checked_duration_since(now)
            .filter(|wait| !wait.is_zero())?;
        record.refused += 1;
        record.last_seen = now;
        let report = record.take_report(client, now);
        drop(clients);
        if let Some(report) = report {
            log(report);
        }
        Some(wait.max(Duration::from_secs(1)))
    }

    /// Counts a wrong token from `client`: logged now if its last line is a minute old, else
    /// with the next one. Returns how long the client must now wait when it failed too often.
    pub(crate) fn failed(&self, client: ClientKey, now: Instant) -> Option<Duration> {
        let wait = self
            .limiter
            .check_key(&client)
            .err()
            .map(|not_until| not_until.wait_time_from(self.limiter.clock().now()));
        let mut clients = self.lock();
        if clients.len() >= MAX_CLIENTS && !clients.contains_key(&client) {
            forget_quiet(&mut clients, now);
            self.limiter.retain_recent();
        }
        let record = clients.entry(client).or_insert(Record {
            failures: 0,
            refused: 0,
            last_logged: None,
            throttled_until: None,
            last_seen: now,
        });
        record.failures += 1;
        record.last_seen = now;
        record.throttled_until = wait.map(|wait| now + wait);
        let report = record.take_report(client, now);
        drop(clients);
        if let Some(report) = report {
            log(report);
        }
        wait.map(|wait| wait.max(Duration::from_secs(1)))
    }

    /// The failures not logged yet of every client whose last line is at least a minute old,
    /// counted as logged now.
    pub(crate) fn due(&self, now: Instant) -> Vec<Report> {
        let mut clients = self.lock();
        let reports = clients
            .iter_mut()
            .filter_map(|(client, record)| record.take_report(*client, now))
            .collect();
        clients.retain(|_, record| !record.is_forgettable(now));
        reports
    }

    /// Logs what is due until `stop`, so the last failures of a client that went quiet are
    /// logged too (each client still at most once a minute).
    pub async fn log_every_minute(&self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(LOG_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => self.due(Instant::now()).into_iter().for_each(log),
            }
        }
    }
}

impl Record {
    /// A report of what happened since the last one, if there is news and the last is a
    /// minute old.
    fn take_report(&mut self, client: ClientKey, now: Instant) -> Option<Report> {
        let news = self.failures + self.refused > 0;
        let quiet = self
            .last_logged
            .is_none_or(|at| now.saturating_duration_since(at) >= LOG_EVERY);
        if !(news && quiet) {
            return None;
        }
        let report = Report {
            client,
            failures: self.failures,
            refused: self.refused,
        };
        self.failures = 0;
        self.refused = 0;
        self.last_logged = Some(now);
        Some(report)
    }

    /// Nothing left to report or enforce, and quiet for a while.
    fn is_forgettable(&self, now: Instant) -> bool {
        self.failures + self.refused == 0
            && self.throttled_until.is_none_or(|until| until <= now)
            && now.saturating_duration_since(self.last_seen) >= LOG_EVERY * 10
    }
}

/// Makes room among the remembered clients: the forgettable ones go, then, if still full, the
/// half quiet longest.
fn forget_quiet(clients: &mut HashMap<ClientKey, Record>, now: Instant) {
    clients.retain(|_, record| !record.is_forgettable(now));
    if clients.len() < MAX_CLIENTS {
        return;
    }
    let mut seen: Vec<Instant> = clients.values().map(|r| r.last_seen).collect();
    seen.sort_unstable();
    let cutoff = seen[seen.len() / 2];
    clients.retain(|_, record| record.last_seen > cutoff);
}

fn log(report: Report) {
    tracing::warn!(
        client = %report.client,
        failures = report.failures,
        refused_while_slowed_down = report.refused,
        "Requests with a wrong API token (logged at most once a minute per client); if this \
         is not an attack, give that client a token from gateway.api_tokens"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(ip: &str) -> ClientKey {
        ClientKey::of(ip.parse().unwrap())
    }

    #[test]
    fn a_client_is_slowed_down_after_ten_wrong_tokens_and_others_are_not() {
        let failures = AuthFailures::default();
        let (attacker, now) = (client("10.0.0.1"), Instant::now());
        for attempt in 1..=FAILURES_PER_MINUTE {
            assert_eq!(failures.failed(attacker, now), None, "attempt {attempt}");
            assert_eq!(failures.throttled(attacker, now), None);
        }
        let wait = failures.failed(attacker, now).expect("slowed down");
        assert!(
            wait >= Duration::from_secs(1) && wait <= Duration::from_secs(6),
            "{wait:?}"
        );
        assert!(failures.throttled(attacker, now).is_some());
        assert_eq!(failures.throttled(attacker, now + wait), None);
        assert_eq!(failures.throttled(client("10.0.0.2"), now), None);
        assert_eq!(failures.failed(client("10.0.0.2"), now), None);
    }

    #[test]
    fn failures_are_reported_at_most_once_a_minute_per_client_with_their_count() {
        let failures = AuthFailures::default();
        let (attacker, start) = (client("10.0.0.1"), Instant::now());
        // The first is reported at once (by `failed` itself), the next ones wait their minute.
        failures.failed(attacker, start);
        assert_eq!(failures.due(start), []);
        for second in 1..=12 {
            failures.failed(attacker, start + Duration::from_secs(second));
        }
        let refused = failures.throttled(attacker, start + Duration::from_secs(12));
        assert!(refused.is_some());
        assert_eq!(failures.due(start + Duration::from_secs(59)), []);
        assert_eq!(
            failures.due(start + LOG_EVERY),
            [Report {
                client: attacker,
                failures: 12,
                refused: 1,
            }]
        );
        assert_eq!(failures.due(start + LOG_EVERY * 3), []);
    }

    #[test]
    fn quiet_clients_are_forgotten() {
        let failures = AuthFailures::default();
        let now = Instant::now();
        failures.failed(client("10.0.0.1"), now);
        assert_eq!(failures.lock().len(), 1);
        failures.due(now + LOG_EVERY * 11);
        assert_eq!(failures.lock().len(), 0);
    }
}
