//! The operational benchmarks, each printing a table:
//! `cargo run --release -p antler-test-support --example ops_bench -- <name> --binary
//! target/release/antler [options]` with `<name>` one of `concurrency`, `crash`, `soak`, `idle`,
//! `failover` (`--database-url URL` of an empty PostgreSQL database, `--lease-seconds N`); `crash`
//! takes them too, for two daemons on that database instead of one on sled.
//! Options: `--chats N`, `--turns N`, `--threads N`, `--kills N`, `--seed N`,
//! `--stream-ms N` (how long the model streams each answer), `--png PATH` (soak: the RSS plot),
//! `--channels telegram,slack|all|none` (idle: which channels to connect).
//! `schedules`: scheduled tasks under SIGKILL (`--schedules N`, `--slots N`, `--every-s N`,
//! `--kills N`, `--down-ms N` (how long it stays down after a kill), `--max-concurrent N`, `--stream-ms N`, `--seed N`); `schedule-idle`: an idle
//! daemon's CPU with `--schedules N` schedules hours away against none (`--window-s N`).
//! `webhooks`: signed deliveries to `POST /hooks/alerts` answered in a fake Slack
//! (`--deliveries N`, `--in-flight N`, `--redeliver-percent N`, `--chats N` (Slack channels the
//! answers spread over), `--stream-ms N`, `--seed N`, `--kills N` (SIGKILLs of the daemon, each
//! restarted at once; senders retry what got no answer), `--per-second N` (paced sends, so kills
//! land among them)).

// A tool run by hand: it prints its figures, fails loudly on a broken set-up, and its tasks
// live as long as its runtime.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use antler_test_support::bench::{
    self, ConcurrencyOptions, CrashOptions, FailoverOptions, ScheduleCrashOptions, SoakOptions,
    WebhookOptions, rss_plot_png,
};

struct Args {
    name: String,
    binary: PathBuf,
    values: Vec<(String, String)>,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let mut args = std::env::args().skip(1);
        let name = args
            .next()
            .ok_or("name a benchmark: concurrency, crash, soak, idle, failover, schedules, schedule-idle or webhooks")?;
        let mut binary = None;
        let mut values = Vec::new();
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--binary" => binary = Some(PathBuf::from(value)),
                other => values.push((other.trim_start_matches("--").to_string(), value)),
            }
        }
        let binary = binary.ok_or("pass --binary <path to antler> (e.g. target/release/antler)")?;
        Ok(Self {
            name,
            binary,
            values,
        })
    }

    fn number<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, String> {
        match self.values.iter().find(|(k, _)| k == key) {
            Some((_, value)) => value
                .parse()
                .map_err(|_| format!("--{key} takes a number, not {value:?}")),
            None => Ok(default),
        }
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

async fn run(args: &Args) -> Result<bool, String> {
    let err = |e: bench::BenchError| e.to_string();
    match args.name.as_str() {
        "concurrency" => {
            let defaults = ConcurrencyOptions::default();
            let options = ConcurrencyOptions {
                chats: args.number("chats", defaults.chats)?,
                stream_over: Duration::from_millis(args.number("stream-ms", 300)?),
                ..defaults
            };
            let report = bench::concurrency(&args.binary, options)
                .await
                .map_err(err)?;
            println!("{report}");
            Ok(report.tally.lost.is_empty() && report.tally.duplicated.is_empty())
        }
        "crash" => {
            let defaults = CrashOptions::default();
            let options = CrashOptions {
                turns: args.number("turns", defaults.turns)?,
                chats: args.number("chats", defaults.chats)?,
                kills: args.number("kills", defaults.kills)?,
                seed: args.number("seed", defaults.seed)?,
                stream_over: Duration::from_millis(args.number("stream-ms", 300)?),
                database_url: args.text("database-url").map(str::to_string),
                lease_seconds: args.number("lease-seconds", defaults.lease_seconds)?,
                ..defaults
            };
            let report = bench::crash(&args.binary, options).await.map_err(err)?;
            println!("{report}");
            Ok(report.tally.lost.is_empty() && report.tally.duplicated.is_empty())
        }
        "soak" => {
            let defaults = SoakOptions::default();
            let options = SoakOptions {
                turns: args.number("turns", defaults.turns)?,
                threads: args.number("threads", defaults.threads)?,
                sample_every: args.number("sample-every", defaults.sample_every)?,
                stream_over: Duration::from_millis(args.number("stream-ms", 50)?),
                ..defaults
            };
            let report = bench::soak(&args.binary, options).await.map_err(err)?;
            println!("{report}");
            if let Some(path) = args.text("png") {
                let points: Vec<(f64, f64)> = report
                    .samples
                    .iter()
                    .map(|(turns, kib, _)| (*turns as f64, bench::mib(*kib)))
                    .collect();
                let png = rss_plot_png(&points, "antler soak: RSS over turns, 4 channels")
                    .map_err(|e| format!("cannot draw the plot: {e}"))?;
                std::fs::write(path, png).map_err(|e| format!("cannot write {path}: {e}"))?;
                println!("plot written to {path}");
            }
            Ok(report.finished
                && report.tally.lost.is_empty()
                && report.tally.duplicated.is_empty())
        }
        "schedules" => {
            let defaults = ScheduleCrashOptions::default();
            let options = ScheduleCrashOptions {
                schedules: args.number("schedules", defaults.schedules)?,
                slots: args.number("slots", defaults.slots)?,
                every_seconds: args.number("every-s", defaults.every_seconds)?,
                kills: args.number("kills", defaults.kills)?,
                down: Duration::from_millis(args.number("down-ms", 5000)?),
                max_concurrent: args.number("max-concurrent", defaults.max_concurrent)?,
                stream_over: Duration::from_millis(args.number("stream-ms", 100)?),
                seed: args.number("seed", defaults.seed)?,
            };
            let report = bench::schedule_crash(&args.binary, options)
                .await
                .map_err(err)?;
            println!("{report}");
            Ok(report.ok())
        }
        "webhooks" => {
            let defaults = WebhookOptions::default();
            let options = WebhookOptions {
                deliveries: args.number("deliveries", defaults.deliveries)?,
                in_flight: args.number("in-flight", defaults.in_flight)?,
                redeliver_percent: args.number("redeliver-percent", defaults.redeliver_percent)?,
                chats: args.number("chats", defaults.chats)?,
                stream_over: Duration::from_millis(args.number("stream-ms", 100)?),
                seed: args.number("seed", defaults.seed)?,
                kills: args.number("kills", defaults.kills)?,
                per_second: args.number("per-second", defaults.per_second)?,
                ..defaults
            };
            let report = bench::webhooks(&args.binary, options).await.map_err(err)?;
            println!("{report}");
            Ok(report.ok())
        }
        "schedule-idle" => {
            let window = Duration::from_secs(args.number("window-s", 30)?);
            let report = bench::schedule_idle(&args.binary, args.number("schedules", 100)?, window)
                .await
                .map_err(err)?;
            println!("{report}");
            Ok(true)
        }
        "idle" => {
            let settle = Duration::from_secs(args.number("settle-s", 5)?);
            let platforms = bench::Platform::parse_list(args.text("channels").unwrap_or("all"))?;
            let report = bench::idle(&args.binary, &platforms, settle)
                .await
                .map_err(err)?;
            println!("{report}");
            Ok(true)
        }
        "failover" => {
            let database_url = args
                .text("database-url")
                .map(str::to_string)
                .or_else(|| std::env::var("ANTLER_DATABASE_URL").ok())
                .ok_or("failover needs --database-url (an empty PostgreSQL database)")?;
            let options = FailoverOptions {
                database_url,
                kills: args.number("kills", 5)?,
                lease_seconds: args.number("lease-seconds", 3)?,
                stream_over: Duration::from_millis(args.number("stream-ms", 300)?),
            };
            let report = bench::failover(&args.binary, options).await.map_err(err)?;
            println!("{report}");
            Ok(report.tally.lost.is_empty()
                && report.tally.duplicated.is_empty()
                && report.overlaps == 0)
        }
        other => Err(format!(
            "unknown benchmark {other:?}: use concurrency, crash, soak, idle, failover, schedules, schedule-idle or webhooks"
        )),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("ops_bench: {message}");
            return ExitCode::from(64);
        }
    };
    match run(&args).await {
        Ok(true) => ExitCode::SUCCESS,
        // The table says what went wrong (lost or duplicated replies, a stalled soak).
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("ops_bench: {message}");
            ExitCode::from(2)
        }
    }
}
