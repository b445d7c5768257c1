//! `crash`: SIGKILL the daemon at random moments while conversations run through the fake
//! Telegram API (which, like Telegram, hands out an update until a later `getUpdates` offset
//! confirms it), restart it on the same data dir each time, and count the replies that were
//! lost or sent twice.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::bench::drive::Conversations;
use crate::bench::fleet::{Fleet, Platform};
use crate::bench::process::{DaemonProcess, Workdir, free_port};
use crate::bench::{BenchError, Rng, Tally, echo_model};

#[derive(Clone, Debug)]
pub struct CrashOptions {
    pub turns: usize,
    /// Chats talking at once.
    pub chats: u32,
    pub kills: u32,
    pub stream_over: Duration,
    pub seed: u64,
    /// Given up after this long without a new answer.
    pub stall_limit: Duration,
}

impl Default for CrashOptions {
    fn default() -> Self {
        Self {
            turns: 1000,
            chats: 50,
            kills: 50,
            stream_over: Duration::from_millis(300),
            seed: Rng::clock_seed(),
            stall_limit: Duration::from_secs(60),
        }
    }
}

#[derive(Clone, Debug)]
pub struct CrashReport {
    pub options: CrashOptions,
    pub kills: u32,
    pub wall: Duration,
    pub tally: Tally,
    /// Turns never asked because their chat waited for a lost answer.
    pub unasked: usize,
    pub restart_median: Duration,
    /// Questions waiting for their answer at the moments of the kills, summed.
    pub in_flight_at_kills: usize,
    /// Model calls: above the turns when a killed run was run again after the restart.
    pub model_calls: usize,
    /// Kept when something was lost or duplicated.
    pub workdir: Option<String>,
}

impl fmt::Display for CrashReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "crash: {} turns over {} Telegram chats, {} SIGKILLs at random moments (seed {})",
            self.options.turns, self.options.chats, self.kills, self.options.seed
        )?;
        writeln!(f, "{:<28} {:>10}", "metric", "value")?;
        writeln!(
            f,
            "{:<28} {:>10.1}",
            "wall time (s)",
            self.wall.as_secs_f64()
        )?;
        writeln!(f, "{:<28} {:>10}", "turns asked", self.tally.asked)?;
        writeln!(
            f,
            "{:<28} {:>10}",
            "answered exactly once", self.tally.answered
        )?;
        writeln!(f, "{:<28} {:>10}", "lost", self.tally.lost.len())?;
        writeln!(
            f,
            "{:<28} {:>10}",
            "duplicated",
            self.tally.duplicated.len()
        )?;
        writeln!(
            f,
            "{:<28} {:>10}",
            "cut-short previews left", self.tally.partial
        )?;
        writeln!(
            f,
            "{:<28} {:>10}",
            "turns not asked (stalled)", self.unasked
        )?;
        writeln!(
            f,
            "{:<28} {:>10}",
            "questions in flight at kills", self.in_flight_at_kills
        )?;
        writeln!(f, "{:<28} {:>10}", "model calls", self.model_calls)?;
        writeln!(
            f,
            "{:<28} {:>10.0}",
            "restart to ready p50 (ms)",
            self.restart_median.as_secs_f64() * 1000.0
        )?;
        if !self.tally.lost.is_empty() || !self.tally.duplicated.is_empty() {
            writeln!(f, "{}", self.tally.examples())?;
        }
        if let Some(dir) = &self.workdir {
            writeln!(f, "work dir kept: {dir}")?;
        }
        Ok(())
    }
}

pub async fn crash(binary: &Path, options: CrashOptions) -> Result<CrashReport, BenchError> {
    let model = echo_model(options.stream_over).await;
    let fleet = Fleet::start(&[Platform::Telegram]).await;
    let mut dir = Workdir::new("crash")?;
    let port = free_port()?;
    dir.write_config(&model.base_url(), port, &fleet.channels_yaml(port))?;
    let names = fleet.names();
    let mut daemon = Some(DaemonProcess::start(binary, &dir, port, &names).await?);
    let mut rng = Rng::new(options.seed);
    // Kill after these many answered turns (plus a random delay, to land mid-stream), drawn
    // from the first half of the run. Turns in flight finish while the daemon restarts, so
    // kills can fall behind their thresholds; the last wave of questions waits until every
    // kill happened, so the run cannot end before them.
    let before = (options.turns / 2).max(2);
    let last_wave = options.turns - (options.chats as usize).min(options.turns / 2);
    let mut thresholds: Vec<usize> = (0..options.kills)
        .map(|_| rng.range(1, before as u64) as usize)
        .collect();
    thresholds.sort_unstable();
    thresholds.reverse();
    let mut talk = Conversations::new(&[Platform::Telegram], options.chats, options.turns);
    let mut restarts = Vec::new();
    let mut in_flight_at_kills = 0;
    let started = Instant::now();
    while !talk.finished() && talk.stalled_for() < options.stall_limit {
        let limit = if thresholds.is_empty() {
            options.turns
        } else {
            last_wave
        };
        talk.ask_up_to(&fleet, limit);
        tokio::time::sleep(Duration::from_millis(20)).await;
        talk.collect(&fleet);
        if thresholds.last().is_some_and(|t| talk.done >= *t) {
            thresholds.pop();
            // Every idle chat asks first, so the kill lands among runs in flight.
            talk.ask_up_to(&fleet, last_wave);
            let delay = rng.range(0, options.stream_over.as_millis() as u64 * 2);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            in_flight_at_kills += talk.waiting();
            if let Some(running) = daemon.take() {
                running.kill().await;
            }
            let restarted = DaemonProcess::start(binary, &dir, port, &names).await?;
            restarts.push(restarted.ready_after);
            daemon = Some(restarted);
        }
    }
    let wall = started.elapsed();
    // Let anything still in flight (a late duplicate) arrive before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    talk.collect(&fleet);
    let tally = Tally::count(&talk.asked, talk.all_texts(&fleet));
    let unasked = options.turns.saturating_sub(talk.asked.len());
    let workdir = (!tally.lost.is_empty() || !tally.duplicated.is_empty()).then(|| {
        dir.keep();
        dir.path().display().to_string()
    });
    if let Some(running) = daemon {
        running.kill().await;
    }
    restarts.sort();
    Ok(CrashReport {
        kills: restarts.len() as u32,
        restart_median: crate::bench::percentile(&restarts, 50.0),
        in_flight_at_kills,
        model_calls: model.calls(),
        options,
        wall,
        tally,
        unasked,
        workdir,
    })
}
