//! What a webhooks run shows: the 202s against the deliveries, the model's calls and the
//! answers in Slack, checked and printed as a table.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use crate::bench::model::answer_for;
use crate::bench::webhooks::{Again, Delivery, ENDPOINT, Sent, WebhookOptions};
use crate::bench::{Tally, mib, percentile};

#[derive(Clone, Debug, Default)]
pub struct WebhookReport {
    pub options: Option<WebhookOptions>,
    /// First sends, one per delivery id.
    pub sent: usize,
    pub redelivered: HashMap<Again, usize>,
    /// `Running` redeliveries whose original had not been answered yet when they went out.
    pub redelivered_mid_run: usize,
    /// Requests answered 202, of all sent.
    pub accepted: usize,
    /// Requests not answered 202: `marker: what came back`. Must be empty.
    pub refused: Vec<String>,
    /// Distinct `run_id`s in every 202 body: must be `sent`.
    pub distinct_runs: usize,
    pub distinct_threads: usize,
    /// Redeliveries answered with other ids than their original's. Must be empty.
    pub mismatched: Vec<String>,
    /// Deliveries the model was asked about other than once (`marker: n`). Must be empty.
    pub model_miscounts: Vec<String>,
    pub model_calls: usize,
    /// Deliveries whose run was asked again after a kill cut it short.
    pub runs_repeated: usize,
    /// Complete answers in Slack against the deliveries' markers.
    pub tally: Tally,
    /// Answers posted in a channel their delivery did not name.
    pub misplaced: Vec<String>,
    /// 202 times of the first sends, sorted.
    pub accept: Vec<Duration>,
    /// 202 times of the redeliveries, sorted.
    pub accept_again: Vec<Duration>,
    /// From the first send to the last first 202.
    pub send_phase: Duration,
    /// From the first send to the last answer in Slack.
    pub wall: Duration,
    pub kills: u32,
    pub restart_median: Duration,
    /// Requests sent again because the daemon gave no answer (it was down).
    pub retried: u32,
    pub rss_end_kib: u64,
    pub rss_peak_kib: u64,
    pub workdir: Option<String>,
}

impl WebhookReport {
    pub fn ok(&self) -> bool {
        self.refused.is_empty()
            && self.distinct_runs == self.sent
            && self.mismatched.is_empty()
            && self.model_miscounts.is_empty()
            && self.misplaced.is_empty()
            && self.tally.lost.is_empty()
            && self.tally.duplicated.is_empty()
            && self.tally.answered == self.sent
    }

    pub fn redeliveries(&self) -> usize {
        self.redelivered.values().sum()
    }

    fn again(&self, kind: Again) -> usize {
        self.redelivered.get(&kind).copied().unwrap_or(0)
    }
}

impl fmt::Display for WebhookReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(o) = &self.options {
            writeln!(
                f,
                "webhooks: {} signed deliveries to POST /hooks/{ENDPOINT}, {} in flight, {} % sent again with the same X-Antler-Delivery, answers to {} fake Slack channels, model streaming {} ms (seed {})",
                o.deliveries,
                o.in_flight,
                o.redeliver_percent,
                o.chats,
                o.stream_over.as_millis(),
                o.seed
            )?;
        }
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1000.0);
        let per_minute = if self.wall.is_zero() {
            0.0
        } else {
            self.tally.answered as f64 * 60.0 / self.wall.as_secs_f64()
        };
        let rows: Vec<(&str, String)> = vec![
            ("deliveries sent", self.sent.to_string()),
            ("redeliveries", self.redeliveries().to_string()),
            (
                "  racing the original",
                self.again(Again::Racing).to_string(),
            ),
            ("  after its 202", self.again(Again::Running).to_string()),
            ("    of them mid-run", self.redelivered_mid_run.to_string()),
            (
                "  after its answer",
                self.again(Again::Answered).to_string(),
            ),
            ("SIGKILLs", self.kills.to_string()),
            ("requests retried (no answer)", self.retried.to_string()),
            (
                "restart to ready p50 (ms)",
                format!("{:.0}", self.restart_median.as_secs_f64() * 1000.0),
            ),
            ("202 answers", self.accepted.to_string()),
            ("refused (not 202)", self.refused.len().to_string()),
            ("distinct run ids", self.distinct_runs.to_string()),
            ("distinct thread ids", self.distinct_threads.to_string()),
            ("redelivery ids differ", self.mismatched.len().to_string()),
            ("model calls", self.model_calls.to_string()),
            (
                "deliveries not called once",
                self.model_miscounts.len().to_string(),
            ),
            ("runs asked again (kills)", self.runs_repeated.to_string()),
            ("answered exactly once", self.tally.answered.to_string()),
            ("lost", self.tally.lost.len().to_string()),
            ("duplicated", self.tally.duplicated.len().to_string()),
            ("in the wrong channel", self.misplaced.len().to_string()),
            ("accept p50 (ms)", ms(percentile(&self.accept, 50.0))),
            ("accept p95 (ms)", ms(percentile(&self.accept, 95.0))),
            (
                "redelivery accept p50 (ms)",
                ms(percentile(&self.accept_again, 50.0)),
            ),
            (
                "redelivery accept p95 (ms)",
                ms(percentile(&self.accept_again, 95.0)),
            ),
            (
                "send phase (s)",
                format!("{:.1}", self.send_phase.as_secs_f64()),
            ),
            ("total time (s)", format!("{:.1}", self.wall.as_secs_f64())),
            ("answers per minute", format!("{per_minute:.0}")),
            (
                "RSS at the end (MiB)",
                format!("{:.1}", mib(self.rss_end_kib)),
            ),
            ("RSS peak (MiB)", format!("{:.1}", mib(self.rss_peak_kib))),
        ];
        writeln!(f, "{:<30} {:>10}", "metric", "value")?;
        for (name, value) in rows {
            writeln!(f, "{name:<30} {value:>10}")?;
        }
        for (what, list) in [
            ("refused", &self.refused),
            ("ids differ", &self.mismatched),
            ("model calls", &self.model_miscounts),
            ("wrong channel", &self.misplaced),
        ] {
            if !list.is_empty() {
                let shown: Vec<&str> = list.iter().take(5).map(String::as_str).collect();
                writeln!(f, "{what}, e.g.: {}", shown.join("; "))?;
            }
        }
        if !self.tally.lost.is_empty() || !self.tally.duplicated.is_empty() {
            writeln!(f, "{}", self.tally.examples())?;
        }
        if let Some(dir) = &self.workdir {
            writeln!(f, "work dir kept: {dir}")?;
        }
        Ok(())
    }
}

/// The marker of a text that ends with a complete answer (under whatever header the daemon
/// puts above it).
pub(super) fn complete_answer(text: &str) -> Option<String> {
    let text = text.trim_end();
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.starts_with('q') && w.contains('x'))
        .find(|marker| text.ends_with(&answer_for(marker)))
        .map(str::to_string)
}

pub(super) fn answered_markers(texts: &[(String, String)]) -> HashSet<String> {
    texts
        .iter()
        .filter_map(|(_, text)| complete_answer(text))
        .collect()
}

/// Compares what was sent, what came back and what Slack holds.
/// With `strict`, a delivery must reach the model exactly once; without (kills), at least once.
pub(super) fn check(
    deliveries: &[Delivery],
    sent: &[Sent],
    texts: &[(String, String)],
    strict: bool,
    calls_for: impl Fn(&str) -> usize,
) -> WebhookReport {
    let mut report = WebhookReport {
        sent: deliveries.len(),
        retried: sent.iter().map(|s| s.attempts.saturating_sub(1)).sum(),
        ..WebhookReport::default()
    };
    let mut first: HashMap<usize, (String, String)> = HashMap::new();
    for record in sent.iter().filter(|s| !s.again) {
        match &record.result {
            Ok(ids) => {
                first.insert(record.index, ids.clone());
                report.accept.push(record.after);
            }
            Err(error) => report
                .refused
                .push(format!("{}: {error}", deliveries[record.index].marker)),
        }
    }
    for record in sent.iter().filter(|s| s.again) {
        let delivery = &deliveries[record.index];
        if let Some(kind) = delivery.again {
            *report.redelivered.entry(kind).or_default() += 1;
        }
        match (&record.result, first.get(&record.index)) {
            (Err(error), _) => report
                .refused
                .push(format!("{} (again): {error}", delivery.marker)),
            (Ok(ids), Some(original)) if ids == original => report.accept_again.push(record.after),
            (Ok((run, thread)), original) => {
                let (was_run, was_thread) = original.cloned().unwrap_or_default();
                report.mismatched.push(format!(
                    "{}: run {run}, thread {thread}; first run {was_run}, thread {was_thread}",
                    delivery.marker
                ))
            }
        }
    }
    report.accepted = report.accept.len() + report.accept_again.len() + report.mismatched.len();
    report.accept.sort();
    report.accept_again.sort();
    // Over every 202 body: a redelivery given a run of its own shows here as one more.
    let ids: Vec<&(String, String)> = sent.iter().filter_map(|s| s.result.as_ref().ok()).collect();
    report.distinct_runs = ids.iter().map(|(run, _)| run).collect::<HashSet<_>>().len();
    report.distinct_threads = ids
        .iter()
        .map(|(_, thread)| thread)
        .collect::<HashSet<_>>()
        .len();
    let by_marker: HashMap<&str, &Delivery> =
        deliveries.iter().map(|d| (d.marker.as_str(), d)).collect();
    for delivery in deliveries {
        let calls = calls_for(&delivery.marker);
        if calls > 1 {
            report.runs_repeated += 1;
        }
        if calls == 0 || (strict && calls > 1) {
            report
                .model_miscounts
                .push(format!("{}: {calls} calls", delivery.marker));
        }
    }
    // Complete answers (whatever their header) as the tally knows them; partial texts as they are.
    let mut normalized = Vec::with_capacity(texts.len());
    for (channel, text) in texts {
        match complete_answer(text) {
            Some(marker) => {
                if let Some(delivery) = by_marker.get(marker.as_str())
                    && delivery.chat != *channel
                {
                    report
                        .misplaced
                        .push(format!("{marker} in {channel}, not {}", delivery.chat));
                }
                normalized.push(answer_for(&marker));
            }
            None => normalized.push(text.clone()),
        }
    }
    let markers: Vec<String> = deliveries.iter().map(|d| d.marker.clone()).collect();
    report.tally = Tally::count(&markers, normalized);
    report
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::bench::webhooks::{WebhookOptions, plan};

    #[test]
    fn an_answer_counts_under_any_header_and_a_preview_does_not() {
        assert_eq!(
            complete_answer("🪝 alerts\n\nAnswer to q12x1 is here.\n").as_deref(),
            Some("q12x1")
        );
        assert_eq!(complete_answer("🪝 alerts\nAnswer to q12x1 is"), None);
        assert_eq!(complete_answer("🪝 alerts\nWorking on it…"), None);
    }

    #[test]
    fn a_second_run_a_second_answer_and_a_stray_answer_are_caught() {
        let options = WebhookOptions {
            deliveries: 4,
            chats: 2,
            redeliver_percent: 50,
            seed: 3,
            ..WebhookOptions::default()
        };
        let plan = plan(&options);
        let sent = |index: usize, again: bool, ids: Result<(&str, &str), &str>| Sent {
            index,
            again,
            result: ids
                .map(|(r, t)| (r.to_string(), t.to_string()))
                .map_err(str::to_string),
            at: Instant::now(),
            after: Duration::from_millis(5),
            attempts: 1,
        };
        let log = [
            sent(0, false, Ok(("r0", "t0"))),
            sent(1, false, Ok(("r1", "t1"))),
            // A redelivery that started a run of its own.
            sent(1, true, Ok(("r9", "t9"))),
            sent(2, false, Ok(("r2", "t2"))),
            sent(2, true, Ok(("r2", "t2"))),
            sent(3, false, Err("HTTP 401: stale")),
        ];
        let texts = [
            (
                plan[0].chat.clone(),
                format!("🪝 alerts\n\n{}", answer_for("q0x1")),
            ),
            (plan[1].chat.clone(), answer_for("q1x1")),
            (plan[1].chat.clone(), answer_for("q1x1")),
            // q2x1 belongs in C0HOOK0001.
            ("C0HOOK0002".to_string(), answer_for("q2x1")),
            (
                plan[0].chat.clone(),
                "🪝 alerts\nWorking on it…".to_string(),
            ),
        ];
        let report = check(&plan, &log, &texts, true, |m| {
            usize::from(m != "q3x1") + usize::from(m == "q1x1")
        });
        assert_eq!(report.refused.len(), 1, "{report}");
        assert!(report.refused[0].starts_with("q3x1: HTTP 401"), "{report}");
        assert_eq!(report.distinct_runs, 4, "r0, r1, r9 and r2");
        assert_eq!(report.mismatched.len(), 1, "{report}");
        assert_eq!(report.accept_again.len(), 1);
        assert_eq!(report.accepted, 5);
        assert_eq!(
            report.model_miscounts,
            ["q1x1: 2 calls".to_string(), "q3x1: 0 calls".to_string()]
        );
        assert_eq!(report.tally.answered, 2, "{report}");
        assert_eq!(report.tally.lost, ["q3x1".to_string()]);
        assert_eq!(report.tally.duplicated, [("q1x1".to_string(), 2)]);
        assert_eq!(report.misplaced.len(), 1, "{report}");
        assert!(!report.ok());
    }
}
