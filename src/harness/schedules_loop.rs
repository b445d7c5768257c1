//! The firing loop: sleeps until the soonest slot (or a wake, or the stop), claims each due
//! schedule's slots by its catch-up policy and hands the slot to run to the dispatcher. It
//! never polls: with nothing due it sleeps until the next slot (on a shared store at most a
//! lease length, so a schedule another instance created is seen).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::schedules::{Queued, lock, new_fire};
use super::{Harness, Inner};
use crate::config::scheduler::SchedulerConfig;
use crate::scheduler::timing::next_after;
use crate::scheduler::{
    CatchUp, Claim, Fire, FireKind, FireOutcome, FireStatus, Schedule, ScheduleStatus,
};

/// A slot this late is still due, not missed (the loop woke a little late, the store was slow).
pub(super) const SLOT_GRACE: chrono::TimeDelta = chrono::TimeDelta::seconds(30);
/// The longest sleep with nothing due on a store no other instance writes: a guard against
/// the wall clock jumping, not a poll (one wake an hour).
const IDLE_SLEEP: Duration = Duration::from_secs(60 * 60);
/// After a store error, the next look.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// Missed slots recorded by one claim at most; a longer outage is recorded in several.
const RECORD_CHUNK: usize = 1_000;
/// Claims of one schedule in one pass at most (`catch_up: all` claims one slot at a time).
const CLAIMS_PER_PASS: usize = 64;

impl Harness {
    /// Starts the firing loop and the dispatcher, once (the daemon calls it after the channel
    /// layer installed its hook, so a chat fire recovered at start reaches its chat). Stopped
    /// first by [`Harness::shutdown`].
    pub fn start_schedules(&self) {
        let runner = &self.inner.runner;
        if runner.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let max = self.inner.config.current().scheduler.max_concurrent.max(1);
        let weak = Arc::downgrade(&self.inner);
        runner
            .tracker
            .spawn(firing_loop(weak.clone(), runner.stop.clone()));
        runner.tracker.spawn(super::schedules_dispatch::dispatcher(
            weak,
            runner.stop.clone(),
            runner.queued.clone(),
            usize::try_from(max).unwrap_or(1),
        ));
    }

    /// Stops the loop, the dispatcher and the fires waiting for a permit (they stay claimed:
    /// the next start runs them); runs already started are the harness's to drain.
    pub(super) async fn stop_schedules(&self) {
        let runner = &self.inner.runner;
        runner.stop.cancel();
        runner.tracker.close();
        runner.tracker.wait().await;
    }

    /// Queues a claimed slot for the dispatcher, after the configured jitter for a timed one.
    /// Without a running loop it stays claimed, for the next start.
    pub(super) fn enqueue_fire(&self, schedule: Schedule, fire: Fire) {
        let runner = &self.inner.runner;
        if !runner.started.load(Ordering::SeqCst) || runner.stop.is_cancelled() {
            return;
        }
        let jitter = self.inner.config.current().scheduler.jitter_seconds;
        if jitter == 0 || fire.kind == FireKind::Manual {
            self.push_fire(schedule, fire);
            return;
        }
        let delay = Duration::from_millis(fastrand::u64(0..=jitter.saturating_mul(1000)));
        let weak = Arc::downgrade(&self.inner);
        let stop = runner.stop.clone();
        runner.tracker.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
            if let Some(inner) = weak.upgrade() {
                Harness { inner }.push_fire(schedule, fire);
            }
        });
    }

    fn push_fire(&self, schedule: Schedule, fire: Fire) {
        let runner = &self.inner.runner;
        lock(&runner.queue).insert((fire.slot, fire.key()), Queued { schedule, fire });
        runner.queued.notify_one();
    }

    /// One pass: claims every due slot; how long to sleep before the next one.
    pub(super) fn fire_due_slots(&self) -> Duration {
        let config = self.inner.config.current();
        let idle = if self.inner.shared {
            self.inner.cluster.lease_duration()
        } else {
            IDLE_SLEEP
        };
        if !config.scheduler.enabled {
            return idle;
        }
        let scheduler = &self.inner.scheduler;
        let now = scheduler.now();
        match scheduler.store().due(now) {
            Ok(due) => {
                for schedule in due {
                    self.claim_due(schedule, now, &config.scheduler);
                }
            }
            Err(error) => {
                tracing::warn!(%error, "Could not read the due schedules; trying again");
                return RETRY_AFTER;
            }
        }
        let now = scheduler.now();
        match scheduler.store().next_due() {
            Ok(Some(next)) if next <= now => Duration::from_millis(50),
            Ok(Some(next)) => (next - now).to_std().unwrap_or(RETRY_AFTER).min(idle),
            Ok(None) => idle,
            Err(error) => {
                tracing::warn!(%error, "Could not read the next scheduled slot; trying again");
                RETRY_AFTER
            }
        }
    }

    /// Claims `schedule`'s slots up to `now` (re-reading it when another writer won), queueing
    /// each slot to run.
    fn claim_due(&self, mut schedule: Schedule, now: DateTime<Utc>, config: &SchedulerConfig) {
        let store = self.inner.scheduler.store();
        let instance = self.inner.cluster.instance_id().to_string();
        for _ in 0..CLAIMS_PER_PASS {
            if schedule.status != ScheduleStatus::Active {
                return;
            }
            let Some(first) = schedule.next_fire.filter(|next| *next <= now) else {
                return;
            };
            let claim = plan(&schedule, first, now, config, &instance);
            match store.claim(&schedule, claim.clone()) {
                Ok(Some(written)) => {
                    for missed in &claim.skipped {
                        crate::metrics::schedule_fire("missed");
                        tracing::info!(fire = %missed.key(), "A scheduled slot passed while no daemon ran; recorded as missed (catch_up)");
                    }
                    if let Some(fire) = claim.fire {
                        tracing::info!(fire = %fire.key(), kind = ?fire.kind, "A scheduled slot is due");
                        self.enqueue_fire(written.clone(), fire);
                    }
                    schedule = written;
                }
                Ok(None) => match store.get(&schedule.id) {
                    Ok(Some(again)) => schedule = again,
                    Ok(None) => return,
                    Err(error) => {
                        tracing::warn!(%error, schedule = %schedule.id, "Could not read a schedule again");
                        return;
                    }
                },
                Err(error) => {
                    tracing::warn!(%error, schedule = %schedule.id, "Could not claim a scheduled slot; trying again");
                    return;
                }
            }
        }
    }

    /// At start: every fire left claimed by this instance's earlier life (or, on a shared
    /// store, by an instance that is gone) is finished, never claimed again as a new slot: a
    /// chat fire is handed to its chat again (its journal entry dedupes), a thread fire runs
    /// on from what its thread holds.
    pub(super) async fn recover_fires(&self) {
        let store = self.inner.scheduler.store();
        let claimed = match store.claimed() {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(%error, "Could not read the scheduled slots left claimed");
                return;
            }
        };
        let me = self.inner.cluster.instance_id().to_string();
        let live: HashSet<String> = if self.inner.shared {
            match self.inner.cluster.instances() {
                Ok(leases) => leases.into_iter().map(|lease| lease.holder).collect(),
                Err(error) => {
                    tracing::warn!(%error, "Could not list the instances; recovering only this one's slots");
                    return;
                }
            }
        } else {
            HashSet::new()
        };
        let now = self.inner.scheduler.now();
        let lease = chrono::TimeDelta::from_std(self.inner.cluster.lease_duration())
            .unwrap_or(chrono::TimeDelta::seconds(15));
        for fire in claimed {
            let theirs = fire.claimed_by != me
                && (live.contains(&fire.claimed_by) || now - fire.claimed_at < lease);
            if self.inner.shared && theirs {
                continue;
            }
            match store.get(&fire.schedule_id) {
                Ok(Some(schedule)) => {
                    tracing::info!(fire = %fire.key(), claimed_by = %fire.claimed_by, "A scheduled slot claimed before a restart is run on");
                    self.push_fire(schedule, fire);
                }
                Ok(None) => self.finish_fire(
                    &fire,
                    FireOutcome::Missed,
                    Some("the schedule was removed before this slot ran".into()),
                ),
                Err(error) => {
                    tracing::warn!(%error, fire = %fire.key(), "Could not read a claimed slot's schedule")
                }
            }
        }
    }
}

/// The loop's task: recovery once, then a pass per wake. Holds the harness only weakly, and
/// not while it sleeps.
async fn firing_loop(weak: Weak<Inner>, stop: CancellationToken) {
    let Some(wake) = weak.upgrade().map(|inner| inner.scheduler.woken()) else {
        return;
    };
    let mut recovered = false;
    loop {
        let wait = {
            let Some(inner) = weak.upgrade() else {
                return;
            };
            let harness = Harness { inner };
            if !recovered && harness.inner.config.current().scheduler.enabled {
                harness.recover_fires().await;
                recovered = true;
            }
            harness.fire_due_slots()
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = wake.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// What one claim of `schedule` (due since `first`) writes: the slots between `first` and
/// `now`, split by its catch-up policy into the one to run now and the ones recorded as
/// missed, and the next slot. A slot within [`SLOT_GRACE`] of now is due, not missed, whatever
/// the policy.
pub(super) fn plan(
    schedule: &Schedule,
    first: DateTime<Utc>,
    now: DateTime<Utc>,
    config: &SchedulerConfig,
    instance: &str,
) -> Claim {
    let max_catch_up = usize::try_from(config.max_catch_up).unwrap_or(usize::MAX);
    let window = match schedule.catch_up {
        CatchUp::Latest => 1,
        CatchUp::None => 1,
        CatchUp::All => max_catch_up.saturating_add(1),
    };
    let mut slots = vec![first];
    let mut after_now = None;
    let mut complete = false;
    while slots.len() < RECORD_CHUNK.saturating_add(window) {
        let last = slots[slots.len() - 1];
        match next_after(schedule, last) {
            Some(next) if next <= now => slots.push(next),
            other => {
                after_now = other;
                complete = true;
                break;
            }
        }
    }
    let missed = |slot: DateTime<Utc>, why: &str| Fire {
        status: FireStatus::Done,
        outcome: Some(FireOutcome::Missed),
        detail: Some(why.to_string()),
        finished_at: Some(now),
        ..new_fire(schedule, slot, FireKind::Due, now, instance)
    };
    let down = "its time passed while no daemon was running";
    if !complete {
        let next = slots[RECORD_CHUNK];
        let why = format!("{down} (catch_up: {})", catch_up_name(schedule.catch_up));
        return Claim {
            fire: None,
            skipped: slots[..RECORD_CHUNK]
                .iter()
                .map(|s| missed(*s, &why))
                .collect(),
            next_fire: Some(next),
        };
    }
    let last = slots[slots.len() - 1];
    let last_due = now - last <= SLOT_GRACE;
    let runnable = match schedule.catch_up {
        CatchUp::Latest => 1,
        CatchUp::None => usize::from(last_due),
        CatchUp::All => max_catch_up.saturating_add(usize::from(last_due)),
    }
    .min(slots.len());
    let split = slots.len() - runnable;
    let why = match schedule.catch_up {
        CatchUp::All => format!(
            "{down}, and more than scheduler.max_catch_up ({max_catch_up}) slots were missed"
        ),
        policy => format!("{down} (catch_up: {})", catch_up_name(policy)),
    };
    let skipped = slots[..split].iter().map(|s| missed(*s, &why)).collect();
    let fire = slots.get(split).map(|&slot| {
        let kind = if now - slot <= SLOT_GRACE {
            FireKind::Due
        } else {
            FireKind::CatchUp
        };
        new_fire(schedule, slot, kind, now, instance)
    });
    let next_fire = if runnable > 1 {
        slots.get(split + 1).copied()
    } else {
        after_now
    };
    Claim {
        fire,
        skipped,
        next_fire,
    }
}

fn catch_up_name(policy: CatchUp) -> &'static str {
    match policy {
        CatchUp::Latest => "latest",
        CatchUp::None => "none",
        CatchUp::All => "all",
    }
}
