//! A data dir with group threads of the old kind (owned by whoever spoke first): the next
//! message of such a chat moves its thread (record, history, files) to the chat, keeping who
//! started it; a move a crash left half done is finished; direct chats stay their person's.

use std::path::Path;
use std::sync::Arc;

use antler::paths::ThreadPaths;
use antler_store::threads::ThreadStore;
use antler_store::{BatchOp, SledStore, Store};
use antler_test_support::{Reply, dm_channel};
use serde_json::Value;

use super::group_support::{SLACK_CHANNEL as CHANNEL, SlackGroup, memory_update, user_texts};

const ANN: &str = "U0ANN0001";
const BOB: &str = "U0BOB0001";
const ANN_ID: &str = "slack-U0ANN0001";

fn chats(store: &SledStore) -> Vec<(String, Value)> {
    store
        .scan_prefix("channel_chats", b"")
        .expect("scan")
        .into_iter()
        .map(|(key, value)| {
            let record = serde_json::from_slice(&value).expect("a record");
            (String::from_utf8_lossy(&key).into_owned(), record)
        })
        .collect()
}

fn thread_dir(data: &Path, user: &str, thread: &str) -> std::path::PathBuf {
    let paths = ThreadPaths::new(data, user, thread).expect("paths");
    paths
        .user_data()
        .parent()
        .expect("thread dir")
        .to_path_buf()
}

/// Turns the record of the conversation of `root` back into what the old code wrote: owned by
/// Ann, without the new fields. `half_done`: as a crash after moving the thread and its files
/// left it (only the record is old).
fn make_old(store: &Arc<SledStore>, data: &Path, root: &str, half_done: bool) -> String {
    let key = format!("slack:{CHANNEL}:{root}");
    let bytes = store
        .get("channel_chats", key.as_bytes())
        .expect("get")
        .expect("the conversation's record");
    let mut record: Value = serde_json::from_slice(&bytes).expect("record");
    let chat_owner = record["user_id"].as_str().unwrap_or_default().to_string();
    let thread = record["thread_id"].as_str().unwrap_or_default().to_string();
    let fields = record.as_object_mut().expect("an object");
    for new in ["shared", "started_by", "agent_set_by"] {
        fields.remove(new);
    }
    fields.insert("user_id".into(), ANN_ID.into());
    let old = serde_json::to_vec(&record).expect("json");
    store
        .put("channel_chats", key.as_bytes(), &old)
        .expect("put");
    let (dir_owner, owner) = if half_done {
        (chat_owner.as_str(), chat_owner.as_str())
    } else {
        (ANN_ID, ANN_ID)
    };
    set_thread_owner(store, &thread, owner);
    let (new_dir, old_dir) = (
        thread_dir(data, &chat_owner, &thread),
        thread_dir(data, ANN_ID, &thread),
    );
    if new_dir.exists() {
        std::fs::remove_dir_all(&new_dir).expect("clean");
    }
    let outputs = thread_dir(data, dir_owner, &thread).join("user-data/outputs");
    std::fs::create_dir_all(&outputs).expect("outputs");
    std::fs::write(outputs.join("plan.md"), "# offsite plan").expect("a file");
    if !half_done {
        assert!(old_dir.join("user-data/outputs/plan.md").exists());
    }
    thread
}

/// The thread's record and the per-user index, rewritten in place (what `ThreadStore` keeps).
fn set_thread_owner(store: &SledStore, thread: &str, owner: &str) {
    let bytes = store
        .get("threads", thread.as_bytes())
        .expect("get")
        .expect("the thread");
    let mut record: Value = serde_json::from_slice(&bytes).expect("thread record");
    let before = record["user_id"].as_str().unwrap_or_default().to_string();
    record["user_id"] = owner.into();
    let index = |user: &str| format!("{user}\0{thread}").into_bytes();
    store
        .apply_batch(vec![
            BatchOp::Put {
                tree: "threads",
                key: thread.as_bytes().to_vec(),
                value: serde_json::to_vec(&record).expect("json"),
            },
            BatchOp::Delete {
                tree: "user_threads",
                key: index(&before),
            },
            BatchOp::Put {
                tree: "user_threads",
                key: index(owner),
                value: Vec::new(),
            },
        ])
        .expect("batch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_threads_of_the_old_kind_move_to_their_chat_at_their_next_message() {
    let mut slack = SlackGroup::start("").await;
    for text in ["Sure, Ann.", "On it, Ann."] {
        slack.model.push(Reply::text(text));
        slack.model.push(memory_update(&[]));
    }
    let first = slack.mention(ANN, "let's plan the offsite", None).await;
    slack.answered(CHANNEL, 1, "Sure, Ann.").await;
    let second = slack.mention(ANN, "and book a room", None).await;
    slack.answered(CHANNEL, 2, "On it, Ann.").await;
    slack.model.push(Reply::text("Hello Ann!"));
    slack.model.push(memory_update(&[]));
    slack.dm(ANN, "hello").await;
    slack.answered(&dm_channel(ANN), 1, "Hello Ann!").await;
    slack.requests(6).await;
    slack.stop().await;

    // The data dir as the old code left it: one conversation fully old, one half moved.
    let data = slack.data_dir();
    let (old_thread, half_thread, dm_before) = {
        let store = Arc::new(SledStore::open(data.join("store")).expect("store"));
        let old = make_old(&store, &data, &first, false);
        let half = make_old(&store, &data, &second, true);
        let dm = chats(&store)
            .into_iter()
            .find(|(key, _)| key.contains(&dm_channel(ANN)))
            .expect("the DM's record");
        store.flush().expect("flush");
        (old, half, dm)
    };

    slack.start_bot().await;
    slack.model.push(Reply::text("Hi Bob."));
    slack.model.push(memory_update(&[]));
    slack.reply(BOB, "count me in", &first).await;
    slack.answered(CHANNEL, 3, "Hi Bob.").await;
    let requests = slack.requests(8).await;
    assert_eq!(
        user_texts(&requests[6]),
        ["[Ann] let's plan the offsite", "[Bob] count me in"],
        "the thread kept its history"
    );
    slack.model.push(Reply::text("Noted, Bob."));
    slack.model.push(memory_update(&[]));
    slack.reply(BOB, "I can help too", &second).await;
    slack.answered(CHANNEL, 4, "Noted, Bob.").await;
    // Ann started both conversations: Bob may not start one over, she may.
    slack.reply(BOB, "/new", &first).await;
    slack
        .answered(
            CHANNEL,
            5,
            "Only Ann, who started this conversation, or an admin can start a new one here.",
        )
        .await;
    slack.stop().await;

    let store = Arc::new(SledStore::open(data.join("store")).expect("store"));
    let threads = ThreadStore::new(store.clone()).expect("threads");
    for (root, thread) in [(&first, &old_thread), (&second, &half_thread)] {
        let key = format!("slack:{CHANNEL}:{root}");
        let (_, record) = chats(&store)
            .into_iter()
            .find(|(k, _)| *k == key)
            .expect("the record");
        let owner = record["user_id"].as_str().unwrap_or_default();
        assert!(owner.starts_with("chat-slack-"), "{record}");
        assert_eq!(record["shared"], true, "{record}");
        assert_eq!(record["started_by"], ANN_ID, "{record}");
        assert_eq!(record["thread_id"], thread.as_str(), "the same thread");
        assert_eq!(
            threads.get(thread).expect("get").expect("thread").user_id,
            owner
        );
        let moved = thread_dir(&data, owner, thread).join("user-data/outputs/plan.md");
        assert_eq!(
            std::fs::read_to_string(&moved).expect("the file moved"),
            "# offsite plan"
        );
        assert!(
            !thread_dir(&data, ANN_ID, thread).exists(),
            "nothing left behind"
        );
    }
    assert!(
        threads
            .list(ANN_ID)
            .expect("list")
            .iter()
            .all(|t| t.thread_id != old_thread && t.thread_id != half_thread)
    );
    let dm_after = chats(&store)
        .into_iter()
        .find(|(key, _)| *key == dm_before.0)
        .expect("the DM's record");
    assert_eq!(dm_after.1["user_id"], ANN_ID, "a direct chat stays Ann's");
    assert_eq!(dm_after.1["shared"], false);
}
