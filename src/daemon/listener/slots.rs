//! Who may hold the listener's connection slots: a cap on all connections, a cap per client,
//! a few slots only loopback clients may take (so health checks on the host answer), and which
//! idle connection is closed when a cap is reached.
//!
//! Idle connections (no request in flight: before the first request, between requests) are
//! cheap to close, so a cap is first met by closing the one idle longest; only when every
//! connection is busy does a new one wait (over the cap on all connections) or get refused
//! (over its client's cap: waiting would let one client queue up everyone's slots).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::http::peer::ClientKey;

/// Slots at most kept for loopback clients (an eighth of a smaller cap).
const LOOPBACK_RESERVE: usize = 8;

/// Wakes connections waiting for a slot: when a slot is given back, or when a connection goes
/// idle (it may then be closed for them).
#[derive(Debug, Default)]
struct Wakeup {
    waiting: AtomicUsize,
    notify: Notify,
}

/// Whether a connection has requests in flight, and since when it has had none.
#[derive(Debug)]
pub(crate) struct Activity {
    in_flight: AtomicUsize,
    /// Milliseconds after `epoch` when the last request ended (or the connection opened).
    idle_since: AtomicU64,
    epoch: Instant,
    wakeup: Arc<Wakeup>,
}

impl Activity {
    fn new(epoch: Instant, wakeup: Arc<Wakeup>) -> Self {
        let activity = Self {
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            epoch,
            wakeup,
        };
        activity.stamp();
        activity
    }

    fn stamp(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.idle_since.store(now, Ordering::Relaxed);
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// When it became idle, or `None` while a request is in flight.
    fn idle_since(&self) -> Option<u64> {
        (self.in_flight.load(Ordering::Acquire) == 0)
            .then(|| self.idle_since.load(Ordering::Relaxed))
    }
}

/// A request in flight on a connection (see [`Activity::busy`]).
pub(crate) struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        // Stamped before the count drops, so an idle connection never shows an old stamp.
        self.0.stamp();
        let idle = self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1;
        let wakeup = &self.0.wakeup;
        if idle && wakeup.waiting.load(Ordering::Acquire) > 0 {
            wakeup.notify.notify_waiters();
        }
    }
}

/// Why a connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Its client holds `max_connections_per_ip` busy connections.
    ClientFull,
    /// Every slot is busy and as many connections as allowed already wait for one.
    QueueFull,
    /// Every slot stayed busy for as long as a connection may wait.
    TimedOut,
}

/// The listener's slots.
pub(crate) struct Slots {
    max_connections: usize,
    per_client: usize,
    reserve: usize,
    max_waiting: usize,
    table: Mutex<Table>,
    wakeup: Arc<Wakeup>,
    epoch: Instant,
}

#[derive(Default)]
struct Table {
    total: usize,
    per_client: HashMap<ClientKey, usize>,
    open: HashMap<u64, Open>,
    next_id: u64,
}

struct Open {
    client: ClientKey,
    activity: Arc<Activity>,
    close: CancellationToken,
}

/// A connection's slot: given back when dropped.
pub(crate) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    pub(crate) activity: Arc<Activity>,
    /// Cancelled when the connection is closed to make room for another.
    pub(crate) close: CancellationToken,
    /// Whether an idle connection was closed to make room for this one.
    pub(crate) made_room: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut table = self.slots.lock();
        // A connection closed to make room already gave its slot to the one that took it.
        if let Some(open) = table.open.remove(&self.id) {
            table.release(open.client);
            drop(table);
            self.slots.wakeup.notify.notify_waiters();
        }
    }
}

/// What one admission attempt decided.
enum Attempt {
    Admitted(Slot),
    Wait,
    Refused(Refusal),
}

impl Slots {
    /// `max_waiting` bounds the connections accepted but waiting for a slot.
    pub(crate) fn new(max_connections: usize, per_client: usize, max_waiting: usize) -> Self {
        let max_connections = max_connections.max(1);
        Self {
            max_connections,
            per_client: per_client.max(1),
            reserve: LOOPBACK_RESERVE.min(max_connections / 8),
            max_waiting,
            table: Mutex::new(Table::default()),
            wakeup: Arc::default(),
            epoch: Instant::now(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // The table is consistent after every statement; a panic elsewhere leaves it usable.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a new connection from `client`, waiting up to `patience` while every slot
    /// is busy.
    pub(crate) async fn admit(
        self: &Arc<Self>,
        client: ClientKey,
        patience: Duration,
    ) -> Result<Slot, Refusal> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut waiting = None;
        loop {
            // Registered before the attempt, so a slot freed in between is not missed.
            let released = self.wakeup.notify.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            match self.attempt(client, waiting.is_some()) {
                Attempt::Admitted(slot) => return Ok(slot),
                Attempt::Refused(refusal) => return Err(refusal),
                Attempt::Wait => {
                    waiting.get_or_insert_with(|| WaitingGuard(self.clone()));
                }
            }
            if tokio::time::timeout_at(deadline, released).await.is_err() {
                return Err(Refusal::TimedOut);
            }
        }
    }

    /// One try: admitted (closing an idle connection if a cap is reached), refused, or to
    /// wait. `waiting` says the caller is already counted among the waiting.
    fn attempt(self: &Arc<Self>, client: ClientKey, waiting: bool) -> Attempt {
        let mut table = self.lock();
        let mut made_room = false;
        if table.per_client.get(&client).copied().unwrap_or(0) >= self.per_client {
            if !self.close_idlest(&mut table, |open| open.client == client) {
                return Attempt::Refused(Refusal::ClientFull);
            }
            made_room = true;
        }
        let cap = if client.is_loopback() {
            self.max_connections
        } else {
            self.max_connections - self.reserve
        };
        // Only non-loopback connections are closed for a non-loopback one: it may not use the
        // reserve, and closing a loopback connection would not free a slot it may take.
        if table.total >= cap {
            if !self.close_idlest(&mut table, |open| {
                client.is_loopback() || !open.client.is_loopback()
            }) {
                // Counted under the table's lock, so the bound holds.
                if !waiting {
                    if self.wakeup.waiting.load(Ordering::Acquire) >= self.max_waiting {
                        return Attempt::Refused(Refusal::QueueFull);
                    }
                    self.wakeup.waiting.fetch_add(1, Ordering::AcqRel);
                }
                return Attempt::Wait;
            }
            made_room = true;
        }
        let id = table.next_id;
        table.next_id += 1;
        table.total += 1;
        *table.per_client.entry(client).or_insert(0) += 1;
        let activity = Arc::new(Activity::new(self.epoch, self.wakeup.clone()));
        let close = CancellationToken::new();
        table.open.insert(
            id,
            Open {
                client,
                activity: activity.clone(),
                close: close.clone(),
            },
        );
        Attempt::Admitted(Slot {
            slots: self.clone(),
            id,
            activity,
            close,
            made_room,
        })
    }

    /// Closes the connection idle longest among those `eligible` picks, and frees its slot
    /// at once; false when none is idle.
    fn close_idlest(&self, table: &mut Table, eligible: impl Fn(&Open) -> bool) -> bool {
        let idlest = table
            .open
            .iter()
            .filter(|(_, open)| eligible(open))
            .filter_map(|(id, open)| open.activity.idle_since().map(|since| (since, *id)))
            .min();
        let Some((_, id)) = idlest else {
            return false;
        };
        if let Some(open) = table.open.remove(&id) {
            open.close.cancel();
            table.release(open.client);
        }
        true
    }

    /// Connections holding a slot: all, and those of `client`.
    #[cfg(test)]
    fn held(&self, client: ClientKey) -> (usize, usize) {
        let table = self.lock();
        let of_client = table.per_client.get(&client).copied().unwrap_or(0);
        (table.total, of_client)
    }
}

impl Table {
    fn release(&mut self, client: ClientKey) {
        self.total -= 1;
        if let Some(count) = self.per_client.get_mut(&client) {
            *count -= 1;
            if *count == 0 {
                self.per_client.remove(&client);
            }
        }
    }
}

/// Counts a connection among the waiting until it gets a slot or gives up.
struct WaitingGuard(Arc<Slots>);

impl Drop for WaitingGuard {
    fn drop(&mut self) {
        let _table = self.0.lock();
        self.0.wakeup.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ip: &str) -> ClientKey {
        ClientKey::of(ip.parse().unwrap())
    }

    /// Admits without waiting; `None` when the attempt would wait.
    fn try_admit(slots: &Arc<Slots>, client: ClientKey) -> Option<Result<Slot, Refusal>> {
        match slots.attempt(client, false) {
            Attempt::Admitted(slot) => Some(Ok(slot)),
            Attempt::Refused(refusal) => Some(Err(refusal)),
            Attempt::Wait => None,
        }
    }

    #[test]
    fn clients_are_addresses_and_ipv6_64s() {
        assert_eq!(key("10.0.0.1"), key("::ffff:10.0.0.1"));
        assert_ne!(key("10.0.0.1"), key("10.0.0.2"));
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert!(key("127.0.0.1").is_loopback() && key("::1").is_loopback());
        assert_eq!(key("2001:db8:1:2::1").to_string(), "2001:db8:1:2::/64");
        assert_eq!(key("::1").to_string(), "::1");
    }

    #[test]
    fn a_client_at_its_cap_loses_its_idlest_connection_or_is_refused_when_all_are_busy() {
        let slots = Arc::new(Slots::new(64, 3, 16));
        let client = key("10.0.0.1");
        let held: Vec<Slot> = (0..3)
            .map(|_| try_admit(&slots, client).unwrap().unwrap())
            .collect();
        let _busy = [held[0].activity.busy(), held[2].activity.busy()];
        // The fourth closes the one idle connection, not a busy one.
        let fourth = try_admit(&slots, client).unwrap().unwrap();
        assert!(held[1].close.is_cancelled());
        assert!(!held[0].close.is_cancelled() && !held[2].close.is_cancelled());
        assert_eq!(slots.held(client), (3, 3));
        let _also_busy = fourth.activity.busy();
        assert_eq!(
            try_admit(&slots, client).unwrap().err(),
            Some(Refusal::ClientFull)
        );
        // Another client is not affected.
        assert!(try_admit(&slots, key("10.0.0.2")).unwrap().is_ok());
        // The closed connection's slot is not given back twice.
        drop(held);
        assert_eq!(slots.held(client), (1, 1));
    }

    #[test]
    fn the_idlest_connection_goes_first() {
        let slots = Arc::new(Slots::new(64, 2, 16));
        let client = key("10.0.0.1");
        let older = try_admit(&slots, client).unwrap().unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let newer = try_admit(&slots, client).unwrap().unwrap();
        // A request on the older one makes it the more recently active.
        std::thread::sleep(Duration::from_millis(5));
        drop(older.activity.busy());
        let _third = try_admit(&slots, client).unwrap().unwrap();
        assert!(newer.close.is_cancelled());
        assert!(!older.close.is_cancelled());
    }

    #[test]
    fn at_the_cap_an_idle_connection_is_closed_and_loopback_keeps_its_reserve() {
        // 16 slots, 2 of them for loopback only.
        let slots = Arc::new(Slots::new(16, 16, 4));
        let mut remote: Vec<Slot> = (0..14)
            .map(|i| {
                try_admit(&slots, key(&format!("10.0.0.{i}")))
                    .unwrap()
                    .unwrap()
            })
            .collect();
        let _busy: Vec<Busy> = remote.iter().map(|s| s.activity.busy()).collect();
        // Every remote slot is busy: another remote client waits, a loopback one gets in.
        assert!(try_admit(&slots, key("10.0.1.1")).is_none());
        let health = try_admit(&slots, key("127.0.0.1")).unwrap().unwrap();
        let _health_busy = health.activity.busy();
        let second = try_admit(&slots, key("::1")).unwrap().unwrap();
        // All 16 taken; the idle loopback one is closed for a third loopback client.
        let _third = try_admit(&slots, key("127.0.0.1")).unwrap().unwrap();
        assert!(second.close.is_cancelled());
        // An idle remote connection is closed for a remote newcomer.
        drop(_busy);
        let _newcomer = try_admit(&slots, key("10.0.2.1")).unwrap().unwrap();
        assert_eq!(remote.iter().filter(|s| s.close.is_cancelled()).count(), 1);
        remote.clear();
    }

    #[tokio::test]
    async fn a_waiting_connection_gets_the_next_freed_slot_and_the_queue_is_bounded() {
        let slots = Arc::new(Slots::new(1, 8, 1));
        let first = slots
            .admit(key("10.0.0.1"), Duration::from_secs(5))
            .await
            .unwrap();
        let busy = first.activity.busy();
        let waiter = tokio::spawn({
            let slots = slots.clone();
            async move { slots.admit(key("10.0.0.2"), Duration::from_secs(30)).await }
        });
        // The one waiting place is taken once the waiter is parked.
        let deadline = Instant::now() + Duration::from_secs(10);
        while slots.wakeup.waiting.load(Ordering::Acquire) == 0 {
            assert!(Instant::now() < deadline, "the waiter never waited");
            tokio::task::yield_now().await;
        }
        assert_eq!(
            slots
                .admit(key("10.0.0.3"), Duration::from_secs(5))
                .await
                .err(),
            Some(Refusal::QueueFull)
        );
        // Once the busy connection goes idle, the waiter closes it and takes its slot.
        drop(busy);
        let second = waiter.await.unwrap().unwrap();
        assert!(first.close.is_cancelled());
        assert_eq!(slots.wakeup.waiting.load(Ordering::Acquire), 0);
        let _busy = second.activity.busy();
        assert_eq!(
            slots
                .admit(key("10.0.0.4"), Duration::from_millis(50))
                .await
                .err(),
            Some(Refusal::TimedOut)
        );
    }
}
