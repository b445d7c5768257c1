//! `/memory diff <n>` through Telegram against the fake Bot API: after facts were added, edited
//! and deleted over the API (as the user's own token) and a `/memory revert` in the chat, the
//! revert's diff names the fact it added, the one it removed and the one it edited (old → new);
//! another Telegram user asking for the same version number is told to use `/memory history`.

use antler_test_support::{FakeOpenAi, FakeTelegram, private_chat};
use serde_json::{Value, json};

use crate::channels::{Bot, WAIT, config_yaml};

const OWNER: i64 = 73;
const STRANGER: i64 = 74;
const TOKEN: &str = "token-telegram-73-0123456789";

/// Sends `text` in `chat` and returns the first new reply starting with `prefix`.
async fn ask(fake: &FakeTelegram, chat: i64, text: &str, prefix: &'static str) -> String {
    let before = fake.chat_texts(chat).len();
    fake.send_text(private_chat(chat), chat, text);
    let new_reply = |f: &FakeTelegram| {
        let texts = f.chat_texts(chat);
        texts[before.min(texts.len())..]
            .iter()
            .find(|t| t.starts_with(prefix))
            .cloned()
    };
    fake.wait_for(WAIT, prefix, |f| new_reply(f).is_some())
        .await;
    new_reply(fake).unwrap_or_default()
}

struct Api {
    client: reqwest::Client,
    base: String,
}

impl Api {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        response.json().await.unwrap_or(Value::Null)
    }

    async fn add(&self, content: &str) -> String {
        let fact = json!({"content": content, "category": "knowledge", "confidence": 0.9});
        let created = self
            .send(reqwest::Method::POST, "/api/memory/facts", Some(fact))
            .await;
        created["id"].as_str().expect("fact id").to_string()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_diff_names_added_removed_and_edited_facts_of_ones_own_memory_only() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // The Telegram user's own API token, to write versions the way the web UI does.
    let yaml = format!(
        "{}memory:\n  enabled: true\n",
        config_yaml(dir.path(), &fake, &model, "")
    )
    .replacen(
        "  shutdown_grace_seconds: 0\n",
        &format!(
            "  shutdown_grace_seconds: 0\n  api_tokens:\n    - token: {TOKEN}\n      user: telegram-{OWNER}\n"
        ),
        1,
    );
    let bot = Bot::start(&yaml).await;
    let api = Api {
        client: reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client"),
        base: format!("http://{}", bot.addr),
    };
    let tea = api.add("Likes tea").await; // version 1
    let rust = api.add("Writes Rust").await; // 2
    let edit = json!({"content": "Likes green tea"});
    let patch = format!("/api/memory/facts/{tea}");
    api.send(reqwest::Method::PATCH, &patch, Some(edit)).await; // 3
    let delete = format!("/api/memory/facts/{rust}");
    api.send(reqwest::Method::DELETE, &delete, None).await; // 4
    let runs = api.add("Runs on Sundays").await; // 5

    let edited = ask(&fake, OWNER, "/memory diff 3", "Version 3 ·").await;
    assert!(
        edited.contains(&format!(
            "against version 2:\nEdited (1):\n~ Likes tea → Likes green tea ({tea})"
        )),
        "{edited}"
    );
    // Version 6 puts version 2 back: Rust returns, the Sunday runs go, the tea is plain again.
    ask(&fake, OWNER, "/memory revert 2", "Memory restored").await;
    let diff = ask(&fake, OWNER, "/memory diff 6", "Version 6 ·").await;
    let expected = format!(
        "chat /memory revert 2 (back to version 2), against version 5:\n\
         Added (1):\n+ Writes Rust [knowledge] ({rust})\n\
         Removed (1):\n− Runs on Sundays [knowledge] ({runs})\n\
         Edited (1):\n~ Likes green tea → Likes tea ({tea})\n\
         /memory revert 5 puts back your memory as it was before this version."
    );
    assert!(diff.ends_with(&expected), "{diff}");
    assert_eq!(
        ask(&fake, OWNER, "/memory diff 9", "No version").await,
        "No version 9. List the kept versions with /memory history."
    );

    // Another person's version numbers mean nothing in their own chat.
    assert_eq!(
        ask(&fake, STRANGER, "/memory diff 6", "No version").await,
        "No version 6. List the kept versions with /memory history."
    );
    let help = ask(&fake, OWNER, "/help", "Available commands").await;
    assert!(
        help.contains("/memory diff N — What version N changed"),
        "{help}"
    );
    bot.stop().await;
}
