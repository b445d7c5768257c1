//! Lease stories: one holder at a time, takeover after expiry, fencing of a stale holder, and
//! exactly one winner among holders racing for a lease nobody holds (the compare-and-set on an
//! absent key, which a SQL backend must lock although no row exists yet).

use std::sync::{Arc, Barrier};

use crate::lease::{Acquired, Leases};
use crate::{BatchOp, StoreRef};

use super::Fresh;

const TTL: u64 = 15_000;

fn held(acquired: Acquired) -> (crate::lease::Lease, bool) {
    match acquired {
        Acquired::Held { lease, took_over } => (lease, took_over),
        Acquired::Busy(other) => panic!("expected to hold the lease, {} holds it", other.holder),
    }
}

fn work(key: &str) -> Vec<BatchOp> {
    vec![BatchOp::Put {
        tree: "work",
        key: key.as_bytes().to_vec(),
        value: b"done".to_vec(),
    }]
}

pub fn a_lease_has_one_holder_until_it_expires(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let name = fresh.name;
    let a = Leases::new(fresh.store.clone(), "a");
    let b = Leases::new(fresh.store.clone(), "b");
    let (first, took_over) = held(a.try_acquire("poll:bot", TTL, 1_000).unwrap());
    assert_eq!((first.epoch, took_over), (1, false), "{name}");
    assert!(
        matches!(b.try_acquire("poll:bot", TTL, 2_000).unwrap(), Acquired::Busy(l) if l.holder == "a"),
        "{name}: a live lease is busy for others"
    );
    // Renewal keeps the epoch, and work fenced by the first acquire still writes.
    let renewed = a.renew(&first, TTL, 10_000).unwrap().expect("renewed");
    assert_eq!(renewed.epoch, 1, "{name}");
    assert!(a.write_fenced(&renewed, work("a1")).unwrap(), "{name}");
    // a stalls past its expiry: b takes over with the next epoch.
    let (second, took_over) = held(b.try_acquire("poll:bot", TTL, 30_000).unwrap());
    assert_eq!((second.epoch, took_over), (2, true), "{name}");
    // The stale holder can neither renew nor write under its epoch.
    assert_eq!(a.renew(&renewed, TTL, 24_000).unwrap(), None, "{name}");
    assert!(
        !a.write_fenced(&renewed, work("a2")).unwrap(),
        "{name}: fenced"
    );
    assert_eq!(fresh.store.get("work", b"a2").unwrap(), None, "{name}");
    assert!(b.write_fenced(&second, work("b1")).unwrap(), "{name}");
    assert!(
        !a.release(&renewed).unwrap(),
        "{name}: a lost lease is not released"
    );
    assert!(b.release(&second).unwrap(), "{name}");
    // Released: taken at once, with the next epoch, and not counted as a takeover.
    let (third, took_over) = held(a.try_acquire("poll:bot", TTL, 31_000).unwrap());
    assert_eq!((third.epoch, took_over), (3, false), "{name}");
    let listed = a.list("poll:").unwrap();
    assert_eq!(listed, vec![third], "{name}");
}

pub fn racing_holders_elect_exactly_one(make: &dyn Fn() -> Fresh) {
    let fresh = make();
    let name = fresh.name;
    const RACERS: usize = 8;
    for round in 0..5 {
        let lease = format!("chat:{round}");
        let start = Arc::new(Barrier::new(RACERS));
        let winners: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..RACERS)
                .map(|i| {
                    let store: StoreRef = fresh.store.clone();
                    let start = start.clone();
                    let lease = lease.clone();
                    scope.spawn(move || {
                        let leases = Leases::new(store, format!("racer-{i}"));
                        start.wait();
                        match leases.try_acquire(&lease, TTL, 1_000) {
                            Ok(Acquired::Held { .. }) => 1,
                            Ok(Acquired::Busy(_)) | Err(_) => 0,
                        }
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(
            winners, 1,
            "{name}: round {round} elected {winners} holders"
        );
    }
}
