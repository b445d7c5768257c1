//! `webhooks`: other systems' signed deliveries to `POST /hooks/{endpoint}`, against the daemon
//! with a fake Slack connected. N deliveries are signed like a sender (`X-Antler-Signature`
//! over `timestamp.body`), C in flight; a share of them is sent again with the same
//! `X-Antler-Delivery` id: at the same moment as the original (the two race for the record),
//! right after the original's 202 (its run going), or once its answer is in Slack (a sender
//! that never saw the 202). Every 202 body is kept. The promise held: one run per delivery id
//! (N distinct `run_id`s, every redelivery answered with its original's ids), the model asked
//! once per delivery, and each answer posted exactly once in the Slack channel it named.
//!
//! The answers spread over `chats` Slack channels (`deliver_to.chat` is a template on the
//! payload): the bot posts under Slack's budget (about 50 messages a minute a channel, 3 a
//! second in all), which, not the daemon, bounds how fast answers can land.

mod kills;
mod report;
mod sender;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::task::JoinSet;

use crate::FakeSlack;
use crate::bench::fleet::{Fleet, Platform};
use crate::bench::model::echo_model;
use crate::bench::process::{DaemonProcess, Workdir, free_port, peak_rss_kib};
use crate::bench::{BenchError, Rng};

use kills::Killer;
pub use report::WebhookReport;
use report::{answered_markers, check};
use sender::Sender;

/// The endpoint's name: `POST /hooks/alerts`.
const ENDPOINT: &str = "alerts";
const SECRET: &str = "bench-webhook-secret-5f2c9a";
/// The Antler user the runs act as.
const USER: &str = "ops";

#[derive(Clone, Debug)]
pub struct WebhookOptions {
    /// Distinct deliveries (delivery ids).
    pub deliveries: usize,
    /// Requests in flight at once.
    pub in_flight: usize,
    /// Share of the deliveries sent a second time with the same delivery id.
    pub redeliver_percent: u32,
    /// Slack channels the answers go to (`C0HOOK0001`, …), one per delivery in turn.
    pub chats: u32,
    /// How long the model streams each answer.
    pub stream_over: Duration,
    pub seed: u64,
    /// Given up after this long without a new answer in Slack.
    pub stall_limit: Duration,
    /// Deliveries started a second at most (0: as fast as `in_flight` allows), so a run can
    /// last long enough for kills to land among the sends.
    pub per_second: u32,
    /// SIGKILLs of the daemon during the run, each followed by a restart on the same data dir;
    /// senders retry what got no answer.
    pub kills: u32,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        Self {
            deliveries: 1000,
            in_flight: 16,
            redeliver_percent: 10,
            chats: 10,
            stream_over: Duration::from_millis(100),
            seed: Rng::clock_seed(),
            stall_limit: Duration::from_secs(120),
            kills: 0,
            per_second: 0,
        }
    }
}

/// When a redelivery is sent, relative to its original.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Again {
    /// At the same moment as the original: both race for the delivery's record.
    Racing,
    /// Right after the original's 202, while its run is going.
    Running,
    /// Once the original's answer is in Slack.
    Answered,
}

/// One delivery as its sender holds it.
#[derive(Clone, Debug)]
pub(super) struct Delivery {
    marker: String,
    id: String,
    chat: String,
    body: Vec<u8>,
    again: Option<Again>,
}

/// What one request got back.
#[derive(Clone, Debug)]
pub(super) struct Sent {
    index: usize,
    again: bool,
    result: Result<(String, String), String>,
    /// When it first went out.
    at: Instant,
    /// From the last attempt to its answer.
    after: Duration,
    /// Requests it took (more than one when the daemon was down).
    attempts: u32,
}

/// See the module's description.
pub async fn webhooks(binary: &Path, options: WebhookOptions) -> Result<WebhookReport, BenchError> {
    let model = echo_model(options.stream_over).await;
    let fleet = Fleet::start(&[Platform::Slack]).await;
    let mut dir = Workdir::new("webhooks")?;
    let port = free_port()?;
    let channels = fleet.channels_yaml(port) + &endpoint_yaml(options.chats);
    dir.write_config(&model.base_url(), port, &channels)?;
    let daemon = DaemonProcess::start(binary, &dir, port, &["slack"]).await?;
    let sender = Arc::new(Sender::new(&daemon.base)?);
    let deliveries = Arc::new(plan(&options));
    let slack = fleet
        .slack()
        .ok_or_else(|| std::io::Error::other("the fake Slack did not start"))?;
    let mut killer = Killer::new(
        binary,
        &dir,
        port,
        daemon,
        options.kills,
        options.deliveries,
        options.seed,
    );

    let log: Arc<Mutex<Vec<Sent>>> = Arc::default();
    let pace = (options.per_second > 0).then(|| Duration::from_secs(1) / options.per_second);
    let workers = send_all(&sender, &deliveries, &log, options.in_flight, pace);
    let run = Run {
        sender: &sender,
        deliveries: &deliveries,
        slack,
        log: &log,
        options: &options,
    };
    let timing = run.await_answers(workers, &mut killer).await;
    let timing = match timing {
        Ok(timing) => timing,
        Err(error) => {
            dir.keep();
            return Err(error);
        }
    };
    quiet(slack, Duration::from_secs(2), Duration::from_secs(30)).await;

    let texts = bot_texts(slack);
    let sent = log.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // After a kill a run cut short is run again: more than one model call is then no fault.
    let strict = options.kills == 0;
    let mut report = check(&deliveries, &sent, &texts, strict, |m| model.calls_for(m));
    report.model_calls = model.calls();
    report.redelivered_mid_run = sent
        .iter()
        .filter(|s| s.again && deliveries[s.index].again == Some(Again::Running))
        .filter(|s| {
            let answered = timing.first_seen.get(&deliveries[s.index].marker);
            answered.is_none_or(|at| s.at < *at)
        })
        .count();
    report.send_phase = timing.send_phase.unwrap_or(timing.wall);
    // Until the last answer, or the last send when that came later.
    report.wall = timing.wall.max(report.send_phase);
    if let Some(daemon) = killer.daemon() {
        report.rss_end_kib = daemon.rss_kib();
        report.rss_peak_kib = peak_rss_kib(daemon.pid);
    }
    report.kills = killer.restarts.len() as u32;
    let mut restarts = killer.restarts.clone();
    restarts.sort();
    report.restart_median = crate::bench::percentile(&restarts, 50.0);
    report.options = Some(options);
    killer.stop().await;
    if !report.ok() {
        dir.keep();
        report.workdir = Some(dir.path().display().to_string());
    }
    Ok(report)
}

/// The `webhook:` block under `channels:`: one endpoint answering in the Slack channel its
/// payload names.
fn endpoint_yaml(chats: u32) -> String {
    let chat = if chats <= 1 {
        chat_name(0)
    } else {
        "{{body.channel}}".to_string()
    };
    format!(
        "  webhook:\n    endpoints:\n      {ENDPOINT}:\n        secret: \"{SECRET}\"\n        user: {USER}\n        prompt: \"Alert {{{{body.alert}}}} fired on {{{{body.host}}}}. Look into it and say what you found.\"\n        deliver_to:\n          channel: slack\n          chat: \"{chat}\"\n"
    )
}

fn chat_name(n: u32) -> String {
    format!("C0HOOK{:04}", n + 1)
}

/// The deliveries, and which are sent again and when (drawn from the seed).
pub(super) fn plan(options: &WebhookOptions) -> Vec<Delivery> {
    let mut rng = Rng::new(options.seed);
    let count = options.deliveries * options.redeliver_percent.min(100) as usize / 100;
    // A partial Fisher-Yates shuffle: the first `count` indices are the redelivered ones.
    let mut order: Vec<usize> = (0..options.deliveries).collect();
    for i in 0..count {
        let j = rng.range(i as u64, options.deliveries as u64) as usize;
        order.swap(i, j);
    }
    let kinds = [Again::Racing, Again::Running, Again::Answered];
    let again: HashMap<usize, Again> = order[..count]
        .iter()
        .enumerate()
        .map(|(n, index)| (*index, kinds[n % kinds.len()]))
        .collect();
    (0..options.deliveries)
        .map(|index| {
            let marker = format!("q{index}x1");
            let chat = chat_name(index as u32 % options.chats.max(1));
            let body = json!({
                "alert": format!("DiskFull {marker}"),
                "host": format!("host-{index}"),
                "channel": chat,
                "severity": "warning",
            });
            Delivery {
                id: format!("dlv-{:x}-{index}", options.seed),
                marker,
                chat,
                body: body.to_string().into_bytes(),
                again: again.get(&index).copied(),
            }
        })
        .collect()
}

/// Starts `in_flight` workers sending every delivery once, the racing redeliveries with their
/// original and the running ones right after its 202.
fn send_all(
    sender: &Arc<Sender>,
    deliveries: &Arc<Vec<Delivery>>,
    log: &Arc<Mutex<Vec<Sent>>>,
    in_flight: usize,
    pace: Option<Duration>,
) -> JoinSet<()> {
    let next = Arc::new(Mutex::new(0usize));
    let start = tokio::time::Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..in_flight.max(1) {
        let (sender, deliveries, log) = (sender.clone(), deliveries.clone(), log.clone());
        let next = next.clone();
        workers.spawn(async move {
            loop {
                let index = {
                    let mut next = next.lock().unwrap_or_else(|p| p.into_inner());
                    *next += 1;
                    *next - 1
                };
                let Some(delivery) = deliveries.get(index) else {
                    break;
                };
                if let Some(pace) = pace {
                    tokio::time::sleep_until(start + pace * index as u32).await;
                }
                let sent = match delivery.again {
                    Some(Again::Racing) => {
                        let (a, b) = tokio::join!(
                            sender.post(index, delivery, false),
                            sender.post(index, delivery, true)
                        );
                        vec![a, b]
                    }
                    Some(Again::Running) => {
                        let first = sender.post(index, delivery, false).await;
                        vec![first, sender.post(index, delivery, true).await]
                    }
                    _ => vec![sender.post(index, delivery, false).await],
                };
                log.lock().unwrap_or_else(|p| p.into_inner()).extend(sent);
            }
        });
    }
    workers
}

/// When things happened, from the first send.
struct Timing {
    /// Until the workers had sent everything.
    send_phase: Option<Duration>,
    /// Until the last new answer.
    wall: Duration,
    /// When each delivery's answer was first seen in Slack (polled every 100 ms).
    first_seen: HashMap<String, Instant>,
}

/// What the watching side of a run holds.
#[derive(Clone, Copy)]
struct Run<'a> {
    sender: &'a Arc<Sender>,
    deliveries: &'a Arc<Vec<Delivery>>,
    slack: &'a FakeSlack,
    log: &'a Arc<Mutex<Vec<Sent>>>,
    options: &'a WebhookOptions,
}

impl Run<'_> {
    /// Watches Slack while the workers send, until every delivery has an answer there (or none
    /// came for `stall_limit`), sending each `Answered` redelivery once its original's answer is
    /// there.
    async fn await_answers(
        &self,
        mut workers: JoinSet<()>,
        killer: &mut Killer<'_>,
    ) -> Result<Timing, BenchError> {
        let Run {
            sender,
            deliveries,
            slack,
            log,
            options,
        } = *self;
        let started = Instant::now();
        let mut timing = Timing {
            send_phase: None,
            wall: Duration::ZERO,
            first_seen: HashMap::new(),
        };
        let mut pending: Vec<usize> = (0..deliveries.len())
            .filter(|i| deliveries[*i].again == Some(Again::Answered))
            .collect();
        let mut redeliveries = JoinSet::new();
        let mut last_new = Instant::now();
        loop {
            while workers.try_join_next().is_some() {}
            if workers.is_empty() && timing.send_phase.is_none() {
                timing.send_phase = Some(started.elapsed());
            }
            let now = Instant::now();
            for marker in answered_markers(&bot_texts(slack)) {
                timing.first_seen.entry(marker).or_insert_with(|| {
                    last_new = now;
                    now
                });
            }
            if last_new == now {
                timing.wall = started.elapsed();
            }
            let refused: HashSet<usize> = match timing.send_phase {
                Some(_) => (0..deliveries.len())
                    .collect::<HashSet<_>>()
                    .difference(&accepted(log))
                    .copied()
                    .collect(),
                None => HashSet::new(),
            };
            let accepted_now = accepted(log);
            killer
                .at_progress(accepted_now.len() + timing.first_seen.len())
                .await?;
            pending.retain(|index| {
                // Sent once the answer is there; or at once when the original was refused (a sender
                // retries those too).
                let seen = timing.first_seen.contains_key(&deliveries[*index].marker);
                if !seen && !refused.contains(index) {
                    return true;
                }
                let (sender, deliveries, log, index) =
                    (sender.clone(), deliveries.clone(), log.clone(), *index);
                redeliveries.spawn(async move {
                    let sent = sender.post(index, &deliveries[index], true).await;
                    log.lock().unwrap_or_else(|p| p.into_inner()).push(sent);
                });
                false
            });
            // Only an accepted delivery owes an answer; the others are in the report as refused.
            let done = timing.send_phase.is_some()
                && pending.is_empty()
                && accepted_now
                    .iter()
                    .all(|index| timing.first_seen.contains_key(&deliveries[*index].marker));
            // The workers' own requests time out after 30 s, so waiting on them always ends.
            if done || (timing.send_phase.is_some() && last_new.elapsed() > options.stall_limit) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        while redeliveries.join_next().await.is_some() {}
        Ok(timing)
    }
}

/// The deliveries answered 202 so far, by any of their sends.
fn accepted(log: &Mutex<Vec<Sent>>) -> HashSet<usize> {
    log.lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|sent| sent.result.is_ok())
        .map(|sent| sent.index)
        .collect()
}

/// Waits until the fake Slack has had no call for `quiet` (a late duplicate would come within
/// the bot's rate budget), at most `limit`.
async fn quiet(slack: &FakeSlack, quiet: Duration, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let last = slack.calls().last().map(|call| call.at);
        if last.is_none_or(|at| at.elapsed() >= quiet) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The current texts of the bot's messages everywhere, with their channel.
fn bot_texts(slack: &FakeSlack) -> Vec<(String, String)> {
    slack
        .messages()
        .into_iter()
        .filter(|m| m.ephemeral_to.is_none())
        .map(|m| (m.channel, m.text))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_redelivers_the_share_asked_for_in_three_kinds() {
        let options = WebhookOptions {
            deliveries: 60,
            chats: 6,
            seed: 7,
            ..WebhookOptions::default()
        };
        let plan = plan(&options);
        assert_eq!(plan.len(), 60);
        let again: Vec<Again> = plan.iter().filter_map(|d| d.again).collect();
        assert_eq!(again.len(), 6);
        for kind in [Again::Racing, Again::Running, Again::Answered] {
            assert_eq!(again.iter().filter(|k| **k == kind).count(), 2, "{kind:?}");
        }
        let ids: HashSet<&str> = plan.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids.len(), 60, "one delivery id each");
        assert_eq!(plan[7].chat, "C0HOOK0002");
        let body: serde_json::Value = serde_json::from_slice(&plan[7].body).unwrap();
        assert_eq!(body["alert"], "DiskFull q7x1");
        assert_eq!(body["channel"], "C0HOOK0002");
    }

    #[test]
    fn the_endpoint_renders_its_chat_from_the_payload_unless_there_is_one() {
        let many = endpoint_yaml(4);
        assert!(many.contains("chat: \"{{body.channel}}\""), "{many}");
        assert!(many.contains("prompt: \"Alert {{body.alert}} fired on {{body.host}}."));
        assert!(endpoint_yaml(1).contains("chat: \"C0HOOK0001\""));
    }
}
