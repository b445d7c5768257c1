//! The id walk that decides what a checkpoint writes, and a randomised check that folding the
//! log always gives back exactly the state the reducers produced.

use crate::ThreadStore;
use crate::checkpoints::{message_ids, walk};
use crate::log::SlotInfo;
use crate::messages::Message;
use crate::state::{StateChanges, StateUpdate};
use crate::test_fixtures::{Driver, backends};
use crate::threads::{DEFAULT_CACHE_FROM_MESSAGES, ThreadStoreOptions};

fn slots(list: &[u64]) -> Vec<SlotInfo> {
    list.iter()
        .map(|&slot| SlotInfo { slot, bytes: 1 })
        .collect()
}

fn ids(list: &[&str]) -> Vec<Message> {
    list.iter()
        .map(|id| {
            let mut message = Message::human("x");
            message.set_id((*id).to_string());
            message
        })
        .collect()
}

fn touched(list: &[&str]) -> StateChanges {
    let mut changes = StateChanges::new();
    changes.record(&StateUpdate {
        messages: ids(list),
        ..Default::default()
    });
    changes
}

fn written_slots(
    old: &[&str],
    new: &[&str],
    changed: &[&str],
) -> (Vec<u64>, Vec<usize>, Vec<u64>, bool) {
    let old_slots = slots(&(1..=old.len() as u64).collect::<Vec<_>>());
    let w = walk(
        &message_ids(&ids(old)),
        &old_slots,
        &ids(new),
        &touched(changed),
        old.len() as u64 + 1,
    );
    (
        w.slots.iter().map(|s| s.slot).collect(),
        w.writes,
        w.removed,
        w.in_place,
    )
}

#[test]
fn appends_and_replacements_keep_slots_in_place() {
    assert_eq!(
        written_slots(&["a", "b"], &["a", "b", "c"], &["c"]),
        (vec![1, 2, 3], vec![2], vec![], true)
    );
    assert_eq!(
        written_slots(&["a", "b"], &["a", "b"], &["b"]),
        (vec![1, 2], vec![1], vec![], true)
    );
    assert_eq!(
        written_slots(&["a", "b"], &["a", "b"], &[]),
        (vec![1, 2], vec![], vec![], true)
    );
}

#[test]
fn removals_and_moves_are_found_by_the_walk() {
    // b removed, d appended.
    assert_eq!(
        written_slots(&["a", "b", "c"], &["a", "c", "d"], &["d"]),
        (vec![1, 3, 4], vec![2], vec![2], false)
    );
    // The dynamic-context move: h is replaced by a reminder with its id, h moves behind.
    assert_eq!(
        written_slots(
            &["a", "h"],
            &["a", "h", "m", "h__user"],
            &["h", "m", "h__user"]
        ),
        (vec![1, 2, 3, 4], vec![1, 2, 3], vec![], true)
    );
    // A message that would have to move forward gets a fresh slot.
    assert_eq!(
        written_slots(&["a", "b"], &["a", "x", "b"], &["x"]),
        (vec![1, 3, 4], vec![1, 2], vec![2], false)
    );
    // Everything removed.
    assert_eq!(
        written_slots(&["a", "b"], &["z"], &["z"]),
        (vec![3], vec![0], vec![1, 2], false)
    );
}

#[test]
fn random_updates_always_fold_back_to_the_reducers_state() {
    let mut rng = fastrand::Rng::with_seed(7);
    for (name, store, _dir) in backends() {
        let threads = ThreadStore::new(store.clone()).unwrap();
        let mut driver = Driver::new(threads.clone(), "random");
        for step in 0..300 {
            let mut update = StateUpdate::default();
            let len = driver.state.messages.len();
            match rng.u8(..10) {
                0..=4 => update.messages.push(Message::human(format!("m{step}"))),
                5 | 6 if len > 0 => {
                    let mut message = driver.state.messages[rng.usize(..len)].clone();
                    message.set_id(message.id().to_string());
                    if let Message::Human(h) = &mut message {
                        h.content = format!("edited {step}").into();
                    }
                    update.messages.push(message);
                }
                7 if len > 0 => {
                    let id = driver.state.messages[rng.usize(..len)].id().to_string();
                    update.remove_messages.push(id.clone());
                    if rng.bool() {
                        // Removed and re-added: it goes to the end.
                        update
                            .messages
                            .push(Message::Human(crate::messages::HumanMessage {
                                id: id.into(),
                                content: format!("readded {step}").into(),
                                ..Default::default()
                            }));
                    }
                }
                8 => update.title = Some(format!("title {step}")),
                9 if rng.u8(..10) == 0 => update.remove_all_messages = true,
                _ => {
                    update.extra.insert("k".into(), serde_json::json!(step));
                }
            }
            driver.apply(update);
            if rng.u8(..3) > 0 {
                driver.save().unwrap();
            }
            if step % 50 == 49 {
                driver.save().unwrap();
                driver.assert_reads_back(&store, &format!("{name} at step {step}"));
            }
        }
    }
}

#[test]
fn idle_threads_leave_the_cache_and_fold_back_identical() {
    for (name, store, _dir) in backends() {
        let threads = ThreadStore::new(store.clone()).unwrap();
        let mut driver = Driver::new(threads.clone(), "idle");
        for step in 0..5 {
            driver.apply(StateUpdate {
                messages: vec![Message::human(format!("m{step}"))],
                ..Default::default()
            });
            driver.save().unwrap();
        }
        assert_eq!(threads.cache_usage().0, 1, "{name}");
        assert_eq!(threads.evict_idle(std::time::Duration::from_secs(3600)), 0);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(threads.evict_idle(std::time::Duration::ZERO), 1, "{name}");
        assert_eq!(threads.cache_usage(), (0, 0, threads.cache_usage().2));
        driver.assert_reads_back(&store, &format!("{name} after idle eviction"));
        let (_, state) = threads.state("idle").unwrap().unwrap();
        assert_eq!(*state, driver.state, "{name}");
    }
}

/// Checks the thread out as a run does: the run alone holds the list, so its first append
/// takes it (see `History`'s tests). A reader meanwhile shares the run's unchanged list.
fn check_out(driver: &mut Driver, name: &str, read_meanwhile: bool) {
    let threads = &driver.threads;
    driver.state = threads.checkout("lent").unwrap().unwrap();
    if read_meanwhile {
        let (_, read) = threads.state("lent").unwrap().unwrap();
        assert!(
            read.messages.shares_list_with(&driver.state.messages),
            "{name}"
        );
    }
    assert_eq!(
        driver.state.messages.holders(),
        1,
        "{name}: lent, not shared"
    );
}

#[test]
fn a_checked_out_list_is_appended_in_place_and_readers_see_the_last_save() {
    for (name, store, _dir) in backends() {
        // Every thread kept, however short: lending is what this checks.
        let options = ThreadStoreOptions {
            cache_from_messages: 0,
            ..ThreadStoreOptions::default()
        };
        let threads = ThreadStore::with_options(store.clone(), options).unwrap();
        let mut driver = Driver::new(threads.clone(), "lent");
        let human = |text: &str| StateUpdate {
            messages: vec![Message::human(text)],
            ..Default::default()
        };
        for step in 0..3 {
            driver.apply(human(&format!("m{step}")));
            driver.save().unwrap();
        }
        check_out(&mut driver, name, true);
        let saved = serde_json::to_value(&driver.state).unwrap();
        driver.apply(human("unsaved"));
        let (_, read) = threads.state("lent").unwrap().unwrap();
        assert_eq!(
            serde_json::to_value(&*read).unwrap(),
            saved,
            "{name}: the last save"
        );
        drop(read);

        driver.save().unwrap();
        let (_, read) = threads.state("lent").unwrap().unwrap();
        // (The read above folded the log into the entry again, so this one is the entry's.)
        assert_eq!(*read, driver.state, "{name}: the new save");
        drop(read);
        threads.checkin("lent");
        assert_eq!(threads.cache_usage().0, 1, "{name}: taken back");
        driver.assert_reads_back(&store, &format!("{name} after checkin"));

        // Saved with nobody reading meanwhile: the entry points at the run's list.
        check_out(&mut driver, name, false);
        driver.apply(human("m4"));
        driver.save().unwrap();
        let (_, read) = threads.state("lent").unwrap().unwrap();
        assert!(
            read.messages.shares_list_with(&driver.state.messages),
            "{name}"
        );
        assert_eq!(*read, driver.state, "{name}");
        drop(read);
        threads.checkin("lent");
        driver.assert_reads_back(&store, &format!("{name} after a lent save"));

        // A run that ends with a change it did not save leaves no list to take back: the
        // entry goes and the thread folds back to its last save.
        let saved = serde_json::to_value(&driver.state).unwrap();
        check_out(&mut driver, name, true);
        driver.apply(human("never saved"));
        threads.checkin("lent");
        assert_eq!(threads.cache_usage().0, 0, "{name}: dropped");
        let (_, read) = threads.state("lent").unwrap().unwrap();
        assert_eq!(
            serde_json::to_value(&*read).unwrap(),
            saved,
            "{name}: folded back"
        );
        assert_eq!(read.messages.len(), 5, "{name}");
    }
}

#[test]
fn a_short_thread_leaves_the_cache_after_its_run_and_a_long_one_stays() {
    for (name, store, _dir) in backends() {
        let threads = ThreadStore::new(store.clone()).unwrap();
        let mut driver = Driver::new(threads.clone(), "lent");
        let run = |driver: &mut Driver, turn: usize| {
            if let Some(state) = driver.threads.checkout("lent").unwrap() {
                driver.state = state;
            }
            driver.apply(StateUpdate {
                messages: vec![
                    Message::human(format!("q{turn}")),
                    Message::ai(format!("a{turn}")),
                ],
                ..Default::default()
            });
            driver.save().unwrap();
            assert_eq!(
                driver.threads.cache_usage().0,
                1,
                "{name}: held while it runs"
            );
            driver.threads.checkin("lent");
        };
        let turns_to_keep = DEFAULT_CACHE_FROM_MESSAGES.div_ceil(2);
        for turn in 0..turns_to_keep - 1 {
            run(&mut driver, turn);
            assert_eq!(
                threads.cache_usage().0,
                0,
                "{name}: short, not kept after turn {turn}"
            );
            let (_, read) = threads.state("lent").unwrap().unwrap();
            assert_eq!(*read, driver.state, "{name}: folded back identical");
            assert_eq!(threads.cache_usage().0, 0, "{name}: a read does not add it");
        }
        run(&mut driver, turns_to_keep - 1);
        assert_eq!(threads.cache_usage().0, 1, "{name}: long enough, kept");
        let (_, read) = threads.state("lent").unwrap().unwrap();
        assert_eq!(*read, driver.state, "{name}");
        driver.assert_reads_back(&store, name);
    }
}
