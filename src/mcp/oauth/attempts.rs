//! The bound on authorizations one operation may cause: a server that keeps refusing (401
//! after a fresh token, or 403 `insufficient_scope` for a scope already granted) would
//! otherwise make the client authorize forever (MCP 2025-11-25 "Scope challenge handling").
//!
//! The request loop cannot count for us (one retry per answered challenge, by design), so the
//! token source counts authorizations per wanted scope set: a new set is a new operation; the
//! same set asked again within the window is the same one going round.

use std::time::{Duration, Instant};

/// Authorizations for one scope set before giving up.
pub(crate) const MAX_AUTHORIZATIONS: u32 = 3;
/// After this long, asking for the same scopes again is a new operation.
const WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub(crate) struct Attempts {
    scopes: Vec<String>,
    count: u32,
    since: Option<Instant>,
}

impl Attempts {
    /// Whether one more authorization for `scopes` may be made now (and counts it).
    pub(crate) fn allow(&mut self, scopes: &[String], now: Instant) -> bool {
        let mut wanted = scopes.to_vec();
        wanted.sort();
        wanted.dedup();
        let stale = self
            .since
            .is_none_or(|since| now.duration_since(since) > WINDOW);
        if stale || wanted != self.scopes {
            self.scopes = wanted;
            self.count = 0;
            self.since = Some(now);
        }
        if self.count >= MAX_AUTHORIZATIONS {
            return false;
        }
        self.count += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_authorizations_per_scope_set_then_none_until_the_window_passes() {
        let mut attempts = Attempts::default();
        let start = Instant::now();
        let admin = ["mcp:admin".to_string()];
        for _ in 0..MAX_AUTHORIZATIONS {
            assert!(attempts.allow(&admin, start));
        }
        assert!(!attempts.allow(&admin, start + Duration::from_secs(1)));
        // A wider set is a new step-up.
        let wider = ["mcp:write".to_string(), "mcp:admin".to_string()];
        assert!(attempts.allow(&wider, start + Duration::from_secs(2)));
        // Order and duplicates do not make a set new.
        let same = ["mcp:admin".into(), "mcp:write".into(), "mcp:write".into()];
        assert!(attempts.allow(&same, start + Duration::from_secs(3)));
        assert!(attempts.allow(&same, start + Duration::from_secs(4)));
        assert!(!attempts.allow(&same, start + Duration::from_secs(5)));
        assert!(attempts.allow(&same, start + Duration::from_secs(70)));
    }
}
