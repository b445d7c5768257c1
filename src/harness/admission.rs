//! Admission control: whether the daemon may start another run at all, before any thread or
//! model work (today: the memory ceiling `gateway.max_rss_mb`).

use crate::config::AppConfig;

use super::RunError;

/// Refuses a new run while the process is past `gateway.max_rss_mb` (0 = no limit).
pub(super) fn overload_check(config: &AppConfig) -> Result<(), RunError> {
    let limit_mb = config.gateway.max_rss_mb;
    if limit_mb == 0 {
        return Ok(());
    }
    let Some(rss) = crate::metrics::resident_bytes() else {
        return Ok(());
    };
    let rss_mb = rss / (1024 * 1024);
    if rss_mb < limit_mb {
        return Ok(());
    }
    crate::metrics::run_refused("overloaded");
    tracing::warn!(
        rss_mb,
        limit_mb,
        "Refusing a new run: memory is past gateway.max_rss_mb"
    );
    Err(RunError::Overloaded { rss_mb, limit_mb })
}
