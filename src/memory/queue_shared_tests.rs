//! Two queues on one shared store, as two daemons: each update runs once across them, and a
//! stopped instance's updates are taken over.

use std::collections::HashSet;
use std::sync::Mutex;

use super::*;
use crate::memory::queue::shared::QueueOwner;

const ADOPT_EVERY: Duration = Duration::from_secs(15);

type Live = Arc<Mutex<HashSet<String>>>;

fn live(ids: &[&str]) -> Live {
    Arc::new(Mutex::new(ids.iter().map(|id| id.to_string()).collect()))
}

/// Instance `id`'s queue on the shared `store`, reading the shared `threads`.
fn start_as(
    store: &StoreRef,
    id: &str,
    live: &Live,
    threads: &Threads,
) -> (MemoryQueue, Arc<ScriptedModel>) {
    let model = model();
    let updater = MemoryUpdater::new(MemoryRepo::new(store.clone()), MemoryConfig::default());
    let answering = model.clone();
    let resolver: ModelResolver = Arc::new(move |_| Some(answering.clone() as Arc<dyn ChatModel>));
    let members = live.clone();
    let owner = QueueOwner {
        instance_id: id.into(),
        live: Arc::new(move || Ok(members.lock().unwrap().clone())),
        adopt_every: ADOPT_EVERY,
    };
    let queue = MemoryQueue::start_shared(
        store.clone(),
        updater,
        resolver,
        loader(threads),
        Some(owner),
    )
    .unwrap();
    (queue, model)
}

#[tokio::test(start_paused = true)]
async fn the_last_instance_to_see_a_turn_runs_the_update_once() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let members = live(&["a", "b"]);
    let threads = Threads::default();
    let (a, a_model) = start_as(&store, "a", &members, &threads);
    let (b, b_model) = start_as(&store, "b", &members, &threads);
    a.enqueue(turn(&threads, "first")).unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    b.enqueue(turn(&threads, "second")).unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    // a had the conversation pending already; b's record replaced it, so a writes it again.
    a.enqueue(turn(&threads, "third")).unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(b_model.requests().len(), 0, "b's copy was taken over");
    assert_eq!(a_model.requests().len(), 1);
    let prompt = last_prompt(&a_model);
    for text in ["first", "second", "third"] {
        assert_eq!(
            prompt.matches(&format!("user: {text}")).count(),
            1,
            "{prompt}"
        );
    }
    assert_eq!((a.pending(), b.pending()), (0, 0));
    assert!(store.scan_prefix(QUEUE_TREE, b"").unwrap().is_empty());
    a.shutdown(Duration::from_secs(5)).await;
    b.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn a_live_instances_updates_stay_with_it_and_a_stopped_ones_are_taken_over() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let members = live(&["a", "b"]);
    let threads = Threads::default();
    let (a, a_model) = start_as(&store, "a", &members, &threads);
    a.enqueue(turn(&threads, "remember tea")).unwrap();
    let (b, b_model) = start_as(&store, "b", &members, &threads);
    assert_eq!(b.pending(), 0, "a is alive: its update is its own");

    // a dies before its update runs: its worker stops, its instance lease lapses.
    a.inner.cancel.cancel();
    drop(a);
    members.lock().unwrap().remove("a");
    tokio::time::sleep(ADOPT_EVERY + Duration::from_secs(1)).await;
    assert_eq!(b.pending(), 1, "adopted");
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(a_model.requests().len(), 0);
    assert_eq!(b_model.requests().len(), 1);
    assert!(last_prompt(&b_model).contains("user: remember tea"));
    assert!(store.scan_prefix(QUEUE_TREE, b"").unwrap().is_empty());
    b.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn without_an_owner_records_are_written_as_before() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let (queue, _, threads) = start(store.clone(), model());
    queue.enqueue(turn(&threads, "hi")).unwrap();
    let (_, record) = store.scan_prefix(QUEUE_TREE, b"").unwrap().remove(0);
    let text = String::from_utf8(record).unwrap();
    assert!(!text.contains("owner"), "{text}");
    queue.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn without_membership_records_stay_with_their_owner() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let nobody = live(&[]);
    let threads = Threads::default();
    let (a, a_model) = start_as(&store, "a", &nobody, &threads);
    let (b, b_model) = start_as(&store, "b", &nobody, &threads);
    a.enqueue(turn(&threads, "remember tea")).unwrap();
    tokio::time::sleep(ADOPT_EVERY * 3).await;
    assert_eq!(
        (a.pending(), b.pending()),
        (0, 0),
        "a ran it, b never took it"
    );
    assert_eq!((a_model.requests().len(), b_model.requests().len()), (1, 0));
    a.shutdown(Duration::from_secs(5)).await;
    b.shutdown(Duration::from_secs(5)).await;
}
