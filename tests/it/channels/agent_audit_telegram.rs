//! `/agent history`, `/agent diff`, `/agent revert` in Telegram after a bootstrap and an
//! `update_agent`: each version names its writer (the bootstrap run, the update_agent run, the
//! person who reverted), the diff shows the changed lines, a revert is a new version, and a
//! member who does not own the group's agent is refused all three.

use antler::custom_agents::store::AgentStore;
use antler::custom_agents::{AgentStoreError, VersionAuthor};
use antler_test_support::{FakeTelegram, Reply, group_chat, private_chat};
use serde_json::json;

use super::{Bot, WAIT, config_yaml};

const ANN: i64 = 71;
const BOB: i64 = 72;
const GROUP: i64 = -1_007_100;
const FIRST_SOUL: &str = "# Helper\nBe kind.\n";
const SECOND_SOUL: &str = "# Helper\nBe strict.\nCheck twice.\n";

/// Sends `text` to `chat` as `user` and waits for a reply that `check` accepts; returns it.
async fn ask(
    fake: &FakeTelegram,
    chat: serde_json::Value,
    user: i64,
    text: &str,
    check: impl Fn(&str) -> bool,
) -> String {
    ask_with(fake, chat, user, json!({"text": text}), check)
        .await
        .1
}

/// [`ask`] with the message's fields (a reply to another message); returns the message's id
/// and the reply.
async fn ask_with(
    fake: &FakeTelegram,
    chat: serde_json::Value,
    user: i64,
    fields: serde_json::Value,
    check: impl Fn(&str) -> bool,
) -> (i64, String) {
    let chat_id = chat["id"].as_i64().expect("chat id");
    let what = fields["text"].as_str().unwrap_or_default().to_string();
    let before = fake.chat_texts(chat_id).len();
    let id = fake.send_message(chat, user, fields);
    fake.wait_for(WAIT, &what, |f| {
        f.chat_texts(chat_id).iter().skip(before).any(|t| check(t))
    })
    .await;
    let reply = fake
        .chat_texts(chat_id)
        .into_iter()
        .skip(before)
        .find(|t| check(t))
        .unwrap_or_default();
    (id, reply)
}

fn run_of(author: Option<&VersionAuthor>) -> String {
    match author {
        Some(
            VersionAuthor::Bootstrap { run_id, .. } | VersionAuthor::UpdateAgent { run_id, .. },
        ) => run_id.clone(),
        other => panic!("not a run: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persona_versions_are_audited_and_reverted_from_the_chat() {
    let fake = FakeTelegram::start().await;
    let model = antler_test_support::FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = config_yaml(
        dir.path(),
        &fake,
        &model,
        &format!("    allowed_chats: [\"{GROUP}\"]\n"),
    );
    let bot = Bot::start(&format!("{yaml}\nagents:\n  self_service: true\n")).await;
    let store = AgentStore::new(dir.path().join("data"));
    let ann = format!("telegram-{ANN}");

    // The bootstrap creates the agent, then its own chat changes its SOUL.md.
    model
        .push(Reply::tool_call(
            "setup_agent",
            json!({"soul": FIRST_SOUL, "description": "Helps"}),
        ))
        .push(Reply::text("helper is ready."));
    ask(&fake, private_chat(ANN), ANN, "/bootstrap helper", |t| {
        t == "helper is ready."
    })
    .await;
    model
        .push(Reply::tool_call(
            "update_agent",
            json!({"soul": SECOND_SOUL}),
        ))
        .push(Reply::text("Updated."));
    ask(&fake, private_chat(ANN), ANN, "be stricter", |t| {
        t == "Updated."
    })
    .await;
    let versions = store.history(&ann, "helper").expect("history");
    let current = store.current_version(&ann, "helper").expect("current");
    assert_eq!(versions.len(), 1);
    assert!(matches!(
        versions[0].author,
        Some(VersionAuthor::Bootstrap { ref user_id, .. }) if *user_id == ann
    ));
    assert!(matches!(
        current.author,
        Some(VersionAuthor::UpdateAgent { ref user_id, .. }) if *user_id == ann
    ));
    let (bootstrap_run, update_run) = (
        run_of(versions[0].author.as_ref()),
        run_of(current.author.as_ref()),
    );
    assert_ne!(bootstrap_run, update_run);

    // Both versions, newest first, with their authors and what they changed.
    let history = ask(&fake, private_chat(ANN), ANN, "/agent history", |t| {
        t.starts_with("Versions of helper")
    })
    .await;
    let lines: Vec<&str> = history.lines().collect();
    assert!(lines[1].starts_with("#2 (current) · "), "{history}");
    assert!(
        lines[1].ends_with(&format!(
            "update_agent in run {update_run} (for {ann}) · SOUL.md +2/−1 lines"
        )),
        "{history}"
    );
    assert!(lines[2].starts_with("#1 · "), "{history}");
    assert!(
        lines[2].ends_with(&format!(
            "bootstrap run {bootstrap_run} (setup_agent, for {ann}) · created: SOUL.md 2 lines"
        )),
        "{history}"
    );

    // The diff of version 1 against the files in place: the changed lines, as code.
    let diff = ask(&fake, private_chat(ANN), ANN, "/agent diff 1", |t| {
        t.starts_with("helper: version 1 → current, #2")
    })
    .await;
    for line in ["-Be kind.", "+Be strict.", "+Check twice.", " # Helper"] {
        assert!(
            diff.contains(&format!("\n{line}")),
            "{line:?} missing: {diff}"
        );
    }
    assert!(
        diff.contains("<pre><code class=\"language-diff\">"),
        "{diff}"
    );
    ask(&fake, private_chat(ANN), ANN, "/agent diff 9", |t| {
        t == "helper has no version 9. /agent history lists its versions."
    })
    .await;

    // The revert restores version 1 as a new version, which history then shows.
    let reverted = ask(&fake, private_chat(ANN), ANN, "/agent revert 1", |t| {
        t.starts_with("Reverted helper")
    })
    .await;
    assert!(
        reverted.starts_with(
            "Reverted helper to version 1: its files are now the current version #3 (SOUL.md +1/−2 lines). The files it replaced are kept as version 2: /agent revert 2 undoes this."
        ),
        "{reverted}"
    );
    let soul = store
        .get(&ann, "helper")
        .expect("read")
        .expect("agent")
        .soul;
    assert_eq!(soul, FIRST_SOUL);
    let history = ask(&fake, private_chat(ANN), ANN, "/agent history", |t| {
        t.starts_with("Versions of helper") && t.contains("#3")
    })
    .await;
    let lines: Vec<&str> = history.lines().collect();
    assert!(
        lines[1].starts_with("#3 (current) · ")
            && lines[1].contains(&format!("revert to version 1 by User{ANN} ({ann})")),
        "{history}"
    );
    assert!(
        lines[2].starts_with("#2 · ") && lines[2].contains(&update_run),
        "{history}"
    );

    // In a group running Ann's agent, Bob may neither read nor revert its versions.
    // (Addressed with a mention first: the adapter's cut of `/cmd@Bot` joins the command with
    // its argument.)
    let group = group_chat(GROUP, false);
    let choose = "@AntlerBot /agent helper";
    let (root, _) = ask_with(&fake, group.clone(), ANN, json!({"text": choose}), |t| {
        t == "Switched to helper. New conversation started."
    })
    .await;
    for (command, what) in [
        ("@AntlerBot /agent history", "see its history"),
        ("@AntlerBot /agent diff 1", "see its changes"),
        ("@AntlerBot /agent revert 2", "revert it"),
    ] {
        let expected =
            format!("Sorry, helper is the agent of {ann}: only they or an admin can {what}.");
        // In the conversation Ann started: a reply to her message.
        let fields = json!({"text": command, "reply_to_message": {
            "message_id": root, "date": 1_700_000_000, "chat": group,
            "from": {"id": ANN, "is_bot": false, "first_name": format!("User{ANN}")},
            "text": choose,
        }});
        ask_with(&fake, group.clone(), BOB, fields, |t| t == expected).await;
    }
    // Nor can he reach it by name from his own chat: it is not his.
    ask(
        &fake,
        private_chat(BOB),
        BOB,
        "/agent history helper",
        |t| t == "You have no agent named helper. Use /agent to list yours.",
    )
    .await;
    assert_eq!(store.history(&ann, "helper").expect("history").len(), 2);
    assert_eq!(
        store
            .get(&ann, "helper")
            .expect("read")
            .expect("agent")
            .soul,
        FIRST_SOUL
    );
    assert!(matches!(
        store.history(&format!("telegram-{BOB}"), "helper"),
        Err(AgentStoreError::NotFound { .. })
    ));
    bot.stop().await;
}
