//! A Slack thread with two people in it (events mode): each turn runs as its sender. Ann starts
//! the conversation, Bob joins it: the history is shared and names who said what, but each
//! one's memory is read and written for them alone, each pays for their own turns, and only Ann
//! (or an admin) may start the conversation over. Direct messages work as before.

use std::sync::Arc;

use antler_store::SledStore;
use antler_store::threads::ThreadStore;
use antler_test_support::{Reply, dm_channel};
use serde_json::Value;

use super::WAIT;
use super::group_support::{
    SLACK_CHANNEL, SlackGroup as Slack, memory_update, request_mentions, usage_by_user, user_texts,
};

const CHANNEL: &str = SLACK_CHANNEL;
const ANN: &str = "U0ANN0001";
const BOB: &str = "U0BOB0001";

/// Bob asks for `/status` in the thread; its answer, the bot's `n`th text in the channel.
async fn status(slack: &Slack, root: &str, n: usize) -> String {
    slack.mention(BOB, "/status", Some(root)).await;
    slack
        .fake
        .wait_for(WAIT, "the status", |f| f.channel_texts(CHANNEL).len() >= n)
        .await;
    slack.fake.channel_texts(CHANNEL)[n - 1].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_speaker_in_a_slack_thread_has_their_own_memory_usage_and_name() {
    let mut slack = Slack::start("").await;
    let (ann_dm, bob_dm) = (dm_channel(ANN), dm_channel(BOB));

    // Ann tells the bot about herself in private first.
    slack.model.push(Reply::text("Hello Ann!"));
    slack
        .model
        .push(memory_update(&[("Drinks green tea", "preference")]));
    slack.dm(ANN, "I'm Ann and I drink green tea").await;
    slack.answered(&ann_dm, 1, "Hello Ann!").await;
    let requests = slack.requests(2).await;
    assert_eq!(
        user_texts(&requests[0]).last().map(String::as_str),
        Some("I'm Ann and I drink green tea"),
        "a direct message has no name in front"
    );

    // Ann starts a conversation in the channel, Bob joins it in her thread.
    slack.model.push(Reply::text("Sure, Ann."));
    slack.model.push(memory_update(&[]));
    let root = slack.mention(ANN, "let's plan the offsite", None).await;
    slack.answered(CHANNEL, 1, "Sure, Ann.").await;
    let requests = slack.requests(4).await;
    assert_eq!(
        user_texts(&requests[2]).last().map(String::as_str),
        Some("[Ann] let's plan the offsite")
    );
    assert!(
        !request_mentions(&requests[2], "green tea"),
        "no personal memory in a shared conversation"
    );
    assert!(request_mentions(&requests[3], "let's plan the offsite"));

    slack.model.push(Reply::text("Hi Bob!"));
    slack
        .model
        .push(memory_update(&[("Has a dog named Rex", "context")]));
    slack
        .mention(BOB, "I am Bob and my dog is Rex", Some(&root))
        .await;
    slack.answered(CHANNEL, 2, "Hi Bob!").await;
    let requests = slack.requests(6).await;
    let texts = user_texts(&requests[4]);
    assert_eq!(
        texts[texts.len() - 2..],
        [
            "[Ann] let's plan the offsite".to_string(),
            "[Bob] I am Bob and my dog is Rex".to_string()
        ],
        "the model sees who speaks"
    );
    assert!(
        !request_mentions(&requests[4], "green tea"),
        "Ann's facts stay hers"
    );
    let bobs_update = &requests[5];
    assert!(request_mentions(bobs_update, "I am Bob and my dog is Rex"));
    assert!(
        !request_mentions(bobs_update, "offsite") && !request_mentions(bobs_update, "Sure, Ann."),
        "Bob's memory learns from Bob's messages only"
    );

    // Only the person who started the conversation (or an admin) may start it over.
    let before = status(&slack, &root, 3).await;
    assert!(before.starts_with("Active thread: "), "{before}");
    slack.mention(BOB, "/new", Some(&root)).await;
    slack
        .answered(
            CHANNEL,
            4,
            "Only Ann, who started this conversation, or an admin can start a new one here.",
        )
        .await;
    assert_eq!(
        status(&slack, &root, 5).await,
        before,
        "Bob's /new changed nothing"
    );
    slack.mention(ANN, "/new", Some(&root)).await;
    slack
        .answered(CHANNEL, 6, "New conversation started.")
        .await;
    let after = status(&slack, &root, 7).await;
    assert_ne!(after, before, "Ann's /new started a new one for everyone");

    // Direct messages: memory injected on a thread's first turn (in the system prompt), no
    // names. Ann's has her facts and not Bob's; Bob's has his.
    slack.dm(ANN, "/new").await;
    slack
        .answered(&ann_dm, 2, "New conversation started.")
        .await;
    slack.model.push(Reply::text("You like tea."));
    slack.model.push(memory_update(&[]));
    slack.dm(ANN, "what do you know about me?").await;
    slack.answered(&ann_dm, 3, "You like tea.").await;
    let requests = slack.requests(8).await;
    let ann_again = &requests[6];
    assert!(request_mentions(ann_again, "<memory>") && request_mentions(ann_again, "green tea"));
    assert!(
        !request_mentions(ann_again, "Rex"),
        "Bob's fact is not Ann's"
    );
    // In a direct message the memory block is the thread's, merged into the system prompt: the
    // person's message is theirs alone.
    let system = ann_again["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        ann_again["messages"][0]["role"] == "system"
            && system.contains("<memory>")
            && system.contains("green tea"),
        "{system}"
    );
    assert_eq!(
        user_texts(ann_again),
        ["what do you know about me?"],
        "a direct message: no memory in the person's words, no name"
    );
    slack.model.push(Reply::text("Hi."));
    slack.model.push(memory_update(&[]));
    slack.dm(BOB, "hello").await;
    slack.answered(&bob_dm, 1, "Hi.").await;
    let requests = slack.requests(10).await;
    assert!(request_mentions(&requests[8], "Has a dog named Rex"));
    assert!(!request_mentions(&requests[8], "green tea"));

    // Each paid for their own turns: Ann two DMs and one group turn, Bob one of each.
    let usage = usage_by_user(slack.addr()).await;
    assert_eq!(usage.get("slack-U0ANN0001"), Some(&3), "{usage:?}");
    assert_eq!(usage.get("slack-U0BOB0001"), Some(&2), "{usage:?}");
    let looked_up = slack.fake.calls_of("users.info").len();
    assert_eq!(looked_up, 2, "one users.info per person in the channel");
    slack.stop().await;
}

/// The story: Ann mentions the bot in the channel, Bob answers in her thread without
/// mentioning it. Bob's turn is his (usage, memory) on a thread the chat owns; the model sees
/// both names; Bob's question about himself gets nothing of Ann's memory, and what the memory
/// updater learns from his words lands in his memory, not hers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bob_answering_in_anns_thread_without_a_mention_is_his_turn_on_the_chats_thread() {
    let mut slack = Slack::start("  inject_in_groups: true\n").await;
    let (ann_dm, bob_dm) = (dm_channel(ANN), dm_channel(BOB));
    slack.model.push(Reply::text("Hello Ann!"));
    slack
        .model
        .push(memory_update(&[("Drinks green tea", "preference")]));
    slack.dm(ANN, "I drink green tea").await;
    slack.answered(&ann_dm, 1, "Hello Ann!").await;
    slack.requests(2).await;

    slack.model.push(Reply::text("Sure, Ann."));
    slack.model.push(memory_update(&[]));
    let root = slack.mention(ANN, "let's plan the offsite", None).await;
    slack.answered(CHANNEL, 1, "Sure, Ann.").await;
    let requests = slack.requests(4).await;
    assert!(
        request_mentions(&requests[2], "green tea"),
        "Ann's own memory in her turn"
    );

    slack.model.push(Reply::text("Nothing yet, Bob."));
    slack
        .model
        .push(memory_update(&[("Prefers the mountains", "preference")]));
    let question = "what do you remember about me? I prefer the mountains";
    slack.reply(BOB, question, &root).await;
    slack.answered(CHANNEL, 2, "Nothing yet, Bob.").await;
    let requests = slack.requests(6).await;
    let (bobs_turn, bobs_update) = (&requests[4], &requests[5]);
    let texts = user_texts(bobs_turn);
    assert_eq!(texts[0], "[Ann] let's plan the offsite", "{texts:?}");
    assert_eq!(
        texts.last().map(String::as_str),
        Some(format!("[Bob] {question}").as_str()),
        "the model sees who speaks"
    );
    let system = bobs_turn["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(system.contains("<participants>"), "{system}");
    assert!(
        !request_mentions(bobs_turn, "green tea"),
        "nothing of Ann's memory in Bob's turn"
    );
    assert!(request_mentions(bobs_update, "I prefer the mountains"));
    assert!(
        !request_mentions(bobs_update, "offsite") && !request_mentions(bobs_update, "green tea"),
        "Bob's memory learns from Bob's words only"
    );

    // Each one's memory, as they see it in private.
    slack.dm(ANN, "/memory facts").await;
    let ann_facts = slack.text(&ann_dm, 2).await;
    assert!(
        ann_facts.contains("green tea") && !ann_facts.contains("mountains"),
        "{ann_facts}"
    );
    slack.dm(BOB, "/memory facts").await;
    let bob_facts = slack.text(&bob_dm, 1).await;
    assert!(
        bob_facts.contains("mountains") && !bob_facts.contains("green tea"),
        "{bob_facts}"
    );

    let usage = usage_by_user(slack.addr()).await;
    assert_eq!(usage.get("slack-U0ANN0001"), Some(&2), "{usage:?}");
    assert_eq!(usage.get("slack-U0BOB0001"), Some(&1), "{usage:?}");
    slack.stop().await;

    // The thread is the chat's: neither Ann's nor Bob's threads list it.
    let store = Arc::new(SledStore::open(slack.data_dir().join("store")).expect("store"));
    let (_, record) = group_record(&store);
    let owner = record["user_id"].as_str().unwrap_or_default();
    assert!(owner.starts_with("chat-slack-"), "{record}");
    assert_eq!(record["shared"], true);
    assert_eq!(record["started_by"], "slack-U0ANN0001");
    let threads = ThreadStore::new(store).expect("threads");
    let thread_id = record["thread_id"].as_str().unwrap_or_default();
    assert_eq!(
        threads
            .get(thread_id)
            .expect("get")
            .expect("thread")
            .user_id,
        owner
    );
    for person in ["slack-U0ANN0001", "slack-U0BOB0001"] {
        let theirs = threads.list(person).expect("list");
        assert!(theirs.iter().all(|t| t.thread_id != thread_id), "{person}");
    }
}

/// The record of the channel's conversation (tree `channel_chats`): its key and value.
pub(crate) fn group_record(store: &Arc<SledStore>) -> (String, Value) {
    use antler_store::Store;
    let prefix = format!("slack:{CHANNEL}:");
    let found = store
        .scan_prefix("channel_chats", prefix.as_bytes())
        .expect("scan");
    assert_eq!(found.len(), 1, "one conversation in the channel");
    let (key, value) = &found[0];
    let record = serde_json::from_slice(value).expect("a record");
    (String::from_utf8_lossy(key).into_owned(), record)
}
