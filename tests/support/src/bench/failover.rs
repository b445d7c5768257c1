//! `failover`: two daemons on one PostgreSQL database poll one Telegram bot token; the one
//! polling is SIGKILLed, a question is asked at once, and the time until the survivor's answer
//! is on the platform is measured (the goal: at most 2 × `cluster.lease_seconds` plus one model
//! call). The killed instance is started again (it stands by) before the next kill. The fake
//! Bot API refuses a concurrent `getUpdates` with 409 and counts it: two pollers at once.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::bench::drive::Conversations;
use crate::bench::fleet::{Fleet, Platform};
use crate::bench::process::{DaemonProcess, Workdir, free_port};
use crate::bench::{BenchError, Tally, echo_model};

#[derive(Clone, Debug)]
pub struct FailoverOptions {
    /// The database both daemons share (`store.postgres.url`); its schema is made at start.
    pub database_url: String,
    pub kills: u32,
    pub lease_seconds: u64,
    /// How long the model streams each answer (the "one model call" of the goal).
    pub stream_over: Duration,
}

#[derive(Clone, Debug)]
pub struct FailoverReport {
    pub options: FailoverOptions,
    /// From each SIGKILL to the survivor's answer of the question asked right after it.
    pub failovers: Vec<Duration>,
    pub tally: Tally,
    /// `getUpdates` refused because another was in flight.
    pub overlaps: usize,
    /// Kept when something was lost, doubled or overlapped.
    pub workdir: Option<String>,
}

impl fmt::Display for FailoverReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.options;
        writeln!(
            f,
            "failover: 2 daemons on PostgreSQL, one Telegram bot polled, {} SIGKILLs of the poller \
             (lease_seconds {}, model streams {} ms)",
            o.kills,
            o.lease_seconds,
            o.stream_over.as_millis()
        )?;
        let mut sorted = self.failovers.clone();
        sorted.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let goal = Duration::from_secs(o.lease_seconds * 2) + o.stream_over;
        writeln!(f, "{:<36} {:>10}", "metric", "value")?;
        writeln!(f, "{:<36} {:>10}", "failovers measured", sorted.len())?;
        for (label, p) in [("median", 50.0), ("p99", 99.0)] {
            let value = crate::bench::percentile(&sorted, p);
            writeln!(
                f,
                "{:<36} {:>10.0}",
                format!("kill to answer {label} (ms)"),
                ms(value)
            )?;
        }
        let worst = sorted.last().copied().unwrap_or_default();
        writeln!(f, "{:<36} {:>10.0}", "kill to answer max (ms)", ms(worst))?;
        writeln!(
            f,
            "{:<36} {:>10.0}",
            "goal: 2 x lease + model call (ms)",
            ms(goal)
        )?;
        writeln!(
            f,
            "{:<36} {:>10}",
            "answered exactly once", self.tally.answered
        )?;
        writeln!(f, "{:<36} {:>10}", "lost", self.tally.lost.len())?;
        writeln!(
            f,
            "{:<36} {:>10}",
            "duplicated",
            self.tally.duplicated.len()
        )?;
        writeln!(
            f,
            "{:<36} {:>10}",
            "concurrent getUpdates (409)", self.overlaps
        )?;
        if let Some(dir) = &self.workdir {
            writeln!(f, "work dirs kept in {dir}")?;
        }
        Ok(())
    }
}

/// One instance: its work dir (config, log, data dir) and port.
pub(crate) struct Instance {
    dir: Workdir,
    port: u16,
}

impl Instance {
    pub(crate) fn new(
        name: &str,
        model_url: &str,
        fleet: &Fleet,
        database_url: &str,
        lease_seconds: u64,
    ) -> Result<Self, BenchError> {
        let dir = Workdir::new(&format!("failover-{name}"))?;
        let port = free_port()?;
        let extra = format!(
            "{channels}store:\n  backend: postgres\n  postgres:\n    url: \"{url}\"\n    pool_size: 4\n\
             cluster:\n  instance_id: {name}\n  lease_seconds: {lease}\n",
            channels = fleet.channels_yaml(port),
            url = database_url,
            lease = lease_seconds,
        );
        dir.write_config(model_url, port, &extra)?;
        Ok(Self { dir, port })
    }

    /// Started and answering; with `polling`, once its Telegram transport runs.
    pub(crate) fn keep(&mut self) {
        self.dir.keep();
    }

    pub(crate) fn path(&self) -> String {
        self.dir.path().display().to_string()
    }

    pub(crate) async fn start(
        &self,
        binary: &Path,
        polling: bool,
    ) -> Result<DaemonProcess, BenchError> {
        let channels: &[&str] = if polling { &["telegram"] } else { &[] };
        DaemonProcess::start(binary, &self.dir, self.port, channels).await
    }
}

async fn polls(http: &reqwest::Client, daemon: &DaemonProcess) -> bool {
    let Ok(response) = http.get(format!("{}/readyz", daemon.base)).send().await else {
        return false;
    };
    let Ok(text) = response.text().await else {
        return false;
    };
    serde_json::from_str::<Value>(&text)
        .is_ok_and(|body| body["channels"]["telegram"]["state"] == "running")
}

pub async fn failover(
    binary: &Path,
    options: FailoverOptions,
) -> Result<FailoverReport, BenchError> {
    let model = echo_model(options.stream_over).await;
    let fleet = Fleet::start(&[Platform::Telegram]).await;
    if let Some(telegram) = &fleet.telegram {
        telegram.refuse_concurrent_polls();
    }
    let mut instances = [
        Instance::new(
            "bench-a",
            &model.base_url(),
            &fleet,
            &options.database_url,
            options.lease_seconds,
        )?,
        Instance::new(
            "bench-b",
            &model.base_url(),
            &fleet,
            &options.database_url,
            options.lease_seconds,
        )?,
    ];
    let mut running = [
        Some(instances[0].start(binary, true).await?),
        Some(instances[1].start(binary, false).await?),
    ];
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut talk = Conversations::new(&[Platform::Telegram], 1, options.kills as usize);
    let mut failovers = Vec::new();
    let answer_limit = Duration::from_secs(options.lease_seconds * 4 + 30);
    for _ in 0..options.kills {
        // The poller is the one whose Telegram transport runs.
        let mut poller = None;
        let deadline = Instant::now() + answer_limit;
        while poller.is_none() && Instant::now() < deadline {
            for (index, daemon) in running.iter().enumerate() {
                if let Some(daemon) = daemon
                    && polls(&http, daemon).await
                {
                    poller = Some(index);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let Some(poller) = poller else { break };
        if let Some(daemon) = running[poller].take() {
            daemon.kill().await;
        }
        let killed = Instant::now();
        talk.ask(&fleet);
        while talk.collect(&fleet) == 0 && killed.elapsed() < answer_limit {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if talk.waiting() > 0 {
            break;
        }
        failovers.push(killed.elapsed());
        running[poller] = Some(instances[poller].start(binary, false).await?);
    }
    // Let a late duplicate arrive before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    talk.collect(&fleet);
    let tally = Tally::count(&talk.asked, talk.all_texts(&fleet));
    let overlaps = fleet.telegram.as_ref().map_or(0, |t| t.overlaps());
    let troubled = !tally.lost.is_empty() || !tally.duplicated.is_empty() || overlaps > 0;
    let workdir = troubled.then(|| {
        for instance in &mut instances {
            instance.dir.keep();
        }
        instances[0].dir.path().display().to_string()
    });
    for daemon in running.into_iter().flatten() {
        daemon.kill().await;
    }
    Ok(FailoverReport {
        options,
        failovers,
        tally,
        overlaps,
        workdir,
    })
}
