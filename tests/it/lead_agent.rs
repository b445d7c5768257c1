//! The lead agent end to end through the real daemon: a scripted bootstrap conversation creates
//! an agent, later runs carry its SOUL.md, other users cannot see or use it, bootstrap rights,
//! versioning over the HTTP API, and a system prompt that is the same bytes for every user.

use antler_test_support::{FakeOpenAi, Reply};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::daemon::{Daemon, Setup, TOKEN_A, TOKEN_B};

const SOUL: &str = "**Identity**\nHelper — Alice's <release> assistant & friend.\n\n**Core Traits**\n- Checks before acting\n";

/// Alice is the admin; the shipped skills are used so the bootstrap skill is the real one.
fn setup(fake: &FakeOpenAi, extra: &str) -> Setup {
    let skills = concat!(env!("CARGO_MANIFEST_DIR"), "/skills/public");
    Setup::new(
        &fake.base_url(),
        &format!("admins: [alice]\nsandbox:\n  skills_path: {skills}\n{extra}"),
    )
}

/// Runs one turn with `context` and waits for its final state.
async fn run(
    daemon: &Daemon,
    token: &str,
    thread: &str,
    text: &str,
    context: Value,
) -> reqwest::Response {
    daemon
        .post(&format!("/api/threads/{thread}/runs/wait"), token)
        .json(&json!({
            "input": {"messages": [{"role": "user", "content": text}]},
            "context": context,
        }))
        .send()
        .await
        .expect("run request")
}

fn system_prompt(request: &Value) -> String {
    let first = &request["messages"][0];
    assert_eq!(first["role"], "system", "{request}");
    first["content"].as_str().unwrap_or_default().to_string()
}

/// The static part of a system prompt: the date reminder is merged in behind it.
fn static_part(prompt: &str) -> &str {
    prompt.split("<system-reminder>").next().unwrap_or(prompt)
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

async fn error_code(response: reqwest::Response) -> (StatusCode, String, String) {
    let status = response.status();
    let body: Value = response.json().await.expect("error json");
    (
        status,
        body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_conversation_creates_an_agent_that_only_its_owner_can_use() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call(
        "setup_agent",
        json!({"soul": SOUL, "description": "Release helper"}),
    ))
    .push(Reply::text("✅ Helper is officially real."))
    .push(Reply::text("Hi, I am Helper."));
    let setup = setup(&fake, "");
    let daemon = setup.start();

    let thread = daemon.create_thread(TOKEN_A).await;
    let context = json!({"is_bootstrap": true, "agent_name": "Helper"});
    let response = run(
        &daemon,
        TOKEN_A,
        &thread,
        "Set up my release helper",
        context,
    )
    .await;
    assert_eq!(response.status(), 200);
    let done: Value = response.json().await.unwrap();
    assert_eq!(done["stop_reason"], "completed", "{done}");

    let requests = fake.requests();
    let bootstrap_prompt = system_prompt(&requests[0]);
    assert!(bootstrap_prompt.contains("<name>bootstrap</name>"));
    // The model is told the name the conversation was started with.
    assert!(
        bootstrap_prompt.contains(
            "<bootstrap>\nThis conversation sets up a new agent named \"helper\". The name is fixed"
        ),
        "{bootstrap_prompt}"
    );
    assert_eq!(
        bootstrap_prompt.matches("<skill>").count(),
        1,
        "only the bootstrap skill"
    );
    assert!(!bootstrap_prompt.contains("<self_update>"));
    let tools = tool_names(&requests[0]);
    assert!(tools.contains(&"setup_agent".to_string()), "{tools:?}");
    assert!(!tools.contains(&"update_agent".to_string()), "{tools:?}");
    // The date reminder reaches the model once, also on the second call of the turn.
    assert_eq!(
        system_prompt(&requests[1])
            .matches("<system-reminder>")
            .count(),
        1
    );

    let agent_dir = setup.data_dir().join("users/alice/agents/helper");
    assert_eq!(
        std::fs::read_to_string(agent_dir.join("SOUL.md")).unwrap(),
        SOUL
    );
    let config = std::fs::read_to_string(agent_dir.join("config.yaml")).unwrap();
    assert!(
        config.contains("name: helper") && config.contains("Release helper"),
        "{config}"
    );
    let thread_record: Value = daemon
        .get_json(&format!("/api/threads/{thread}"), TOKEN_A)
        .await;
    assert_eq!(thread_record["agent_name"], "helper", "{thread_record}");

    // The next run with the agent carries its soul, and it may update itself.
    let chat = daemon.create_thread(TOKEN_A).await;
    let response = run(
        &daemon,
        TOKEN_A,
        &chat,
        "hello",
        json!({"agent_name": "helper"}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let requests = fake.requests();
    let custom = requests.last().unwrap();
    let prompt = system_prompt(custom);
    assert!(
        prompt.contains(&format!("<soul>\n{}\n</soul>", escaped(SOUL.trim()))),
        "{prompt}"
    );
    assert!(prompt.contains("You are helper,") && prompt.contains("<self_update>"));
    assert!(tool_names(custom).contains(&"update_agent".to_string()));

    // Bob can neither see nor use it.
    let listed: Value = daemon.get_json("/api/agents", TOKEN_B).await;
    assert_eq!(listed["agents"], json!([]));
    let (status, code, _) = error_code(
        daemon
            .get("/api/agents/helper", TOKEN_B)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "agent_not_found")
    );
    let bob_thread = daemon.create_thread(TOKEN_B).await;
    let (status, code, message) = error_code(
        run(
            &daemon,
            TOKEN_B,
            &bob_thread,
            "hi",
            json!({"agent_name": "helper"}),
        )
        .await,
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "agent_not_found")
    );
    assert!(
        message.contains("no agent named 'helper' for you"),
        "{message}"
    );
    // Alice sees it.
    let listed: Value = daemon.get_json("/api/agents", TOKEN_A).await;
    assert_eq!(listed["agents"][0]["name"], "helper");
    assert_eq!(fake.unscripted_calls(), 0);
}

/// The tool schema named `name` in a request.
fn tool_schema(request: &Value, name: &str) -> Value {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["function"]["name"] == name)
        .map(|t| t["function"]["parameters"].clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_without_a_name_asks_for_one_and_creates_the_agent_under_it() {
    let fake = FakeOpenAi::start().await;
    let soul = json!({"soul": "**Identity**\nSous-chef.\n", "description": "Plans meals"});
    let named = |name: &str| {
        let mut args = soul.clone();
        args["name"] = json!(name);
        args
    };
    fake.push(Reply::text(
        "Happy to help. What shall we call the new agent?",
    ))
    .push(Reply::tool_call("setup_agent", named("sous_chef")))
    .push(Reply::text("Names cannot hold '_': how about sous-chef?"))
    .push(Reply::tool_call("setup_agent", named("sous-chef")))
    .push(Reply::text("✅ sous-chef is officially real."));
    let setup = setup(&fake, "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let context = json!({"is_bootstrap": true});
    for text in ["Set up a new agent.", "Call it sous_chef", "Yes, sous-chef"] {
        let response = run(&daemon, TOKEN_A, &thread, text, context.clone()).await;
        assert_eq!(response.status(), 200);
    }

    let requests = fake.requests();
    let prompt = system_prompt(&requests[0]);
    assert!(
        prompt.contains("<bootstrap>\nThis conversation sets up a new agent that has no name yet.")
            && prompt.contains("ask the person what to call it"),
        "{prompt}"
    );
    let schema = tool_schema(&requests[0], "setup_agent");
    assert_eq!(schema["required"], json!(["name", "soul", "description"]));
    // The name the person gave breaks the rules: nothing is written, the model hears why.
    let refusal = requests[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    assert!(
        refusal.contains("invalid agent name \"sous_chef\""),
        "{refusal}"
    );
    let agents = setup.data_dir().join("users/alice/agents");
    assert!(!agents.join("sous_chef").exists());
    assert!(agents.join("sous-chef/SOUL.md").exists());
    let state: Value = daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    assert_eq!(state["values"]["extra"]["created_agent_name"], "sous-chef");
    let listed: Value = daemon.get_json("/api/agents", TOKEN_A).await;
    assert_eq!(listed["agents"][0]["name"], "sous-chef");
    assert_eq!(fake.unscripted_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_is_for_admins_unless_self_service_is_on() {
    let fake = FakeOpenAi::start().await;
    let strict = setup(&fake, "");
    let daemon = strict.start();
    let thread = daemon.create_thread(TOKEN_B).await;
    let context = json!({"is_bootstrap": true, "agent_name": "mine"});
    let (status, code, message) =
        error_code(run(&daemon, TOKEN_B, &thread, "set me up", context.clone()).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::FORBIDDEN, "forbidden")
    );
    assert!(message.contains("self_service"), "{message}");
    // The management API follows the same rule.
    let response = daemon
        .post("/api/agents", TOKEN_B)
        .json(&json!({"name": "mine", "description": "", "soul": "s"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_code(response).await.0, StatusCode::FORBIDDEN);
    drop(daemon);

    fake.push(Reply::text("Which language shall we use?"));
    let open = setup(&fake, "agents:\n  self_service: true\n");
    let daemon = open.start();
    let thread = daemon.create_thread(TOKEN_B).await;
    let response = run(&daemon, TOKEN_B, &thread, "set me up", context).await;
    assert_eq!(response.status(), 200);
    // Without a name the conversation asks for one: an agent of his own all the same.
    fake.push(Reply::text("What shall we call your agent?"));
    let other = daemon.create_thread(TOKEN_B).await;
    let response = run(&daemon, TOKEN_B, &other, "x", json!({"is_bootstrap": true})).await;
    assert_eq!(response.status(), 200);
    // The default agent is everyone's: setting it up stays with the admins.
    let third = daemon.create_thread(TOKEN_B).await;
    let context = json!({"is_bootstrap": true, "agent_name": "default"});
    let (status, _, message) = error_code(run(&daemon, TOKEN_B, &third, "x", context).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        message.contains("only admins may set up the default agent"),
        "{message}"
    );
    assert_eq!(fake.unscripted_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_can_be_listed_and_reverted_over_http() {
    let fake = FakeOpenAi::start().await;
    let setup = setup(&fake, "");
    let daemon = setup.start();
    let created = daemon
        .post("/api/agents", TOKEN_A)
        .json(&json!({"name": "Writer", "description": "Writes", "soul": "v0 soul\n"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let again = daemon
        .post("/api/agents", TOKEN_A)
        .json(&json!({"name": "writer", "description": "", "soul": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_code(again).await.1, "agent_exists");

    let souls = ["v1 — ünïcode  \n", "v2 <b>bold</b>\r\n", "v3\n\n\n"];
    for soul in souls {
        let response = daemon
            .http
            .put(daemon.url("/api/agents/writer"))
            .bearer_auth(TOKEN_A)
            .json(&json!({"soul": soul}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["changed"], json!(["soul"]));
    }
    let history: Value = daemon.get_json("/api/agents/writer/history", TOKEN_A).await;
    let ids: Vec<&str> = history["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["000001", "000002", "000003"]);
    // Each version says who wrote it and what changed; the files in place are the next id.
    let first = &history["versions"][0];
    assert_eq!(first["author"], json!({"kind": "http", "user_id": "alice"}));
    assert_eq!(first["summary"], "created: SOUL.md 1 line");
    assert_eq!(history["current"]["id"], "000004");
    assert_eq!(
        history["current"]["author"],
        json!({"kind": "http", "user_id": "alice"})
    );
    assert!(
        history["current"]["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with("SOUL.md +")),
        "{history}"
    );

    // Version 000002 holds the soul as it was before the second update: v1, byte for byte.
    let reverted = daemon
        .post("/api/agents/writer/revert", TOKEN_A)
        .json(&json!({"version": "000002"}))
        .send()
        .await
        .unwrap();
    assert_eq!(reverted.status(), 200);
    let shown: Value = daemon.get_json("/api/agents/writer", TOKEN_A).await;
    assert_eq!(shown["soul"], souls[0]);
    let on_disk =
        std::fs::read(setup.data_dir().join("users/alice/agents/writer/SOUL.md")).unwrap();
    assert_eq!(on_disk, souls[0].as_bytes());
    let after: Value = daemon.get_json("/api/agents/writer/history", TOKEN_A).await;
    assert_eq!(
        after["current"]["author"],
        json!({"kind": "revert", "version": "000002", "by": {"kind": "http", "user_id": "alice"}})
    );

    let missing = daemon
        .post("/api/agents/writer/revert", TOKEN_A)
        .json(&json!({"version": "999999"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_code(missing).await.1, "version_not_found");
    // Another user's view: absent, and without admin rights they may not name alice.
    let (status, ..) = error_code(
        daemon
            .get("/api/agents/writer/history", TOKEN_B)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, code, _) = error_code(
        daemon
            .get("/api/agents?user=alice", TOKEN_B)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::FORBIDDEN, "forbidden")
    );

    let deleted = daemon
        .delete("/api/agents/writer", TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    let (status, ..) = error_code(
        daemon
            .get("/api/agents/writer", TOKEN_A)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_users_of_the_same_agent_get_the_same_system_prompt_bytes() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("one")).push(Reply::text("two"));
    let setup = setup(&fake, "");
    let daemon = setup.start();
    // Alice, an admin, creates the same agent for herself and for Bob.
    for owner in [None, Some("bob")] {
        let mut body =
            json!({"name": "twin", "description": "Twins", "soul": SOUL, "model": "fake"});
        if let Some(owner) = owner {
            body["user"] = json!(owner);
        }
        let response = daemon
            .post("/api/agents", TOKEN_A)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    let bob_list: Value = daemon.get_json("/api/agents?user=bob", TOKEN_A).await;
    assert_eq!(bob_list["agents"][0]["name"], "twin");

    for token in [TOKEN_A, TOKEN_B] {
        let thread = daemon.create_thread(token).await;
        let response = run(&daemon, token, &thread, "hi", json!({"agent_name": "twin"})).await;
        assert_eq!(response.status(), 200);
    }
    let requests = fake.requests();
    let (alice, bob) = (system_prompt(&requests[0]), system_prompt(&requests[1]));
    assert!(alice.contains("<soul>"));
    assert_eq!(static_part(&alice).as_bytes(), static_part(&bob).as_bytes());
    assert_eq!(alice.matches("<system-reminder>").count(), 1);
    assert_eq!(fake.unscripted_calls(), 0);
}
