//! `schedules`: scheduled tasks under SIGKILL. Schedules made through `/api/schedules` fire
//! every few seconds (catch-up policies `latest`, `none` and `all` in turn) while the daemon is
//! killed at random moments and restarted on the same data dir; once enough slots have
//! passed, every schedule is paused, the claimed fires drain, and the records are checked
//! against the slots and the threads: every slot since its schedule's creation has one record
//! (none lost) and no slot ran twice (one question and one answer per fire in its thread).
//! `schedule_idle` is the other half of the goal: the CPU an idle daemon spends with many
//! schedules whose next fire is hours away, against none.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::bench::process::{DaemonProcess, Workdir, free_port};
use crate::bench::{BenchError, Rng};
use crate::{FakeOpenAi, Reply};

#[derive(Clone, Debug)]
pub struct ScheduleCrashOptions {
    pub schedules: usize,
    /// Run until this many slots (summed over the schedules) have passed.
    pub slots: u64,
    pub every_seconds: u64,
    pub kills: u32,
    /// The longest the daemon stays down after a kill (each time between half of it and all of it): slots
    /// falling in it are run or recorded missed by their schedule's policy; those further back
    /// than the daemon's grace (30 s) run as catch-up.
    pub down: Duration,
    /// `scheduler.max_concurrent`.
    pub max_concurrent: u32,
    /// How long each model answer streams (a kill can land inside a run).
    pub stream_over: Duration,
    pub seed: u64,
}

impl Default for ScheduleCrashOptions {
    fn default() -> Self {
        Self {
            schedules: 100,
            slots: 10_000,
            every_seconds: 2,
            kills: 10,
            down: Duration::from_secs(5),
            max_concurrent: 16,
            stream_over: Duration::from_millis(100),
            seed: Rng::clock_seed(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct ScheduleCrashReport {
    pub options: Option<ScheduleCrashOptions>,
    pub kills: u32,
    pub wall: Duration,
    /// Slots that fell between each schedule's creation and its pause, summed.
    pub slots: u64,
    /// Records of those slots by outcome (`ran`, `failed`, `missed`, `skipped_budget`).
    pub outcomes: HashMap<String, u64>,
    /// Fires that ran as catch-up after a restart.
    pub caught_up: u64,
    /// Slots without a record, and fires still claimed after the drain: must be 0.
    pub lost: Vec<String>,
    /// Fires whose question or answer is in their thread more than once: must be 0.
    pub duplicates: Vec<String>,
    /// Fires recorded `ran` whose thread holds no answer for them.
    pub ran_without_answer: Vec<String>,
    pub model_calls: usize,
    pub restart_median: Duration,
    pub workdir: Option<String>,
}

impl ScheduleCrashReport {
    pub fn ok(&self) -> bool {
        self.lost.is_empty() && self.duplicates.is_empty() && self.ran_without_answer.is_empty()
    }

    fn outcome(&self, name: &str) -> u64 {
        self.outcomes.get(name).copied().unwrap_or(0)
    }
}

impl fmt::Display for ScheduleCrashReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(options) = &self.options {
            writeln!(
                f,
                "schedules: {} schedules every {} s (catch_up latest, none, all in turn), {} slots, {} SIGKILLs at random moments, down up to {:.1} s each, one daemon on sled (seed {})",
                options.schedules,
                options.every_seconds,
                options.slots,
                self.kills,
                options.down.as_secs_f64(),
                options.seed
            )?;
        }
        let rows: [(&str, String); 12] = [
            ("wall time (s)", format!("{:.1}", self.wall.as_secs_f64())),
            ("slots passed", self.slots.to_string()),
            ("ran", self.outcome("ran").to_string()),
            ("  of them caught up", self.caught_up.to_string()),
            ("missed (recorded)", self.outcome("missed").to_string()),
            ("failed", self.outcome("failed").to_string()),
            (
                "skipped for budget",
                self.outcome("skipped_budget").to_string(),
            ),
            ("lost (no record)", self.lost.len().to_string()),
            ("ran twice", self.duplicates.len().to_string()),
            (
                "ran without answer",
                self.ran_without_answer.len().to_string(),
            ),
            ("model calls", self.model_calls.to_string()),
            (
                "restart to ready p50 (ms)",
                format!("{:.0}", self.restart_median.as_secs_f64() * 1000.0),
            ),
        ];
        writeln!(f, "{:<28} {:>10}", "metric", "value")?;
        for (name, value) in rows {
            writeln!(f, "{name:<28} {value:>10}")?;
        }
        for (what, list) in [
            ("lost", &self.lost),
            ("ran twice", &self.duplicates),
            ("ran without answer", &self.ran_without_answer),
        ] {
            if !list.is_empty() {
                let shown: Vec<&str> = list.iter().take(5).map(String::as_str).collect();
                writeln!(f, "{what}, e.g.: {}", shown.join(", "))?;
            }
        }
        if let Some(dir) = &self.workdir {
            writeln!(f, "work dir kept: {dir}")?;
        }
        Ok(())
    }
}

/// See the module's description.
pub async fn schedule_crash(
    binary: &Path,
    options: ScheduleCrashOptions,
) -> Result<ScheduleCrashReport, BenchError> {
    let model = FakeOpenAi::start().await;
    let frame = options.stream_over / 6;
    model.respond_with(move |_| Reply::slow(["Checked ", "the ", "status ", "page."], frame));
    let mut dir = Workdir::new("schedules")?;
    let port = free_port()?;
    let scheduler = format!(
        "scheduler:\n  min_interval_seconds: 1\n  max_concurrent: {}\n  max_per_user: {}\n",
        options.max_concurrent,
        options.schedules + 10
    );
    dir.write_config(&model.base_url(), port, &scheduler)?;
    let api = Api::new(port)?;
    let mut daemon = DaemonProcess::start(binary, &dir, port, &[]).await?;
    let mut rng = Rng::new(options.seed);
    let policies = ["latest", "none", "all"];
    let mut ids = Vec::with_capacity(options.schedules);
    for index in 0..options.schedules {
        let body = json!({
            "name": format!("bench {index}"),
            "prompt": format!("Check the status page (schedule {index})"),
            "when": {"every_seconds": options.every_seconds},
            "catch_up": policies[index % policies.len()],
        });
        let created = api.send("POST", "/api/schedules", Some(body)).await?;
        let id = created["schedule"]["id"].as_str().unwrap_or_default();
        ids.push(id.to_string());
    }
    // Slots pass at `schedules / every_seconds` a second; the kills fall in the middle 80 %.
    let rate = options.schedules as f64 / options.every_seconds as f64;
    let expected = Duration::from_secs_f64(options.slots as f64 / rate.max(0.001));
    let mut kill_at: Vec<Duration> = (0..options.kills)
        .map(|_| {
            let low = expected.as_millis() as u64 / 10;
            Duration::from_millis(rng.range(low, low * 9))
        })
        .collect();
    kill_at.sort_unstable();
    kill_at.reverse();
    let started = Instant::now();
    let mut restarts = Vec::new();
    // Every kill happens, even when the outages outlast the planned slots.
    while started.elapsed() < expected || !kill_at.is_empty() {
        if kill_at.last().is_some_and(|at| started.elapsed() >= *at) {
            kill_at.pop();
            daemon.kill().await;
            let longest = options.down.as_millis() as u64;
            let down = rng.range(longest / 2, longest + 1);
            tokio::time::sleep(Duration::from_millis(down)).await;
            daemon = DaemonProcess::start(binary, &dir, port, &[]).await?;
            restarts.push(daemon.ready_after);
            continue;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for id in &ids {
        api.send(
            "PATCH",
            &format!("/api/schedules/{id}"),
            Some(json!({"status": "paused"})),
        )
        .await?;
    }
    let wall = started.elapsed();
    let mut report = check(&api, &ids, options.every_seconds).await?;
    restarts.sort();
    report.kills = restarts.len() as u32;
    report.restart_median = crate::bench::percentile(&restarts, 50.0);
    report.model_calls = model.responded();
    report.wall = wall;
    report.options = Some(options);
    if !report.ok() {
        dir.keep();
        report.workdir = Some(dir.path().display().to_string());
    }
    daemon.kill().await;
    Ok(report)
}

/// Waits for the claimed fires to end, then compares each schedule's records with its slots
/// and its thread.
async fn check(
    api: &Api,
    ids: &[String],
    every_seconds: u64,
) -> Result<ScheduleCrashReport, BenchError> {
    let mut report = ScheduleCrashReport::default();
    let deadline = Instant::now() + Duration::from_secs(180);
    for id in ids {
        let (schedule, fires) = loop {
            let body = api
                .send("GET", &format!("/api/schedules/{id}?fires=0"), None)
                .await?;
            let fires: Vec<Value> = body["fires"].as_array().cloned().unwrap_or_default();
            let claimed = fires.iter().any(|f| f["status"] == "claimed");
            if !claimed || Instant::now() > deadline {
                break (body["schedule"].clone(), fires);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let thread = schedule["thread_id"].as_str().unwrap_or_default();
        let state = api
            .send("GET", &format!("/api/threads/{thread}/state"), None)
            .await?;
        check_one(&mut report, id, &schedule, &fires, &state, every_seconds);
    }
    Ok(report)
}

fn check_one(
    report: &mut ScheduleCrashReport,
    id: &str,
    schedule: &Value,
    fires: &[Value],
    state: &Value,
    every_seconds: u64,
) {
    let time = |value: &Value| {
        value
            .as_str()
            .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
            .map(|at| at.with_timezone(&Utc))
    };
    let (Some(created), Some(next)) = (time(&schedule["created_at"]), time(&schedule["next_fire"]))
    else {
        report
            .lost
            .push(format!("{id}: no creation time or next fire"));
        return;
    };
    let by_slot: HashMap<i64, &Value> = fires
        .iter()
        .filter(|fire| fire["kind"] != "manual")
        .filter_map(|fire| time(&fire["slot"]).map(|slot| (slot.timestamp_millis(), fire)))
        .collect();
    let step = every_seconds as i64 * 1000;
    let mut slot = created.timestamp_millis() + step;
    while slot < next.timestamp_millis() {
        report.slots += 1;
        let key = format!("{id}@{slot}");
        match by_slot.get(&slot) {
            None => report.lost.push(key),
            Some(fire) if fire["status"] != "done" => {
                report.lost.push(format!("{key} (still claimed)"))
            }
            Some(fire) => {
                let outcome = fire["outcome"].as_str().unwrap_or("none").to_string();
                if outcome == "ran" && fire["kind"] == "catch_up" {
                    report.caught_up += 1;
                }
                *report.outcomes.entry(outcome).or_default() += 1;
            }
        }
        slot += step;
    }
    // The thread: each fire's question once (a human message whose `meta.extra.schedule_fire`
    // is the fire's key), and one answer after it.
    let messages = state["values"]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut answers: HashMap<i64, (u32, u32)> = HashMap::new();
    let mut current: Option<i64> = None;
    for message in &messages {
        match message["type"].as_str() {
            Some("human") => {
                current = message["meta"]["extra"]["schedule_fire"]
                    .as_str()
                    .and_then(|key| key.strip_prefix(id)?.strip_prefix('@'))
                    .and_then(|slot| DateTime::parse_from_rfc3339(slot).ok())
                    .map(|slot| slot.timestamp_millis());
                if let Some(slot) = current {
                    answers.entry(slot).or_default().0 += 1;
                }
            }
            // A final answer; a schedule's own notices (⚠ failed, ⏭ skipped) are not runs.
            Some("ai")
                if message["tool_calls"].as_array().is_none_or(Vec::is_empty)
                    && !is_notice(message) =>
            {
                if let Some(slot) = current {
                    answers.entry(slot).or_default().1 += 1;
                }
            }
            _ => {}
        }
    }
    for (slot, (questions, replies)) in &answers {
        if *questions > 1 || *replies > 1 {
            report.duplicates.push(format!(
                "{id}@{slot}: {questions} questions, {replies} answers"
            ));
        }
    }
    for (slot, fire) in &by_slot {
        if fire["outcome"] == "ran" && answers.get(slot).is_none_or(|(_, r)| *r == 0) {
            report.ran_without_answer.push(format!("{id}@{slot}"));
        }
    }
}

fn is_notice(message: &Value) -> bool {
    let text = message["content"].as_str().unwrap_or_default();
    text.starts_with("⚠ Schedule") || text.starts_with("⏭ Schedule")
}

#[derive(Clone, Debug)]
pub struct ScheduleIdleReport {
    pub schedules: usize,
    pub window: Duration,
    /// CPU time (user + system) the idle daemon spent over `window`, without schedules.
    pub cpu_without: Duration,
    /// The same with `schedules` schedules whose next fire is hours away.
    pub cpu_with: Duration,
}

impl fmt::Display for ScheduleIdleReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "schedule-idle: CPU of an idle daemon over {:.0} s, without schedules and with {} whose next fire is hours away",
            self.window.as_secs_f64(),
            self.schedules
        )?;
        writeln!(f, "{:<28} {:>10}", "metric", "value")?;
        writeln!(
            f,
            "{:<28} {:>10.0}",
            "CPU without (ms)",
            self.cpu_without.as_secs_f64() * 1000.0
        )?;
        writeln!(
            f,
            "{:<28} {:>10.0}",
            "CPU with schedules (ms)",
            self.cpu_with.as_secs_f64() * 1000.0
        )
    }
}

/// Measures an idle daemon's CPU over `window`, first without schedules, then (a fresh data
/// dir) with `schedules` cron schedules firing once a year.
pub async fn schedule_idle(
    binary: &Path,
    schedules: usize,
    window: Duration,
) -> Result<ScheduleIdleReport, BenchError> {
    let model = FakeOpenAi::start().await;
    let mut cpu = Vec::new();
    for count in [0, schedules] {
        let dir = Workdir::new("schedule-idle")?;
        let port = free_port()?;
        let scheduler = format!("scheduler:\n  max_per_user: {}\n", schedules + 10);
        dir.write_config(&model.base_url(), port, &scheduler)?;
        let api = Api::new(port)?;
        let daemon = DaemonProcess::start(binary, &dir, port, &[]).await?;
        for index in 0..count {
            // Hours away: one slot a year, on a date that is not today.
            let body = json!({
                "prompt": format!("Yearly report {index}"),
                "when": {"cron": "0 3 1 1 *"},
            });
            api.send("POST", "/api/schedules", Some(body)).await?;
        }
        // Let start-up and the creations settle before measuring.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = cpu_time(daemon.pid);
        tokio::time::sleep(window).await;
        cpu.push(cpu_time(daemon.pid).saturating_sub(before));
        daemon.kill().await;
    }
    Ok(ScheduleIdleReport {
        schedules,
        window,
        cpu_without: cpu[0],
        cpu_with: cpu[1],
    })
}

/// User + system CPU time of a process so far (`/proc/{pid}/stat`, in USER_HZ = 100 ticks).
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// The daemon's HTTP API (token-less on loopback: the local operator, an admin).
struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    fn new(port: u16) -> Result<Self, BenchError> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Self {
            http,
            base: format!("http://127.0.0.1:{port}"),
        })
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, BenchError> {
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        let response = request
            .send()
            .await
            .map_err(|e| std::io::Error::other(format!("{method} {path}: {e}")))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        if !status.is_success() {
            return Err(
                std::io::Error::other(format!("{method} {path}: HTTP {status}: {text}")).into(),
            );
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_reads_this_process() {
        // Spin a little so the process has some CPU time on record.
        let mut x = 0u64;
        let until = Instant::now() + Duration::from_millis(30);
        while Instant::now() < until {
            x = x.wrapping_add(1);
        }
        assert!(x > 0);
        assert!(cpu_time(std::process::id()) > Duration::ZERO);
        assert_eq!(cpu_time(u32::MAX), Duration::ZERO);
    }

    #[test]
    fn a_gap_a_claim_and_a_double_answer_are_counted() {
        let schedule = json!({
            "created_at": "2026-12-05T10:00:00Z",
            "next_fire": "2026-12-05T10:00:08Z",
            "thread_id": "t",
        });
        let fire = |slot: &str, status: &str, outcome: Option<&str>| json!({"slot": slot, "kind": "due", "status": status, "outcome": outcome});
        let fires = [
            fire("2026-12-05T10:00:02Z", "done", Some("ran")),
            fire("2026-12-05T10:00:04Z", "claimed", None),
            // 10:00:06 has no record.
        ];
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis();
        let question = |slot: &str| {
            json!({"type": "human", "id": format!("human-sched-s1-{}", at(slot)),
                   "meta": {"extra": {"schedule_fire": format!("s1@{slot}")}}})
        };
        let answer = json!({"type": "ai", "id": "a", "content": "Checked."});
        let state = json!({"values": {"messages": [
            question("2026-12-05T10:00:02Z"), answer, answer,
        ]}});
        let mut report = ScheduleCrashReport::default();
        check_one(&mut report, "s1", &schedule, &fires, &state, 2);
        assert_eq!(report.slots, 3);
        assert_eq!(report.lost.len(), 2, "{:?}", report.lost);
        assert_eq!(report.duplicates.len(), 1, "{:?}", report.duplicates);
        assert_eq!(report.outcome("ran"), 1);
        assert!(report.ran_without_answer.is_empty());
    }
}
