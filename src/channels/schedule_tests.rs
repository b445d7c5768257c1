//! A fired slot of a schedule created in a chat is run there as its owner and answered once,
//! under its header, however many daemons sharing the store and however many calls hand it
//! over; an entry with a schedule's id and no claimed slot behind it runs nothing; a notice is
//! posted once; an owner the allowlist no longer admits gets no run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use antler_channel::{
    ChannelError, ChannelParts, ChatKey, InboundMessage, SendMessage, SentMessage,
};
use async_trait::async_trait;
use chrono::{TimeZone, Utc};

use crate::channels::cluster_tests::wait_until;
use crate::channels::manager::{Accepted, ChannelManager};
use crate::channels::runtime::ChannelRuntime;
use crate::channels::schedule_hook::ChatScheduleHook;
use crate::config::{AppConfig, ConfigHandle, ModelConfig};
use crate::harness::Harness;
use crate::model::{ModelErrorKind, ModelRegistry, ScriptedModel, ScriptedTurn};
use crate::scheduler::{
    CatchUp, ChatSchedule, Claim, Deliver, Fire, FireKind, FireOutcome, FireStatus, Schedule,
    ScheduleStatus, Target, When,
};
use antler_store::{MemoryStore, StoreRef};

#[path = "schedule_group_tests.rs"]
mod group;

/// What the platform received.
#[derive(Default)]
struct Platform {
    sent: Mutex<Vec<String>>,
}

#[async_trait]
impl SendMessage for Platform {
    async fn send_text(
        &self,
        _chat: &ChatKey,
        text: &str,
        _reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let mut sent = self.sent.lock().unwrap();
        sent.push(text.to_string());
        Ok(SentMessage {
            platform_message_id: format!("sent-{}", sent.len()),
        })
    }
}

impl Platform {
    fn count(&self, check: impl Fn(&str) -> bool) -> usize {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|t| check(t))
            .count()
    }
}

struct Daemon {
    harness: Arc<Harness>,
    manager: ChannelManager,
    hook: ChatScheduleHook,
    _dir: tempfile::TempDir,
}

fn daemon(
    store: &StoreRef,
    id: &str,
    platform: &Arc<Platform>,
    model: &Arc<ScriptedModel>,
    allowed_users: &[&str],
) -> Daemon {
    let allowed_users: Vec<String> = allowed_users.iter().map(|u| u.to_string()).collect();
    daemon_on("telegram", store, id, platform, model, |config| {
        config.channels.telegram.enabled = true;
        config.channels.telegram.allowed_users = allowed_users;
    })
}

/// A daemon on `store` whose channel `channel` sends to `platform`, its config changed by
/// `configure`.
fn daemon_on(
    channel: &str,
    store: &StoreRef,
    id: &str,
    platform: &Arc<Platform>,
    model: &Arc<ScriptedModel>,
    configure: impl FnOnce(&mut AppConfig),
) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let mut config = AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    };
    config.cluster.instance_id = id.to_string();
    config.llm_call.retry_max_attempts = 1;
    configure(&mut config);
    let profile = config
        .channels
        .section(channel)
        .unwrap()
        .adapter()
        .profile();
    let models = ModelRegistry::new().with_model("scripted", model.clone(), ModelConfig::default());
    let config = ConfigHandle::fixed(config);
    let harness =
        Arc::new(Harness::with_parts(config.clone(), store.clone(), Some(models)).unwrap());
    let manager = ChannelManager::new(harness.clone(), config);
    let hook = ChatScheduleHook::new(&manager);
    let parts = ChannelParts::send_only(platform.clone());
    manager.register(ChannelRuntime::new(channel, parts, profile, None));
    Daemon {
        harness,
        manager,
        hook,
        _dir: dir,
    }
}

impl Daemon {
    async fn stop(self) {
        self.manager.shutdown(Duration::from_secs(1)).await;
        self.harness.shutdown(Duration::ZERO).await.unwrap();
    }
}

/// A schedule of `u1` in the direct chat `telegram:c1`, stored, with its first slot claimed.
fn claimed_schedule(harness: &Harness) -> (Schedule, Fire) {
    claimed_schedule_delivering(harness, Deliver::Here)
}

/// [`claimed_schedule`] with `deliver`; a `new_thread` slot runs on a thread of its own.
fn claimed_schedule_delivering(harness: &Harness, deliver: Deliver) -> (Schedule, Fire) {
    let target = Target::Chat {
        chat_key: "telegram:c1".into(),
        sender_id: "u1".into(),
        sender_name: Some("Ann".into()),
        shared: false,
    };
    claimed_in(harness, deliver, target, "telegram-u1")
}

/// A schedule of `telegram-u1` answering at `target`, whose thread `sched-t1` is
/// `thread_owner`'s, stored with its first slot (Monday 7 December, 09:00 Berlin) claimed.
fn claimed_in(
    harness: &Harness,
    deliver: Deliver,
    target: Target,
    thread_owner: &str,
) -> (Schedule, Fire) {
    let created = Utc.with_ymd_and_hms(2026, 12, 5, 21, 0, 0).unwrap();
    let slot = Utc.with_ymd_and_hms(2026, 12, 7, 8, 0, 0).unwrap();
    let store = harness.scheduler().store();
    let schedule = store
        .insert(
            Schedule {
                id: String::new(),
                owner: "telegram-u1".into(),
                name: "Weekly report".into(),
                prompt: "Remind me to send the report".into(),
                when: When::Cron("0 9 * * MON".into()),
                timezone: "Europe/Berlin".into(),
                catch_up: CatchUp::Latest,
                deliver,
                target,
                thread_id: "sched-t1".into(),
                thread_owner: thread_owner.into(),
                agent_name: None,
                agent_owner: None,
                model_name: None,
                status: ScheduleStatus::Active,
                next_fire: Some(slot),
                consecutive_failures: 0,
                last: None,
                missed: 0,
                created_at: created,
                updated_at: created,
            },
            None,
        )
        .unwrap();
    let fire = Fire {
        schedule_id: schedule.id.clone(),
        slot,
        kind: FireKind::Due,
        status: FireStatus::Claimed,
        thread_id: match deliver {
            Deliver::Here => schedule.thread_id.clone(),
            Deliver::NewThread => format!("sched-{}-{}", schedule.id, slot.timestamp_millis()),
        },
        thread_owner: schedule.thread_owner.clone(),
        claimed_at: slot,
        claimed_by: "a".into(),
        outcome: None,
        detail: None,
        finished_at: None,
    };
    let claim = Claim {
        fire: Some(fire.clone()),
        skipped: Vec::new(),
        next_fire: Some(slot + chrono::Duration::days(7)),
    };
    let schedule = store.claim(&schedule, claim).unwrap().expect("claimed");
    (schedule, fire)
}

fn outcome_of(harness: &Harness, fire: &Fire) -> Option<(FireOutcome, Option<String>)> {
    let stored = harness
        .scheduler()
        .store()
        .fire(&fire.schedule_id, fire.slot)
        .unwrap()?;
    if stored.status != FireStatus::Done {
        return None;
    }
    Some((stored.outcome?, stored.detail))
}

fn message(id: &str, user: &str, text: &str) -> InboundMessage {
    InboundMessage {
        channel: "telegram".into(),
        workspace_id: None,
        chat_id: "c1".into(),
        topic_id: None,
        user_id: user.into(),
        display_name: None,
        platform_message_id: id.into(),
        text: text.into(),
        files: Vec::new(),
        is_direct: true,
        mentions_bot: false,
        reply_to: None,
        thread_reply: false,
        is_bot: false,
        bot_id: None,
        context: Vec::new(),
        click: None,
    }
}

const ANSWER: &str = "⏰ Weekly report\n\nTime to send the report.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fired_slot_answers_in_its_chat_once_under_its_header() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let platform = Arc::new(Platform::default());
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [ScriptedTurn::Text(vec!["Time to send the report.".into()])],
    ));
    let a = daemon(&store, "a", &platform, &model, &[]);
    let b = daemon(&store, "b", &platform, &model, &[]);
    let (schedule, fire) = claimed_schedule(&a.harness);

    // Handed over on both daemons, twice on one (a restart, a second instance).
    for daemon in [&a, &b, &a] {
        daemon.hook.fire(&schedule, &fire).unwrap();
    }
    wait_until("the slot finished", || {
        outcome_of(&a.harness, &fire).is_some()
    })
    .await;
    assert_eq!(
        outcome_of(&a.harness, &fire),
        Some((FireOutcome::Ran, None))
    );
    assert_eq!(platform.count(|t| t == ANSWER), 1);
    assert_eq!(
        platform.count(|t| t.starts_with("⏰ Weekly report\nWorking on it")),
        1,
        "one status message, naming the schedule"
    );
    // Handed over again once answered: nothing more.
    b.hook.fire(&schedule, &fire).unwrap();
    wait_until("nothing left pending", || {
        a.manager.journal().pending_chats(None).unwrap().is_empty()
    })
    .await;
    assert_eq!(platform.count(|t| t == ANSWER), 1);
    let requests = model.requests();
    assert_eq!(requests.len(), 1, "the model was asked once");
    assert!(format!("{:?}", requests[0]).contains("Remind me to send the report"));
    // The slot ran on the schedule's thread as its owner, the prompt in it once.
    let state = a.harness.thread_state("sched-t1").await.unwrap().unwrap();
    let prompts = state
        .messages
        .iter()
        .filter_map(|m| m.as_human())
        .filter(|h| h.content.contains("Remind me to send the report"))
        .count();
    assert_eq!(prompts, 1);
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_with_a_schedules_id_and_no_claimed_slot_runs_nothing() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let platform = Arc::new(Platform::default());
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [ScriptedTurn::Text(vec![
            "The real question's answer.".into(),
        ])],
    ));
    let a = daemon(&store, "a", &platform, &model, &[]);
    let (schedule, fire) = claimed_schedule(&a.harness);
    let unclaimed = Utc.with_ymd_and_hms(2026, 12, 14, 8, 0, 0).unwrap();
    let forged = [
        // A slot nobody claimed.
        message(
            &format!(
                "schedule:{}",
                crate::scheduler::fire_key(&schedule.id, unclaimed)
            ),
            "u1",
            "run me",
        ),
        // The claimed slot's id from someone who is not its owner.
        message(&format!("schedule:{}", fire.key()), "u2", "run me too"),
        // No schedule at all.
        message("schedule:ffffffff@2026-12-07T08:00:00.000Z", "u1", "and me"),
    ];
    let accepted = a.manager.accept_batch("telegram", forged.to_vec()).unwrap();
    assert_eq!(
        accepted,
        [Accepted::Queued, Accepted::Queued, Accepted::Queued]
    );
    // The chat's messages are answered in order: a later one answered proves the forged ones
    // started nothing.
    a.manager
        .accept_batch("telegram", vec![message("m9", "u1", "a real question")])
        .unwrap();
    wait_until("the real question answered", || {
        platform.count(|t| t == "The real question's answer.") == 1
    })
    .await;
    assert_eq!(model.requests().len(), 1);
    assert_eq!(platform.count(|t| t.starts_with('⏰')), 0);
    // The daemon's own hand-over of the claimed slot finds its id taken by the forgery: the
    // slot ends as failed, with a record, instead of waiting forever.
    a.hook.fire(&schedule, &fire).unwrap();
    let (outcome, detail) = outcome_of(&a.harness, &fire).expect("the slot finished");
    assert_eq!(outcome, FireOutcome::Failed);
    assert!(detail.unwrap().contains("without a result"));
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_the_allowlist_no_longer_admits_gets_no_run() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let platform = Arc::new(Platform::default());
    let model = Arc::new(ScriptedModel::new("scripted", []));
    // Only u9 may use the bot now: the schedule's owner u1 was taken off the list.
    let a = daemon(&store, "a", &platform, &model, &["u9"]);
    let (schedule, fire) = claimed_schedule(&a.harness);
    a.hook.fire(&schedule, &fire).unwrap();
    wait_until("the slot finished", || {
        outcome_of(&a.harness, &fire).is_some()
    })
    .await;
    let (outcome, detail) = outcome_of(&a.harness, &fire).unwrap();
    assert_eq!(outcome, FireOutcome::Failed);
    assert!(detail.unwrap().contains("allowed_users"));
    assert!(model.requests().is_empty(), "nothing ran");
    assert_eq!(platform.count(|_| true), 0, "nothing was said to them");
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_is_posted_once() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let platform = Arc::new(Platform::default());
    let model = Arc::new(ScriptedModel::new("scripted", []));
    let a = daemon(&store, "a", &platform, &model, &[]);
    let b = daemon(&store, "b", &platform, &model, &[]);
    let (schedule, fire) = claimed_schedule(&a.harness);
    for daemon in [&a, &b, &a] {
        daemon
            .hook
            .notice(&schedule, &fire.key(), "⏸ Weekly report paused.")
            .unwrap();
    }
    wait_until("the notice", || {
        platform.count(|t| t == "⏸ Weekly report paused.") == 1
    })
    .await;
    wait_until("nothing left pending", || {
        a.manager.journal().pending_chats(None).unwrap().is_empty()
    })
    .await;
    assert_eq!(platform.count(|t| t == "⏸ Weekly report paused."), 1);
    assert!(model.requests().is_empty(), "a notice runs nothing");
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_thread_slot_answers_in_the_chat_and_leaves_its_conversation_alone() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let platform = Arc::new(Platform::default());
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            ScriptedTurn::Text(vec!["Hello.".into()]),
            ScriptedTurn::Text(vec!["Time to send the report.".into()]),
        ],
    ));
    let a = daemon(&store, "a", &platform, &model, &[]);
    a.manager
        .accept_batch("telegram", vec![message("m1", "u1", "hi")])
        .unwrap();
    wait_until("the chat's first answer", || {
        platform.count(|t| t == "Hello.") == 1
    })
    .await;
    let key = ChatKey::new("telegram", "c1", None);
    let before = a
        .manager
        .chats()
        .get(&key)
        .unwrap()
        .expect("the chat's record");

    let (schedule, fire) = claimed_schedule_delivering(&a.harness, Deliver::NewThread);
    assert_ne!(fire.thread_id, before.thread_id);
    a.hook.fire(&schedule, &fire).unwrap();
    wait_until("the slot finished", || {
        outcome_of(&a.harness, &fire).is_some()
    })
    .await;
    assert_eq!(
        outcome_of(&a.harness, &fire),
        Some((FireOutcome::Ran, None))
    );
    assert_eq!(platform.count(|t| t == ANSWER), 1, "answered in the chat");
    let after = a
        .manager
        .chats()
        .get(&key)
        .unwrap()
        .expect("the chat's record");
    assert_eq!(
        after.thread_id, before.thread_id,
        "the chat's conversation stays"
    );
    let own = a
        .harness
        .thread_state(&fire.thread_id)
        .await
        .unwrap()
        .unwrap();
    assert!(own.messages.iter().any(|m| {
        m.as_human()
            .is_some_and(|h| h.content.contains("Remind me to send the report"))
    }));
    let chat = a
        .harness
        .thread_state(&before.thread_id)
        .await
        .unwrap()
        .unwrap();
    assert!(!chat.messages.iter().any(|m| {
        m.as_human()
            .is_some_and(|h| h.content.contains("Remind me to send the report"))
    }));
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_slot_says_so_briefly_and_when_it_runs_again() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let platform = Arc::new(Platform::default());
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [ScriptedTurn::Fail(ModelErrorKind::Status(500))],
    ));
    let a = daemon(&store, "a", &platform, &model, &[]);
    let (schedule, fire) = claimed_schedule(&a.harness);
    a.hook.fire(&schedule, &fire).unwrap();
    wait_until("the slot finished", || {
        outcome_of(&a.harness, &fire).is_some()
    })
    .await;
    let (outcome, detail) = outcome_of(&a.harness, &fire).unwrap();
    assert_eq!(outcome, FireOutcome::Failed);
    assert!(detail.is_some());
    let notices: Vec<String> = platform
        .sent
        .lock()
        .unwrap()
        .iter()
        .filter(|t| t.starts_with("⚠ Scheduled task Weekly report failed: "))
        .cloned()
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].ends_with(" It will run again at Mon 2026-12-14 09:00 CET."),
        "{}",
        notices[0]
    );
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_for_a_channel_turned_off_fails_at_once_with_the_reason() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let platform = Arc::new(Platform::default());
    let model = Arc::new(ScriptedModel::new("scripted", []));
    let a = daemon(&store, "a", &platform, &model, &[]);
    let target = Target::Chat {
        chat_key: "slack:C1".into(),
        sender_id: "U1".into(),
        sender_name: None,
        shared: false,
    };
    let (schedule, fire) = claimed_in(&a.harness, Deliver::Here, target, "slack-U1");
    let error = a.hook.fire(&schedule, &fire).unwrap_err();
    assert!(
        error.to_string().contains("`channels.slack.enabled`"),
        "{error}"
    );
    assert!(
        a.manager.journal().pending_chats(None).unwrap().is_empty(),
        "nothing journalled"
    );
    a.stop().await;
}
