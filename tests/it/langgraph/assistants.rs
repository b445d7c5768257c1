//! Assistants as the LangGraph SDKs read them: `lead_agent` and the caller's custom agents
//! (never another user's), search with filters, sort and paging, get, graph, schemas.

use antler_test_support::FakeOpenAi;
use serde_json::{Value, json};

use crate::daemon::{Daemon, Setup, TOKEN_A, TOKEN_B};

async fn post(daemon: &Daemon, path: &str, token: &str, body: Value) -> (u16, Value) {
    let response = daemon
        .post(path, token)
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get(daemon: &Daemon, path: &str, token: &str) -> (u16, Value) {
    let response = daemon.get(path, token).send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn ids(assistants: &Value) -> Vec<&str> {
    assistants
        .as_array()
        .expect("a list of assistants")
        .iter()
        .map(|a| a["assistant_id"].as_str().expect("assistant_id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_agent_and_the_callers_agents_are_assistants() {
    let fake = FakeOpenAi::start().await;
    let daemon = Setup::new(&fake.base_url(), "agents:\n  self_service: true\n").start();
    for (token, name, description) in [
        (TOKEN_A, "coder", "Writes code"),
        (TOKEN_A, "analyst", "Reads numbers"),
        (TOKEN_B, "poet", "Bob's own"),
    ] {
        let (status, body) = post(
            &daemon,
            "/api/agents",
            token,
            json!({"name": name, "soul": "You help.", "description": description}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }

    for base in ["/api", "/api/langgraph"] {
        let path = format!("{base}/assistants/search");
        let search = |body: Value| post(&daemon, &path, TOKEN_A, body);
        let (status, all) = search(json!({})).await;
        assert_eq!(status, 200, "{all}");
        // Bob's agent is not among Alice's.
        assert_eq!(ids(&all), ["lead_agent", "analyst", "coder"]);
        for assistant in all.as_array().unwrap() {
            for field in [
                "assistant_id",
                "graph_id",
                "config",
                "context",
                "metadata",
                "name",
                "description",
                "version",
                "created_at",
                "updated_at",
            ] {
                assert!(
                    assistant.get(field).is_some(),
                    "{field} missing: {assistant}"
                );
            }
            assert_eq!(assistant["graph_id"], "lead_agent");
        }
        let (_, found) = search(json!({"graph_id": "lead_agent", "name": "COD"})).await;
        assert_eq!(ids(&found), ["coder"]);
        let (_, found) = search(json!({"metadata": {"created_by": "system"}})).await;
        assert_eq!(ids(&found), ["lead_agent"]);
        let (_, found) = search(json!({"graph_id": "other"})).await;
        assert_eq!(ids(&found), Vec::<&str>::new());
        let (_, found) = search(json!({"sort_by": "name", "sort_order": "desc", "limit": 2})).await;
        assert_eq!(ids(&found), ["lead_agent", "coder"]);
        let (_, found) = search(json!({"sort_by": "assistant_id", "offset": 1, "limit": 1})).await;
        assert_eq!(ids(&found), ["coder"]);
        let (_, found) = search(json!({"name": "coder", "select": ["assistant_id", "name"]})).await;
        assert_eq!(found, json!([{"assistant_id": "coder", "name": "coder"}]));
        let (status, refused) = search(json!({"graph_id": "lead_agent", "bogus": true})).await;
        assert_eq!(status, 422, "{refused}");
        assert_eq!(refused["error"]["code"], "unsupported_field");
        assert!(
            refused["detail"].as_str().unwrap().starts_with("bogus:"),
            "{refused}"
        );

        let (status, lead) = get(&daemon, &format!("{base}/assistants/lead_agent"), TOKEN_A).await;
        assert_eq!(status, 200, "{lead}");
        assert_eq!(lead["assistant_id"], "lead_agent");
        assert_eq!(lead["metadata"]["created_by"], "system");

        let (status, coder) = get(&daemon, &format!("{base}/assistants/coder"), TOKEN_A).await;
        assert_eq!(status, 200, "{coder}");
        assert_eq!(coder["name"], "coder");
        assert_eq!(coder["description"], "Writes code");
        assert_eq!(coder["metadata"]["description"], "Writes code");
        assert_eq!(coder["config"]["configurable"]["agent_name"], "coder");
        assert_eq!(coder["context"]["agent_name"], "coder");

        // Another user's agent, or none at all, is a 404 with `detail`.
        for (path, token) in [
            (format!("{base}/assistants/poet"), TOKEN_A),
            (format!("{base}/assistants/nobody"), TOKEN_A),
            (format!("{base}/assistants/coder/graph"), TOKEN_B),
            (format!("{base}/assistants/Not A Name/schemas"), TOKEN_A),
        ] {
            let (status, body) = get(&daemon, &path, token).await;
            assert_eq!(status, 404, "{path}: {body}");
            assert_eq!(body["error"]["code"], "assistant_not_found", "{body}");
            assert!(
                body["detail"]
                    .as_str()
                    .unwrap()
                    .contains("assistants/search"),
                "{body}"
            );
        }
        let (status, poet) = get(&daemon, &format!("{base}/assistants/poet"), TOKEN_B).await;
        assert_eq!(status, 200, "{poet}");

        let (status, graph) =
            get(&daemon, &format!("{base}/assistants/coder/graph"), TOKEN_A).await;
        assert_eq!(status, 200, "{graph}");
        let nodes: Vec<&str> = graph["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_str().unwrap())
            .collect();
        assert_eq!(nodes, ["__start__", "lead_agent", "__end__"]);
        assert_eq!(graph["edges"].as_array().map(Vec::len), Some(2));

        let (status, schemas) = get(
            &daemon,
            &format!("{base}/assistants/lead_agent/schemas"),
            TOKEN_A,
        )
        .await;
        assert_eq!(status, 200, "{schemas}");
        assert_eq!(schemas["graph_id"], "lead_agent");
        for schema in [
            "input_schema",
            "output_schema",
            "state_schema",
            "config_schema",
            "context_schema",
        ] {
            assert_eq!(schemas[schema]["type"], "object", "{schema}: {schemas}");
        }
        assert!(
            schemas["state_schema"]["properties"]["title"].is_object(),
            "{schemas}"
        );
    }
}
