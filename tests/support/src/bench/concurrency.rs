//! `concurrency`: many chats write to the bot through the fake Telegram API at the same moment;
//! the model streams each answer over a fixed time. Reports throughput, the latency the daemon
//! adds on top of the model, and lost and duplicated replies.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::bench::fleet::{Fleet, Platform, telegram_user};
use crate::bench::process::{DaemonProcess, Workdir, free_port};
use crate::bench::{BenchError, Tally, answer_for, echo_model, mib, percentile};

#[derive(Clone, Debug)]
pub struct ConcurrencyOptions {
    pub chats: u32,
    /// How long the model takes to stream each answer.
    pub stream_over: Duration,
    /// Given up after this long without a new answer.
    pub stall_limit: Duration,
}

impl Default for ConcurrencyOptions {
    fn default() -> Self {
        Self {
            chats: 1000,
            stream_over: Duration::from_millis(300),
            stall_limit: Duration::from_secs(60),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ConcurrencyReport {
    pub options: ConcurrencyOptions,
    /// First question to last complete answer.
    pub wall: Duration,
    /// Reply time minus the model's streaming time, sorted.
    pub added: Vec<Duration>,
    /// Question to the daemon's model request, sorted: its own intake and scheduling.
    pub intake: Vec<Duration>,
    pub tally: Tally,
    pub model_calls: usize,
    pub idle_rss_kib: u64,
    pub peak_rss_kib: u64,
}

impl ConcurrencyReport {
    pub fn throughput(&self) -> f64 {
        self.tally.answered as f64 / self.wall.as_secs_f64().max(f64::EPSILON)
    }
}

impl fmt::Display for ConcurrencyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        writeln!(
            f,
            "concurrency: {} Telegram chats at once, model streams each answer over {} ms",
            self.options.chats,
            self.options.stream_over.as_millis()
        )?;
        writeln!(f, "{:<28} {:>12}", "metric", "value")?;
        writeln!(
            f,
            "{:<28} {:>12.1}",
            "wall time (s)",
            self.wall.as_secs_f64()
        )?;
        writeln!(
            f,
            "{:<28} {:>12.1}",
            "throughput (replies/s)",
            self.throughput()
        )?;
        writeln!(
            f,
            "{:<28} {:>12.0}",
            "added latency p50 (ms)",
            ms(percentile(&self.added, 50.0))
        )?;
        writeln!(
            f,
            "{:<28} {:>12.0}",
            "added latency p99 (ms)",
            ms(percentile(&self.added, 99.0))
        )?;
        writeln!(
            f,
            "{:<28} {:>12.0}",
            "question→model p50 (ms)",
            ms(percentile(&self.intake, 50.0))
        )?;
        writeln!(
            f,
            "{:<28} {:>12.0}",
            "question→model p99 (ms)",
            ms(percentile(&self.intake, 99.0))
        )?;
        writeln!(f, "{:<28} {:>12}", "replies", self.tally.answered)?;
        writeln!(f, "{:<28} {:>12}", "lost", self.tally.lost.len())?;
        writeln!(
            f,
            "{:<28} {:>12}",
            "duplicated",
            self.tally.duplicated.len()
        )?;
        writeln!(f, "{:<28} {:>12}", "model calls", self.model_calls)?;
        writeln!(
            f,
            "{:<28} {:>12.1}",
            "RSS idle (MiB)",
            mib(self.idle_rss_kib)
        )?;
        writeln!(
            f,
            "{:<28} {:>12.1}",
            "RSS peak (MiB)",
            mib(self.peak_rss_kib)
        )?;
        if !self.tally.lost.is_empty() || !self.tally.duplicated.is_empty() {
            writeln!(f, "{}", self.tally.examples())?;
        }
        Ok(())
    }
}

pub async fn concurrency(
    binary: &Path,
    options: ConcurrencyOptions,
) -> Result<ConcurrencyReport, BenchError> {
    let model = echo_model(options.stream_over).await;
    let fleet = Fleet::start(&[Platform::Telegram]).await;
    let mut dir = Workdir::new("concurrency")?;
    let port = free_port()?;
    dir.write_config(&model.base_url(), port, &fleet.channels_yaml(port))?;
    let daemon = DaemonProcess::start(binary, &dir, port, &fleet.names()).await?;
    let Some(telegram) = &fleet.telegram else {
        return Err(std::io::Error::other("the fake Telegram did not start").into());
    };
    let idle_rss_kib = daemon.rss_kib();
    let mut asked = HashMap::new();
    let started = Instant::now();
    for n in 0..options.chats {
        let marker = format!("q{n}x1");
        fleet.say(Platform::Telegram, n, &format!("Please answer {marker}"));
        asked.insert(telegram_user(n), (answer_for(&marker), marker));
    }
    // Completion times come from the fake's call log: the first send or edit that made a
    // chat's message read as the whole answer.
    let mut done: HashMap<i64, Instant> = HashMap::new();
    let mut peak_rss_kib = idle_rss_kib;
    let mut last_progress = Instant::now();
    let mut seen_calls = 0;
    while done.len() < asked.len() && last_progress.elapsed() < options.stall_limit {
        tokio::time::sleep(Duration::from_millis(50)).await;
        peak_rss_kib = peak_rss_kib.max(daemon.rss_kib());
        let calls = telegram.calls();
        for call in &calls[seen_calls.min(calls.len())..] {
            let Some(chat) = call.body["chat_id"].as_i64() else {
                continue;
            };
            let Some((answer, _)) = asked.get(&chat) else {
                continue;
            };
            if call.body["text"].as_str().map(str::trim) == Some(answer.as_str()) {
                done.entry(chat).or_insert(call.at);
                last_progress = Instant::now();
            }
        }
        seen_calls = calls.len();
    }
    // Late duplicates would show up within a few seconds.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let last = done.values().max().copied().unwrap_or(started);
    let mut added: Vec<Duration> = done
        .values()
        .map(|at| {
            at.duration_since(started)
                .saturating_sub(options.stream_over)
        })
        .collect();
    added.sort();
    let markers: Vec<String> = asked.values().map(|(_, m)| m.clone()).collect();
    let mut intake: Vec<Duration> = markers
        .iter()
        .filter_map(|m| model.first_call(m))
        .map(|at| at.duration_since(started))
        .collect();
    intake.sort();
    let texts = (0..options.chats).flat_map(|n| fleet.texts(Platform::Telegram, n));
    let tally = Tally::count(&markers, texts);
    if !tally.lost.is_empty() || !tally.duplicated.is_empty() {
        dir.keep();
    }
    daemon.kill().await;
    Ok(ConcurrencyReport {
        options,
        wall: last.duration_since(started),
        added,
        intake,
        tally,
        model_calls: model.calls(),
        idle_rss_kib,
        peak_rss_kib,
    })
}
