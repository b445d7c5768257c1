//! How the synchronous [`Store`](antler_store::Store) trait waits for an async query: the store
//! owns a small runtime (two named worker threads) that owns the pool and its connections;
//! each call hands its query to that runtime and waits for the answer.
//!
//! Waiting never stalls the caller's runtime: on a worker of a multi-thread runtime (the
//! daemon) the wait runs inside `block_in_place`, so that worker hands its other tasks to
//! another thread first. On a current-thread runtime or a plain thread (tests, the command
//! line, the thread store's flusher) the thread simply blocks: there is no other task it could
//! be running. An async `Store` trait would remove the hand-off; see docs/storage.md.

use std::future::Future;

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use crate::PgError;

/// Worker threads of the store's runtime: queries spend their time waiting on the network,
/// two threads keep one busy decoding while the other waits.
const WORKER_THREADS: usize = 2;

pub(crate) struct Bridge {
    /// Always `Some` until dropped: taken in `drop` to shut it down without blocking.
    runtime: Option<Runtime>,
}

impl Bridge {
    pub(crate) fn new() -> Result<Self, PgError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .thread_name("antler-postgres")
            .enable_all()
            .build()
            .map_err(|e| PgError::Runtime(e.to_string()))?;
        Ok(Self {
            runtime: Some(runtime),
        })
    }

    fn handle(&self) -> Result<&Handle, PgError> {
        self.runtime
            .as_ref()
            .map(Runtime::handle)
            .ok_or_else(|| PgError::Runtime("the store is closing".into()))
    }

    /// Runs `work` on the store's runtime and waits for its result (see the module doc).
    pub(crate) fn run<F, T>(&self, work: F) -> Result<T, PgError>
    where
        F: Future<Output = Result<T, PgError>> + Send + 'static,
        T: Send + 'static,
    {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        // The task is owned by this call, which waits for its answer below; the runtime ends
        // it if the store is dropped first (the receiver then reports the loss).
        let _task = self.handle()?.spawn(async move {
            let _ = sender.send(work.await);
        });
        let wait = move || {
            receiver.recv().unwrap_or_else(|_| {
                Err(PgError::Runtime(
                    "the store's runtime ended before the query finished".into(),
                ))
            })
        };
        match Handle::try_current() {
            Ok(current) if current.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which panics inside another runtime (the daemon drops
        // the store from async code): let its threads finish on their own.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_from_a_plain_thread() {
        let bridge = Bridge::new().unwrap();
        assert_eq!(bridge.run(async { Ok(7) }).unwrap(), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn answers_on_a_current_thread_runtime() {
        let bridge = Bridge::new().unwrap();
        assert_eq!(bridge.run(async { Ok(7) }).unwrap(), 7);
        drop(bridge);
    }

    /// On a multi-thread runtime another task keeps running while a query waits: the waiting
    /// worker handed its queue over (`block_in_place`). With one worker and no hand-off, the
    /// task the query waits for would never run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_waiting_query_does_not_stall_other_tasks() {
        let bridge = std::sync::Arc::new(Bridge::new().unwrap());
        let on_worker = bridge.clone();
        let answer = tokio::spawn(async move {
            let (ran_tx, ran_rx) = tokio::sync::oneshot::channel::<()>();
            // Queued on this worker, behind the blocking call below.
            let other = tokio::spawn(async move {
                let _ = ran_tx.send(());
            });
            let answer = on_worker.run(async move {
                ran_rx.await.map_err(|e| PgError::Runtime(e.to_string()))?;
                Ok("the other task ran")
            });
            other.await.unwrap();
            answer
        })
        .await
        .unwrap();
        assert_eq!(answer.unwrap(), "the other task ran");
    }

    #[test]
    fn a_failed_query_is_its_error() {
        let bridge = Bridge::new().unwrap();
        let err = bridge
            .run(async { Err::<(), _>(PgError::Runtime("boom".into())) })
            .unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
    }
}
