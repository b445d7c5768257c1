//! The store's cost for a user with 100 facts on sled: building the injection (read + format)
//! and applying an update (one compare-and-set write). Printed with `--nocapture`; the bounds
//! are generous (debug build, shared CI cores) and catch only a pathological regression.

use std::sync::Arc;
use std::time::{Duration, Instant};

use antler::config::MemoryConfig;
use antler::memory::inject::format_for_injection;
use antler::memory::updater::{MemoryUpdate, NewFact, apply_update};
use antler::memory::{Fact, FactCategory, MemoryRepo, MemoryScope};
use antler_store::SledStore;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[test]
fn injection_and_update_with_100_facts_stay_fast() {
    let dir = tempfile::tempdir().unwrap();
    let repo = MemoryRepo::new(Arc::new(SledStore::open(dir.path().join("store")).unwrap()));
    let scope = MemoryScope::new("alice", None);
    repo.update(&scope, &antler::memory::WriteSource::Import, |doc, _| {
        doc.user.work_context.summary = "Builds a Rust agent daemon. ".repeat(10);
        for i in 0..100 {
            doc.facts.push(Fact::new(
                &format!("fact number {i}: the user prefers option {i} for their setup"),
                if i % 10 == 0 {
                    FactCategory::Correction
                } else {
                    FactCategory::Preference
                },
                0.7 + (i % 30) as f64 / 100.0,
                "t",
            ));
        }
        Ok(())
    })
    .unwrap();
    let config = MemoryConfig::default();
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    for round in 0..50 {
        let start = Instant::now();
        let doc = repo.load(&scope).unwrap();
        let text = format_for_injection(&doc, config.max_injection_tokens).unwrap();
        reads.push(start.elapsed());
        assert!(text.contains("Facts:"));

        let update = MemoryUpdate {
            new_facts: vec![NewFact {
                content: format!("new fact {round}"),
                category: FactCategory::Knowledge,
                confidence: 0.9,
            }],
            ..MemoryUpdate::default()
        };
        let start = Instant::now();
        repo.update(
            &scope,
            &antler::memory::WriteSource::Import,
            |doc, forgotten| Ok(apply_update(doc, forgotten, &update, ("t", &[]), &config)),
        )
        .unwrap();
        writes.push(start.elapsed());
    }
    assert_eq!(repo.load(&scope).unwrap().facts.len(), config.max_facts);
    let (read, write) = (median(reads), median(writes));
    println!(
        "memory with 100 facts: injection build {read:?}, update apply {write:?} (median of 50)"
    );
    assert!(
        read < Duration::from_millis(50),
        "injection build took {read:?}"
    );
    assert!(
        write < Duration::from_millis(50),
        "update apply took {write:?}"
    );
}
