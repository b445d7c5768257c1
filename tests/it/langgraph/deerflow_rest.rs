//! The REST routes DeerFlow's web UI calls beside the LangGraph API, with the fields it reads:
//! models, skills, agents (and the name check), MCP config (`mcp_servers`, the per-server
//! switch), uploads (limits, the list's links), a skill installed from a thread's file, and
//! the memory document after each change.

use std::io::{Cursor, Write};

use antler_test_support::FakeOpenAi;
use serde_json::{Value, json};
use zip::write::SimpleFileOptions;

use crate::daemon::{Setup, TOKEN_A};

fn skill_archive() -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    writer
        .start_file("weekly-report/SKILL.md", SimpleFileOptions::default())
        .unwrap();
    writer
        .write_all(
            b"---\nname: weekly-report\ndescription: Write the weekly report.\n---\n# Weekly\n",
        )
        .unwrap();
    writer.finish().unwrap().into_inner()
}

async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deerflow_reads_its_fields_from_antlers_rest_routes() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(
        &fake.base_url(),
        "admins: [alice]\nagents:\n  self_service: true\nmemory:\n  enabled: true\n",
    );
    let daemon = setup.start();

    // Models: `id` and the token-usage switch.
    let models = daemon.get_json("/api/models", TOKEN_A).await;
    assert_eq!(models["models"][0]["id"], "fake", "{models}");
    assert_eq!(models["models"][0]["name"], "fake", "{models}");
    assert!(models["token_usage"]["enabled"].is_boolean(), "{models}");

    // Skills: `category`, `editable`, `license` beside Antler's `source`.
    let skills = daemon.get_json("/api/skills", TOKEN_A).await;
    let skills = skills["skills"].as_array().expect("skills");
    assert!(!skills.is_empty(), "the bundled skills are listed");
    for skill in skills {
        assert_eq!(skill["category"], skill["source"], "{skill}");
        assert_eq!(skill["editable"], skill["source"] == "custom", "{skill}");
        assert!(skill["license"].is_string(), "{skill}");
    }

    // Agents: the fields at the top level, and the name check.
    let (status, created) = send(daemon.post("/api/agents", TOKEN_A).json(
        &json!({"name": "coder", "soul": "You code.", "description": "Writes code", "model": null}),
    ))
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "coder");
    assert_eq!(created["description"], "Writes code");
    assert_eq!(
        created["agent"]["name"], "coder",
        "Antler's own shape stays"
    );
    assert_eq!(created["soul"], "You code.");
    let taken = daemon
        .get_json("/api/agents/check?name=coder", TOKEN_A)
        .await;
    assert_eq!(taken, json!({"available": false, "name": "coder"}));
    let free = daemon
        .get_json("/api/agents/check?name=Writer", TOKEN_A)
        .await;
    assert_eq!(free, json!({"available": true, "name": "writer"}));
    let (status, invalid) = send(daemon.get("/api/agents/check?name=no%20spaces!", TOKEN_A)).await;
    assert_eq!(status, 422, "{invalid}");
    assert!(invalid["detail"].is_string(), "{invalid}");

    // MCP: DeerFlow's `mcp_servers` in and out, and its per-server switch.
    let servers =
        json!({"files": {"command": "/nonexistent/server", "enabled": true, "description": "d"}});
    let (status, put) = send(
        daemon
            .http
            .put(daemon.url("/api/mcp/config"))
            .bearer_auth(TOKEN_A)
            .json(&json!({"mcp_servers": servers})),
    )
    .await;
    assert_eq!(status, 200, "{put}");
    assert_eq!(put["mcp_servers"], servers);
    assert_eq!(put["mcpServers"], servers);
    let (status, patched) = send(
        daemon
            .http
            .patch(daemon.url("/api/mcp/config"))
            .bearer_auth(TOKEN_A)
            .json(&json!({"server_name": "files", "enabled": false})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["mcp_servers"]["files"]["enabled"], false);
    let read = daemon.get_json("/api/mcp/config", TOKEN_A).await;
    assert_eq!(read["mcp_servers"]["files"]["enabled"], false);
    assert_eq!(read["mcp_servers"]["files"]["description"], "d");
    let (status, missing) = send(
        daemon
            .http
            .patch(daemon.url("/api/mcp/config"))
            .bearer_auth(TOKEN_A)
            .json(&json!({"server_name": "nope", "enabled": true})),
    )
    .await;
    assert_eq!(status, 404, "{missing}");

    // Uploads: the limits, and `skipped_files` in an upload's answer.
    let thread = daemon.create_thread(TOKEN_A).await;
    let limits = daemon
        .get_json(&format!("/api/threads/{thread}/uploads/limits"), TOKEN_A)
        .await;
    for key in ["max_files", "max_file_size", "max_total_size"] {
        assert!(
            limits[key].as_u64().is_some_and(|n| n > 0),
            "{key}: {limits}"
        );
    }
    let form = reqwest::multipart::Form::new().part(
        "files",
        reqwest::multipart::Part::bytes(b"hello".to_vec()).file_name("notes.txt"),
    );
    let (status, uploaded) = send(
        daemon
            .post(&format!("/api/threads/{thread}/uploads"), TOKEN_A)
            .multipart(form),
    )
    .await;
    assert_eq!(status, 200, "{uploaded}");
    assert_eq!(uploaded["skipped_files"], json!([]));
    assert_eq!(uploaded["files"][0]["filename"], "notes.txt");
    let listed = daemon
        .get_json(&format!("/api/threads/{thread}/uploads/list"), TOKEN_A)
        .await;
    let file = &listed["files"][0];
    assert_eq!(
        file["virtual_path"], "/mnt/user-data/uploads/notes.txt",
        "{listed}"
    );
    assert_eq!(file["extension"], ".txt", "{listed}");
    assert_eq!(
        file["artifact_url"], uploaded["files"][0]["artifact_url"],
        "{listed}"
    );

    // A skill installed from a thread's file answers DeerFlow's `success` and `skill_name`.
    let form = reqwest::multipart::Form::new().part(
        "files",
        reqwest::multipart::Part::bytes(skill_archive()).file_name("weekly.skill"),
    );
    let (status, _) = send(
        daemon
            .post(&format!("/api/threads/{thread}/uploads"), TOKEN_A)
            .multipart(form),
    )
    .await;
    assert_eq!(status, 200);
    let (status, installed) = send(
        daemon
            .post("/api/skills/install", TOKEN_A)
            .json(&json!({"thread_id": thread, "path": "/mnt/user-data/uploads/weekly.skill"})),
    )
    .await;
    assert_eq!(status, 201, "{installed}");
    assert_eq!(installed["success"], true);
    assert_eq!(installed["skill_name"], "weekly-report");
    assert_eq!(installed["category"], "custom");
    assert_eq!(installed["editable"], true);
    let other = daemon
        .get(
            "/api/threads/not-mine/uploads/limits",
            crate::daemon::TOKEN_B,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);

    // Memory: each change answers the document beside Antler's fields.
    let (status, added) = send(
        daemon
            .post("/api/memory/facts", TOKEN_A)
            .json(&json!({"content": "Likes tea", "category": "preference", "confidence": 0.9})),
    )
    .await;
    assert_eq!(status, 201, "{added}");
    let id = added["id"].as_str().expect("the fact's id").to_owned();
    assert_eq!(added["facts"][0]["id"], id.as_str());
    assert_eq!(added["version"], "1.0");
    assert!(added["user"]["workContext"].is_object(), "{added}");
    let (status, patched) = send(
        daemon
            .http
            .patch(daemon.url(&format!("/api/memory/facts/{id}")))
            .bearer_auth(TOKEN_A)
            .json(&json!({"content": "Likes green tea"})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["content"], "Likes green tea");
    assert_eq!(patched["facts"][0]["content"], "Likes green tea");
    let (status, cleared) = send(daemon.delete("/api/memory", TOKEN_A)).await;
    assert_eq!(status, 200, "{cleared}");
    assert_eq!(cleared["deleted_facts"], 1);
    assert_eq!(cleared["facts"], json!([]));
    assert_eq!(cleared["history"]["recentMonths"]["summary"], "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deerflow_reloads_a_conversation_a_page_at_a_time() {
    let fake = FakeOpenAi::start().await;
    fake.push(antler_test_support::Reply::text("One."))
        .push(antler_test_support::Reply::text("Two."));
    let daemon = Setup::new(&fake.base_url(), "title:\n  enabled: false\n").start();
    let thread = daemon.create_thread(TOKEN_A).await;
    for text in ["first", "second"] {
        let answered = daemon.run_wait(TOKEN_A, &thread, text).await;
        assert_eq!(answered.status(), 200);
    }
    let path = format!("/api/threads/{thread}/messages/page");
    let all = daemon.get_json(&path, TOKEN_A).await;
    assert_eq!(all["has_more"], false, "{all}");
    assert_eq!(all["next_before_seq"], Value::Null, "{all}");
    let rows = all["data"].as_array().expect("rows");
    let texts: Vec<&str> = rows
        .iter()
        .map(|row| row["content"]["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(texts, ["first", "One.", "second", "Two."], "{all}");
    let seqs: Vec<u64> = rows
        .iter()
        .map(|row| row["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");
    assert_eq!(rows[0]["metadata"]["caller"], "lead_agent");

    // Newest page first; the cursor leads to the older rows.
    let newest = daemon.get_json(&format!("{path}?limit=3"), TOKEN_A).await;
    assert_eq!(newest["has_more"], true, "{newest}");
    assert_eq!(newest["data"].as_array().map(Vec::len), Some(3));
    let before = newest["next_before_seq"].as_u64().expect("a cursor");
    assert_eq!(before, seqs[1]);
    let older = daemon
        .get_json(&format!("{path}?limit=3&before_seq={before}"), TOKEN_A)
        .await;
    assert_eq!(older["has_more"], false, "{older}");
    assert_eq!(older["data"][0]["content"]["content"], "first");
    assert_eq!(older["data"].as_array().map(Vec::len), Some(1));

    let (status, refused) = send(daemon.get(&format!("{path}?limit=0"), TOKEN_A)).await;
    assert_eq!(status, 422, "{refused}");
    let (status, _) = send(daemon.get(&path, crate::daemon::TOKEN_B)).await;
    assert_eq!(status, 404);
}
