//! Overhead of a trivial `bash` call per provider, as a ratio to spawning `sh -c true` directly
//! (for `antler bench sandbox`).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::config::SandboxConfig;
use crate::sandbox::{
    ExecMode, HostSandboxProvider, ProviderSettings, Sandbox, SandboxError, SandboxProvider,
    bwrap_available,
};

/// Median wall time of one provider's `true` next to the direct spawn.
#[derive(Clone, Debug)]
pub struct BashOverhead {
    pub provider: &'static str,
    pub median: Duration,
    pub baseline_median: Duration,
    /// `median / baseline_median`.
    pub ratio: f64,
}

/// What `antler bench sandbox` prints: the direct spawn's median, each provider's, and why a
/// provider was left out.
#[derive(Clone, Debug)]
pub struct BashBench {
    pub iterations: usize,
    pub baseline_median: Duration,
    pub providers: Vec<BashOverhead>,
    /// Why bwrap was not measured, when it cannot run here.
    pub bwrap_skipped: Option<String>,
}

impl std::fmt::Display for BashBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let iterations = self.iterations;
        writeln!(
            f,
            "sh -c true (direct): median {:?} over {iterations} runs",
            self.baseline_median
        )?;
        if let Some(reason) = &self.bwrap_skipped {
            writeln!(f, "bwrap: skipped ({reason})")?;
        }
        for row in &self.providers {
            writeln!(
                f,
                "{}: median {:?} over {iterations} runs, {:.2}x direct spawn",
                row.provider, row.median, row.ratio
            )?;
        }
        Ok(())
    }
}

/// Runs `true` `iterations` times directly (`sh -c true`), through the local provider and,
/// when it works, through bwrap, and returns the medians. `data_dir` receives a scratch thread
/// directory.
pub async fn bench_bash_overhead(
    data_dir: &Path,
    iterations: usize,
) -> Result<BashBench, SandboxError> {
    let iterations = iterations.max(1);
    let mut baseline = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let started = Instant::now();
        tokio::process::Command::new("sh")
            .args(["-c", "true"])
            .status()
            .await
            .map_err(|e| SandboxError::Unavailable(format!("could not spawn sh: {e}")))?;
        baseline.push(started.elapsed());
    }
    let baseline_median = median(&mut baseline);
    let mut bwrap_skipped = None;

    let mut modes = vec![("local", ExecMode::Local { allow_bash: true })];
    match bwrap_available().await {
        Ok(()) => modes.push((
            "bwrap",
            ExecMode::Bwrap {
                network: false,
                drop_to_uid: true,
            },
        )),
        Err(reason) => bwrap_skipped = Some(reason.to_string()),
    }
    let mut results = Vec::new();
    for (name, mode) in modes {
        let settings = ProviderSettings {
            data_dir: data_dir.to_path_buf(),
            skills_dir: None,
            skill_mounts: None,
            sandbox: SandboxConfig::default(),
            host_env: std::env::vars().collect(),
            instance: None,
        };
        let provider = HostSandboxProvider::new(settings, mode);
        let id = provider.acquire("bench", "bench").await?;
        let sandbox = provider
            .get(&id)
            .ok_or_else(|| SandboxError::NotFound(id.clone()))?;
        let mut samples = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            samples.push(time_true(sandbox.as_ref()).await?);
        }
        let median = median(&mut samples);
        let ratio = median.as_secs_f64() / baseline_median.as_secs_f64().max(1e-9);
        results.push(BashOverhead {
            provider: name,
            median,
            baseline_median,
            ratio,
        });
        provider.shutdown().await;
    }
    Ok(BashBench {
        iterations,
        baseline_median,
        providers: results,
        bwrap_skipped,
    })
}

async fn time_true(sandbox: &dyn Sandbox) -> Result<Duration, SandboxError> {
    let started = Instant::now();
    let output = sandbox.execute_command("true", &[], None).await?;
    if output.exit_code != Some(0) {
        return Err(SandboxError::Unavailable(format!(
            "`true` failed in the sandbox: {}",
            output.to_text()
        )));
    }
    Ok(started.elapsed())
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}
