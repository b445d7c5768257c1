//! `soak`: many turns through all four channel fakes at once (Telegram long polling, Slack
//! Socket Mode, Discord gateway, Feishu webhook pushes), with the daemon's RSS sampled as the
//! turns add up. Each platform's threads go as fast as its outbound rate budget lets them, so
//! the faster platforms carry more of the turns.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::bench::drive::Conversations;
use crate::bench::fleet::{Fleet, Platform};
use crate::bench::process::{DaemonProcess, Workdir, free_port};
use crate::bench::{BenchError, Tally, echo_model, mib, percentile};

#[derive(Clone, Debug)]
pub struct SoakOptions {
    pub turns: usize,
    pub threads: u32,
    /// RSS is read each time this many more turns were answered.
    pub sample_every: usize,
    pub stream_over: Duration,
    pub stall_limit: Duration,
}

impl Default for SoakOptions {
    fn default() -> Self {
        Self {
            turns: 10_000,
            threads: 200,
            sample_every: 1000,
            stream_over: Duration::from_millis(50),
            stall_limit: Duration::from_secs(60),
        }
    }
}

#[derive(Clone, Debug)]
pub struct SoakReport {
    pub options: SoakOptions,
    /// (turns answered, RSS KiB, seconds since the first question); the first is before it.
    pub samples: Vec<(usize, u64, f64)>,
    pub by_platform: Vec<(Platform, u32)>,
    pub wall: Duration,
    pub latency_p50: Duration,
    pub latency_p99: Duration,
    pub tally: Tally,
    pub finished: bool,
}

impl fmt::Display for SoakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "soak: {} turns over {} threads on {} channels at once, model streams over {} ms",
            self.options.turns,
            self.options.threads,
            self.by_platform.len(),
            self.options.stream_over.as_millis()
        )?;
        writeln!(f, "{:>8} {:>10} {:>9}", "turns", "RSS MiB", "seconds")?;
        for (turns, rss, seconds) in &self.samples {
            writeln!(f, "{turns:>8} {:>10.1} {seconds:>9.1}", mib(*rss))?;
        }
        let per: Vec<String> = self
            .by_platform
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect();
        writeln!(f, "turns per channel: {}", per.join(", "))?;
        writeln!(
            f,
            "wall {:.1} s, {:.1} turns/s; question to answer p50 {:.0} ms, p99 {:.0} ms",
            self.wall.as_secs_f64(),
            self.tally.answered as f64 / self.wall.as_secs_f64().max(f64::EPSILON),
            self.latency_p50.as_secs_f64() * 1000.0,
            self.latency_p99.as_secs_f64() * 1000.0
        )?;
        writeln!(
            f,
            "answered {} of {}, lost {}, duplicated {}{}",
            self.tally.answered,
            self.tally.asked,
            self.tally.lost.len(),
            self.tally.duplicated.len(),
            if self.finished { "" } else { " — STALLED" }
        )
    }
}

pub async fn soak(binary: &Path, options: SoakOptions) -> Result<SoakReport, BenchError> {
    let model = echo_model(options.stream_over).await;
    let fleet = Fleet::start(&Platform::ALL).await;
    let mut dir = Workdir::new("soak")?;
    let port = free_port()?;
    dir.write_config(&model.base_url(), port, &fleet.channels_yaml(port))?;
    let daemon = DaemonProcess::start(binary, &dir, port, &fleet.names()).await?;
    let mut talk = Conversations::new(&Platform::ALL, options.threads, options.turns);
    let started = Instant::now();
    let mut samples = vec![(0, daemon.rss_kib(), 0.0)];
    let mut next_sample = options.sample_every.max(1);
    while !talk.finished() && talk.stalled_for() < options.stall_limit {
        talk.ask(&fleet);
        tokio::time::sleep(Duration::from_millis(25)).await;
        talk.collect(&fleet);
        while talk.done >= next_sample {
            samples.push((
                next_sample,
                daemon.rss_kib(),
                started.elapsed().as_secs_f64(),
            ));
            next_sample += options.sample_every.max(1);
        }
    }
    let wall = started.elapsed();
    let finished = talk.finished();
    if samples.last().is_none_or(|s| s.0 != talk.done) {
        samples.push((talk.done, daemon.rss_kib(), wall.as_secs_f64()));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let tally = Tally::count(&talk.asked, talk.all_texts(&fleet));
    if !finished || !tally.lost.is_empty() || !tally.duplicated.is_empty() {
        dir.keep();
    }
    daemon.kill().await;
    let mut latencies = talk.latencies.clone();
    latencies.sort();
    Ok(SoakReport {
        by_platform: talk.turns_by_platform(),
        latency_p50: percentile(&latencies, 50.0),
        latency_p99: percentile(&latencies, 99.0),
        options,
        samples,
        wall,
        tally,
        finished,
    })
}
