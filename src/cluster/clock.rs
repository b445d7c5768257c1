//! The wall clock leases are measured with: real time in the daemon, tokio's (pausable) time
//! in tests, so expiry is tested without waiting.

use std::time::{SystemTime, UNIX_EPOCH};

pub trait WallClock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system's clock: leases are shared between hosts, so they need a time every host agrees
/// on (NTP keeps hosts within milliseconds).
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
            })
    }
}

/// A clock that starts at the system time and then advances with tokio's time, which tests
/// pause and advance.
pub struct TokioWallClock {
    base_ms: u64,
    start: tokio::time::Instant,
}

impl TokioWallClock {
    pub fn new() -> Self {
        Self {
            base_ms: SystemWallClock.now_ms(),
            start: tokio::time::Instant::now(),
        }
    }
}

impl TokioWallClock {
    /// A clock that reads `base_ms` now (tests that need a given day: DST changes).
    pub fn at(base_ms: u64) -> Self {
        Self {
            base_ms,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioWallClock {
    fn default() -> Self {
        Self::new()
    }
}

impl WallClock for TokioWallClock {
    fn now_ms(&self) -> u64 {
        let elapsed = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.base_ms.saturating_add(elapsed)
    }
}

/// The system's clock moved to start at a chosen time (`ANTLER_CLOCK_START`), then running at
/// normal speed: integration tests start the real daemon at "Monday 08:59:58" instead of
/// waiting for it. For tests only: instances sharing a store must agree on the time.
pub struct OffsetWallClock {
    offset_ms: i64,
}

impl OffsetWallClock {
    /// A clock that reads `start_ms` now.
    pub fn starting_at(start_ms: u64) -> Self {
        let now = i128::from(SystemWallClock.now_ms());
        let offset = i128::from(start_ms) - now;
        Self {
            offset_ms: i64::try_from(offset).unwrap_or(0),
        }
    }
}

impl WallClock for OffsetWallClock {
    fn now_ms(&self) -> u64 {
        let now = i128::from(SystemWallClock.now_ms()) + i128::from(self.offset_ms);
        u64::try_from(now.max(0)).unwrap_or(u64::MAX)
    }
}

/// The environment variable that starts the daemon's clock at a chosen time (RFC 3339).
pub const CLOCK_START_ENV: &str = "ANTLER_CLOCK_START";

/// The clock `ANTLER_CLOCK_START` asks for, if set: `Ok(None)` when unset, an error naming the
/// variable when it is not an RFC 3339 time.
pub fn clock_from_env(value: Option<&str>) -> Result<Option<OffsetWallClock>, String> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let start = chrono::DateTime::parse_from_rfc3339(value).map_err(|error| {
        format!("{CLOCK_START_ENV}={value} is not an RFC 3339 time such as 2026-12-07T08:59:58Z ({error}); unset it to run on the system clock")
    })?;
    let ms = u64::try_from(start.timestamp_millis()).map_err(|_| {
        format!("{CLOCK_START_ENV}={value} is before 1970; unset it to run on the system clock")
    })?;
    Ok(Some(OffsetWallClock::starting_at(ms)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_clock_starts_where_asked_and_runs_on() {
        let clock = clock_from_env(Some("2026-12-07T08:59:58Z"))
            .unwrap()
            .unwrap();
        let start = 1_796_633_998_000_u64;
        let now = clock.now_ms();
        assert!(now >= start && now < start + 60_000, "{now}");
        assert!(clock_from_env(None).unwrap().is_none());
        assert!(clock_from_env(Some("  ")).unwrap().is_none());
        let error = clock_from_env(Some("monday")).err().unwrap();
        assert!(error.contains("ANTLER_CLOCK_START"), "{error}");
    }
}
