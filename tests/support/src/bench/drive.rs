//! Conversations that go on for many turns: each thread (a user's DM on one platform) asks its
//! next question only once the previous one was answered, like a person, until the run's total
//! number of turns has been asked. Every question carries a unique marker (`q<thread>x<turn>`).

use std::time::{Duration, Instant};

use crate::bench::fleet::{Fleet, Platform};
use crate::bench::model::answer_for;

struct Thread {
    platform: Platform,
    user: u32,
    turns: u32,
    /// The marker waiting for its answer, and when it was asked.
    waiting: Option<(String, Instant)>,
}

pub(crate) struct Conversations {
    threads: Vec<Thread>,
    total: usize,
    pub(crate) asked: Vec<String>,
    pub(crate) done: usize,
    /// Question to answer, for each answered turn.
    pub(crate) latencies: Vec<Duration>,
    last_progress: Instant,
}

impl Conversations {
    /// `threads` users, spread round-robin over `platforms`, asking `total` questions in all.
    pub(crate) fn new(platforms: &[Platform], threads: u32, total: usize) -> Self {
        let threads = (0..threads)
            .map(|n| Thread {
                platform: platforms[n as usize % platforms.len()],
                user: n,
                turns: 0,
                waiting: None,
            })
            .collect();
        Self {
            threads,
            total,
            asked: Vec::with_capacity(total),
            done: 0,
            latencies: Vec::with_capacity(total),
            last_progress: Instant::now(),
        }
    }

    /// Threads that are not waiting ask their next question, while the total allows.
    pub(crate) fn ask(&mut self, fleet: &Fleet) {
        self.ask_up_to(fleet, self.total);
    }

    /// [`Self::ask`], asking no more than `limit` questions in all so far.
    pub(crate) fn ask_up_to(&mut self, fleet: &Fleet, limit: usize) {
        let limit = limit.min(self.total);
        for thread in &mut self.threads {
            if self.asked.len() >= limit {
                return;
            }
            if thread.waiting.is_some() {
                continue;
            }
            thread.turns += 1;
            let marker = format!("q{}x{}", thread.user, thread.turns);
            fleet.say(
                thread.platform,
                thread.user,
                &format!("Please answer {marker}"),
            );
            self.asked.push(marker.clone());
            thread.waiting = Some((marker, Instant::now()));
        }
    }

    /// Marks the questions whose complete answer is on the platform now; returns how many.
    pub(crate) fn collect(&mut self, fleet: &Fleet) -> usize {
        let mut newly = 0;
        for thread in &mut self.threads {
            let Some((marker, asked_at)) = &thread.waiting else {
                continue;
            };
            let answer = answer_for(marker);
            if fleet
                .texts(thread.platform, thread.user)
                .iter()
                .any(|t| t.trim() == answer)
            {
                self.latencies.push(asked_at.elapsed());
                thread.waiting = None;
                newly += 1;
            }
        }
        if newly > 0 {
            self.done += newly;
            self.last_progress = Instant::now();
        }
        newly
    }

    /// Questions asked and not answered yet.
    pub(crate) fn waiting(&self) -> usize {
        self.threads.iter().filter(|t| t.waiting.is_some()).count()
    }

    pub(crate) fn finished(&self) -> bool {
        self.done >= self.total
    }

    /// How long no answer arrived.
    pub(crate) fn stalled_for(&self) -> Duration {
        self.last_progress.elapsed()
    }

    /// Answered turns per platform, in [`Platform::ALL`] order.
    pub(crate) fn turns_by_platform(&self) -> Vec<(Platform, u32)> {
        Platform::ALL
            .into_iter()
            .map(|p| {
                let turns = self
                    .threads
                    .iter()
                    .filter(|t| t.platform == p)
                    .map(|t| t.turns - u32::from(t.waiting.is_some()))
                    .sum();
                (p, turns)
            })
            .filter(|(_, turns)| *turns > 0)
            .collect()
    }

    /// The current text of every bot message in every thread's DM.
    pub(crate) fn all_texts(&self, fleet: &Fleet) -> Vec<String> {
        self.threads
            .iter()
            .flat_map(|t| fleet.texts(t.platform, t.user))
            .collect()
    }
}
