//! SIGKILLs during a webhooks run: the daemon is killed at moments drawn from the run's
//! progress and restarted at once on the same data dir and port, while the senders retry
//! whatever got no answer (as Alertmanager or GitHub would).

use std::path::Path;
use std::time::Duration;

use crate::bench::process::{DaemonProcess, Workdir};
use crate::bench::{BenchError, Rng};

pub(super) struct Killer<'a> {
    binary: &'a Path,
    dir: &'a Workdir,
    port: u16,
    daemon: Option<DaemonProcess>,
    /// Progress (deliveries accepted plus answers seen) at which to kill, the next last.
    at: Vec<usize>,
    /// From each restart to ready.
    pub(super) restarts: Vec<Duration>,
}

impl<'a> Killer<'a> {
    pub(super) fn new(
        binary: &'a Path,
        dir: &'a Workdir,
        port: u16,
        daemon: DaemonProcess,
        kills: u32,
        deliveries: usize,
        seed: u64,
    ) -> Self {
        Self {
            binary,
            dir,
            port,
            daemon: Some(daemon),
            at: moments(kills, deliveries, seed),
            restarts: Vec::new(),
        }
    }

    /// Kills and restarts the daemon for every moment `progress` has reached.
    pub(super) async fn at_progress(&mut self, progress: usize) -> Result<(), BenchError> {
        while self.at.last().is_some_and(|at| progress >= *at) {
            self.at.pop();
            if let Some(daemon) = self.daemon.take() {
                daemon.kill().await;
            }
            let daemon = DaemonProcess::start(self.binary, self.dir, self.port, &["slack"]).await?;
            self.restarts.push(daemon.ready_after);
            self.daemon = Some(daemon);
        }
        Ok(())
    }

    pub(super) fn daemon(&self) -> Option<&DaemonProcess> {
        self.daemon.as_ref()
    }

    pub(super) async fn stop(mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.kill().await;
        }
    }
}

/// `kills` moments drawn between 10 % and 90 % of the run's progress (`2 × deliveries`: each
/// delivery is accepted, then answered), so they land among sends and runs alike; the next
/// last.
fn moments(kills: u32, deliveries: usize, seed: u64) -> Vec<usize> {
    let mut rng = Rng::new(seed.rotate_left(17) ^ 0x9e37_79b9);
    let total = 2 * deliveries as u64;
    let mut at: Vec<usize> = (0..kills)
        .map(|_| rng.range(total / 10, total * 9 / 10 + 1) as usize)
        .collect();
    at.sort_unstable_by(|a, b| b.cmp(a));
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_moments_fall_in_the_middle_of_the_run_next_last() {
        let at = moments(5, 100, 42);
        assert_eq!(at.len(), 5);
        assert!(at.iter().all(|m| (20..=180).contains(m)), "{at:?}");
        assert!(at.windows(2).all(|w| w[0] >= w[1]), "{at:?}");
        assert_eq!(at, moments(5, 100, 42), "replayed by its seed");
        assert!(moments(0, 100, 42).is_empty());
    }
}
