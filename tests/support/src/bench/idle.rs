//! `idle`: what the daemon weighs at rest with all four channels connected to their fakes.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use crate::bench::fleet::{Fleet, Platform};
use crate::bench::process::{DaemonProcess, Workdir, free_port};
use crate::bench::{BenchError, echo_model, mib};

#[derive(Clone, Debug)]
pub struct IdleReport {
    pub channels: Vec<&'static str>,
    pub ready_after: Duration,
    /// Waited after every channel reported running, before sampling.
    pub settle: Duration,
    /// RSS KiB, read every 500 ms after settling.
    pub samples: Vec<u64>,
}

impl IdleReport {
    pub fn median_kib(&self) -> u64 {
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        sorted.get(sorted.len() / 2).copied().unwrap_or(0)
    }
}

impl fmt::Display for IdleReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "idle: channels {} connected to their fakes",
            self.channels.join(", ")
        )?;
        writeln!(f, "{:<28} {:>10}", "metric", "value")?;
        writeln!(
            f,
            "{:<28} {:>10.0}",
            "start to ready (ms)",
            self.ready_after.as_secs_f64() * 1000.0
        )?;
        writeln!(
            f,
            "{:<28} {:>10.0}",
            "settled for (s)",
            self.settle.as_secs_f64()
        )?;
        writeln!(
            f,
            "{:<28} {:>10.1}",
            "RSS median (MiB)",
            mib(self.median_kib())
        )?;
        let max = self.samples.iter().max().copied().unwrap_or(0);
        writeln!(f, "{:<28} {:>10.1}", "RSS max (MiB)", mib(max))
    }
}

/// `platforms` may be empty (the daemon alone) or a subset, to see what each channel costs.
pub async fn idle(
    binary: &Path,
    platforms: &[Platform],
    settle: Duration,
) -> Result<IdleReport, BenchError> {
    let model = echo_model(Duration::ZERO).await;
    let fleet = Fleet::start(platforms).await;
    let dir = Workdir::new("idle")?;
    let port = free_port()?;
    dir.write_config(&model.base_url(), port, &fleet.channels_yaml(port))?;
    let channels = fleet.names();
    let daemon = DaemonProcess::start(binary, &dir, port, &channels).await?;
    tokio::time::sleep(settle).await;
    let mut samples = Vec::new();
    for _ in 0..6 {
        samples.push(daemon.rss_kib());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let ready_after = daemon.ready_after;
    daemon.kill().await;
    Ok(IdleReport {
        channels,
        ready_after,
        settle,
        samples,
    })
}
