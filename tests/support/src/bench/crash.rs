//! `crash`: SIGKILL the daemon at random moments while conversations run through the fake
//! Telegram API (which, like Telegram, hands out an update until a later `getUpdates` offset
//! confirms it), restart it on the same data dir each time, and count the replies that were
//! lost or sent twice.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::bench::drive::Conversations;
use crate::bench::failover::Instance;
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
    /// Two daemons on this PostgreSQL database instead of one on sled: each kill takes a
    /// random one of them (the poller or the one standing by) and restarts it.
    pub database_url: Option<String>,
    /// `cluster.lease_seconds` of the two daemons.
    pub lease_seconds: u64,
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
            database_url: None,
            lease_seconds: 3,
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
        let daemons = if self.options.database_url.is_some() {
            "two daemons on one PostgreSQL database"
        } else {
            "one daemon on sled"
        };
        writeln!(
            f,
            "crash: {} turns over {} Telegram chats, {} SIGKILLs at random moments, {daemons} (seed {})",
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
    let mut daemons = Daemons::start(binary, &model.base_url(), &fleet, &options).await?;
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
            let victim = rng.range(0, daemons.running.len() as u64) as usize;
            restarts.push(daemons.restart(binary, victim).await?);
        }
    }
    let wall = started.elapsed();
    // Let anything still in flight (a late duplicate) arrive before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    talk.collect(&fleet);
    let tally = Tally::count(&talk.asked, talk.all_texts(&fleet));
    let unasked = options.turns.saturating_sub(talk.asked.len());
    let workdir = (!tally.lost.is_empty() || !tally.duplicated.is_empty()).then(|| daemons.keep());
    daemons.stop().await;
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

/// The daemons under test: one on sled in its work dir, or two on one PostgreSQL database
/// (the first polls; the lease decides after that).
struct Daemons {
    dirs: Vec<Workdir>,
    ports: Vec<u16>,
    /// Only for the single daemon: the channels its start waits for.
    pair: Option<[Instance; 2]>,
    running: Vec<Option<DaemonProcess>>,
    names: Vec<&'static str>,
}

impl Daemons {
    async fn start(
        binary: &Path,
        model_url: &str,
        fleet: &Fleet,
        options: &CrashOptions,
    ) -> Result<Self, BenchError> {
        let names = fleet.names();
        if let Some(url) = &options.database_url {
            if let Some(telegram) = &fleet.telegram {
                telegram.refuse_concurrent_polls();
            }
            let pair = [
                Instance::new("crash-a", model_url, fleet, url, options.lease_seconds)?,
                Instance::new("crash-b", model_url, fleet, url, options.lease_seconds)?,
            ];
            let running = vec![
                Some(pair[0].start(binary, true).await?),
                Some(pair[1].start(binary, false).await?),
            ];
            return Ok(Self {
                dirs: Vec::new(),
                ports: Vec::new(),
                pair: Some(pair),
                running,
                names,
            });
        }
        let dir = Workdir::new("crash")?;
        let port = free_port()?;
        dir.write_config(model_url, port, &fleet.channels_yaml(port))?;
        let running = vec![Some(
            DaemonProcess::start(binary, &dir, port, &names).await?,
        )];
        Ok(Self {
            dirs: vec![dir],
            ports: vec![port],
            pair: None,
            running,
            names,
        })
    }

    /// SIGKILLs daemon `index` and starts it again; returns how long it took to be ready.
    async fn restart(&mut self, binary: &Path, index: usize) -> Result<Duration, BenchError> {
        if let Some(running) = self.running[index].take() {
            running.kill().await;
        }
        let restarted = match &self.pair {
            // A restarted instance stands by: the other may hold the transport lease now.
            Some(pair) => pair[index].start(binary, false).await?,
            None => {
                DaemonProcess::start(binary, &self.dirs[index], self.ports[index], &self.names)
                    .await?
            }
        };
        let ready = restarted.ready_after;
        self.running[index] = Some(restarted);
        Ok(ready)
    }

    /// Keeps the work dirs for a look afterwards; returns the first.
    fn keep(&mut self) -> String {
        match &mut self.pair {
            Some(pair) => {
                for instance in pair.iter_mut() {
                    instance.keep();
                }
                pair[0].path()
            }
            None => {
                self.dirs[0].keep();
                self.dirs[0].path().display().to_string()
            }
        }
    }

    async fn stop(self) {
        for daemon in self.running.into_iter().flatten() {
            daemon.kill().await;
        }
    }
}
