//! The group-commit flusher: a background thread that makes checkpoints durable a few
//! milliseconds after they are written, one flush covering every checkpoint of that window.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::StoreRef;

/// How long the flusher waits for more checkpoints before one flush covers them all.
const GROUP_COMMIT_WINDOW: Duration = Duration::from_millis(5);

/// Flushes the store on a background thread whenever a checkpoint was written, coalescing
/// requests that arrive while a flush is running.
pub(crate) struct Flusher {
    wake: Option<SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
    progress: Arc<(Mutex<FlushProgress>, Condvar)>,
}

#[derive(Default)]
struct FlushProgress {
    requested: u64,
    durable: u64,
}

impl Flusher {
    pub(crate) fn start(store: StoreRef) -> Self {
        let (wake, wakeups) = sync_channel(1);
        let progress: Arc<(Mutex<FlushProgress>, Condvar)> = Arc::default();
        let shared = progress.clone();
        let thread = std::thread::Builder::new()
            .name("antler-store-flush".into())
            .spawn(move || flush_loop(&store, &wakeups, &shared))
            .ok();
        Self {
            wake: thread.as_ref().map(|_| wake),
            thread,
            progress,
        }
    }

    pub(crate) fn request(&self) {
        if let Ok(mut progress) = self.progress.0.lock() {
            progress.requested += 1;
        }
        if let Some(wake) = &self.wake {
            // A full channel means a wake-up is already pending, which covers this request.
            if let Err(TrySendError::Disconnected(())) = wake.try_send(()) {
                tracing::warn!("store flusher stopped; checkpoints rely on the periodic flush");
            }
        }
    }

    pub(crate) fn wait_durable(&self, timeout: Duration) -> bool {
        let (lock, changed) = &*self.progress;
        let deadline = Instant::now() + timeout;
        let Ok(mut progress) = lock.lock() else {
            return false;
        };
        let target = progress.requested;
        while progress.durable < target {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            progress = match changed.wait_timeout(progress, left) {
                Ok((guard, _)) => guard,
                Err(_) => return false,
            };
        }
        true
    }
}

fn flush_loop(
    store: &StoreRef,
    wakeups: &Receiver<()>,
    progress: &(Mutex<FlushProgress>, Condvar),
) {
    while wakeups.recv().is_ok() {
        // Group commit: checkpoints written within the window share one flush (an fsync per
        // checkpoint would cost more CPU than the whole turn); a crash loses at most this window.
        std::thread::sleep(GROUP_COMMIT_WINDOW);
        let target = progress.0.lock().map(|p| p.requested).unwrap_or(0);
        if let Err(error) = store.flush() {
            tracing::warn!(%error, "Background checkpoint flush failed");
            continue;
        }
        if let Ok(mut p) = progress.0.lock() {
            p.durable = p.durable.max(target);
        }
        progress.1.notify_all();
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        // Closing the channel ends the loop; joining releases its store handle before a reopen.
        self.wake.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
