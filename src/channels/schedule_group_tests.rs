//! A schedule of a member in a group chat runs there as that member, also where the group is
//! allowed only through its workspace (a Discord guild in `allowed_guilds`): the chat's record
//! remembers the workspace its messages came from, since the daemon's entry has none.

use super::*;
use crate::channels::mapping::chat_owner;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_slot_in_a_guild_allowed_group_runs_as_them() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let platform = Arc::new(Platform::default());
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            ScriptedTurn::Text(vec!["Hello, group.".into()]),
            ScriptedTurn::Text(vec!["Time to send the report.".into()]),
        ],
    ));
    let a = daemon_on("discord", &store, "a", &platform, &model, |config| {
        config.channels.discord.enabled = true;
        config.channels.discord.allowed_guilds = vec!["g1".into()];
    });
    let mut hello = message("m1", "u1", "hi all");
    hello.channel = "discord".into();
    hello.workspace_id = Some("g1".into());
    hello.chat_id = "c9".into();
    hello.is_direct = false;
    hello.mentions_bot = true;
    hello.display_name = Some("Ann".into());
    let accepted = a.manager.accept_batch("discord", vec![hello]).unwrap();
    assert_eq!(accepted, [Accepted::Queued]);
    wait_until("the group's answer", || {
        platform.count(|t| t == "Hello, group.") == 1
    })
    .await;

    let key = ChatKey::new("discord", "c9", None);
    let target = Target::Chat {
        chat_key: key.to_string(),
        sender_id: "u1".into(),
        sender_name: Some("Ann".into()),
        shared: true,
    };
    let (schedule, fire) = claimed_in(&a.harness, Deliver::Here, target, &chat_owner(&key));
    a.hook.fire(&schedule, &fire).unwrap();
    wait_until("the slot finished", || {
        outcome_of(&a.harness, &fire).is_some()
    })
    .await;
    assert_eq!(
        outcome_of(&a.harness, &fire),
        Some((FireOutcome::Ran, None))
    );
    assert_eq!(platform.count(|t| t == ANSWER), 1);
    let requests = model.requests();
    assert!(
        format!("{:?}", requests[1]).contains("[Ann] Remind me to send the report"),
        "the prompt is the member's words"
    );
    a.stop().await;
}
