//! `/agent` in a Slack thread is the conversation's setting: Ann chooses her agent there, every
//! member's turn runs it (Bob's too, with his memory and usage), only Ann's turns may change
//! the agent itself (`update_agent`), and only Ann or an admin may choose another one.

use antler::custom_agents::config::AgentConfig;
use antler::custom_agents::store::AgentStore;
use antler_test_support::Reply;
use serde_json::Value;

use super::group_support::{SLACK_CHANNEL as CHANNEL, SlackGroup, memory_update, usage_by_user};

const ANN: &str = "U0ANN0001";
const BOB: &str = "U0BOB0001";
const ANN_SOUL: &str = "You are Ann's release helper.";
const BOB_SOUL: &str = "You are Bob's scout.";

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_of_a_slack_thread_is_chosen_for_everyone_and_changed_only_by_its_chooser() {
    let mut slack = SlackGroup::start("").await;
    let agents = AgentStore::new(slack.data_dir());
    for (user, name, soul) in [
        ("slack-U0ANN0001", "helper", ANN_SOUL),
        ("slack-U0BOB0001", "scout", BOB_SOUL),
    ] {
        let config = AgentConfig {
            name: name.into(),
            ..Default::default()
        };
        agents.create(user, name, &config, soul).expect("an agent");
    }

    let root = slack.mention(ANN, "/agent helper", None).await;
    slack
        .answered(CHANNEL, 1, "Switched to helper. New conversation started.")
        .await;

    // Bob's turn runs the conversation's agent, Ann's, without the tool that changes it.
    slack.model.push(Reply::text("Hi Bob."));
    slack.model.push(memory_update(&[]));
    slack.reply(BOB, "what can you do?", &root).await;
    slack.answered(CHANNEL, 2, "Hi Bob.").await;
    let requests = slack.requests(2).await;
    let system = requests[0]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains(ANN_SOUL) && !system.contains(BOB_SOUL),
        "{system}"
    );
    assert!(
        !tool_names(&requests[0]).contains(&"update_agent".to_string()),
        "{:?}",
        tool_names(&requests[0])
    );

    // Ann's turn: her agent, which she may change.
    slack.model.push(Reply::text("Hi Ann."));
    slack.model.push(memory_update(&[]));
    slack.reply(ANN, "and for me?", &root).await;
    slack.answered(CHANNEL, 3, "Hi Ann.").await;
    let requests = slack.requests(4).await;
    assert!(tool_names(&requests[2]).contains(&"update_agent".to_string()));

    // Bob may not choose another agent for everyone, not even the default one.
    for command in ["/agent scout", "/agent default"] {
        let n = slack.fake.channel_texts(CHANNEL).len() + 1;
        slack.reply(BOB, command, &root).await;
        slack
            .answered(
                CHANNEL,
                n,
                "Only Ann, who chose this conversation's agent, or an admin can change it here.",
            )
            .await;
    }
    let n = slack.fake.channel_texts(CHANNEL).len() + 1;
    slack.reply(BOB, "/status", &root).await;
    let status = slack.text(CHANNEL, n).await;
    assert!(status.contains("Agent: helper"), "{status}");

    // Ann may.
    let n = slack.fake.channel_texts(CHANNEL).len() + 1;
    slack.reply(ANN, "/agent default", &root).await;
    slack
        .answered(
            CHANNEL,
            n,
            "Switched to the default agent. New conversation started.",
        )
        .await;

    let usage = usage_by_user(slack.addr()).await;
    assert_eq!(usage.get("slack-U0ANN0001"), Some(&1), "{usage:?}");
    assert_eq!(usage.get("slack-U0BOB0001"), Some(&1), "{usage:?}");
    slack.stop().await;
}
