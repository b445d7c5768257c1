//! The official LangGraph SDKs drive Antler unchanged: `scenario.py` (`langgraph-sdk`) and
//! `scenario.mjs` (`@langchain/langgraph-sdk`) run every call DeerFlow's clients make against
//! the real daemon binary and a fake model that answers by what it is asked.
//!
//! The SDKs are installed by `.ci/run` into `$ANTLER_LANGGRAPH_SDK_DIR` (default
//! `~/.cache/antler/langgraph-sdk`: `python/` and `js/`). Without them (or without python3 or
//! node) the test skips loudly; `.ci/run` sets `ANTLER_REQUIRE_LANGGRAPH_SDK=1`, which makes
//! that a failure instead.

use std::path::{Path, PathBuf};
use std::time::Duration;

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::daemon::{Setup, TOKEN_A};

/// The custom agent the scenarios use as `assistant_id`; its soul carries a marker the fake
/// model looks for, so the answer proves the agent's prompt was used.
const AGENT: &str = "scenario-agent";
const SOUL_MARKER: &str = "SOUL-MARKER-7c1f";

/// How long one scenario may take, end to end (it waits for about twenty runs).
const SCENARIO_LIMIT: Duration = Duration::from_secs(240);

/// Where the SDKs are, or `None` (after a loud message) when they or their interpreters are
/// missing and `ANTLER_REQUIRE_LANGGRAPH_SDK` is not set.
fn sdk_dir() -> Option<PathBuf> {
    let required = std::env::var("ANTLER_REQUIRE_LANGGRAPH_SDK").is_ok_and(|v| v == "1");
    let dir = std::env::var_os("ANTLER_LANGGRAPH_SDK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/antler/langgraph-sdk")
        });
    let runs = |program: &str| {
        std::process::Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|output| output.status.success())
    };
    let mut missing = Vec::new();
    if !runs("python3") {
        missing.push("python3".to_owned());
    }
    if !runs("node") {
        missing.push("node".to_owned());
    }
    for part in [
        "python/langgraph_sdk/__init__.py",
        "js/node_modules/@langchain/langgraph-sdk/dist/index.js",
    ] {
        if !dir.join(part).is_file() {
            missing.push(dir.join(part).display().to_string());
        }
    }
    if missing.is_empty() {
        return Some(dir);
    }
    assert!(
        !required,
        "ANTLER_REQUIRE_LANGGRAPH_SDK=1 but {} missing; run .ci/run to install the SDKs",
        missing.join(", ")
    );
    println!(
        "\n!!! SKIPPED: {} missing, so the LangGraph SDK scenarios did not run. Run .ci/run \
         (it installs langgraph-sdk and @langchain/langgraph-sdk) to run them. !!!\n",
        missing.join(", ")
    );
    None
}

/// The text of a chat message's content (a string, or text parts).
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The fake model's answer to one request, chosen by what the scenario asked: a plan and a tool step,
/// a clarification, a slow answer to cancel, the custom agent's answer, else an echo.
fn answer(body: &Value) -> Reply {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if messages.last().is_some_and(|m| m["role"] == "tool") {
        let called = messages
            .iter()
            .rev()
            .find_map(|m| m["tool_calls"][0]["function"]["name"].as_str())
            .unwrap_or_default();
        return if called == "write_todos" {
            Reply::tool_call(
                "write_file",
                json!({"path": "/mnt/user-data/outputs/sdk.txt", "content": "from the sdk"}),
            )
        } else {
            Reply::chunks(["Wrote ", "the file."])
        };
    }
    let asked = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(text_of)
        .unwrap_or_default();
    let system = messages
        .iter()
        .filter(|m| m["role"] == "system")
        .map(text_of)
        .collect::<String>();
    if asked.contains("who are you") && system.contains(SOUL_MARKER) {
        Reply::text("I am the scenario agent.")
    } else if asked.contains("use a tool") {
        // A plan first (its `todos_updated` is the stream's `custom` event), then the file.
        Reply::tool_call(
            "write_todos",
            json!({"todos": [{"content": "Write the file", "status": "completed"}]}),
        )
    } else if asked.contains("ask me") {
        Reply::tool_call(
            "ask_clarification",
            json!({"question": "PDF or Markdown?", "clarification_type": "approach_choice", "options": ["PDF", "Markdown"]}),
        )
    } else if asked.contains("be slow") {
        Reply::slow(vec!["tick "; 80], Duration::from_millis(250))
    } else {
        let said = asked.lines().last().unwrap_or_default();
        Reply::chunks(["You said: ".to_owned(), said.to_owned()])
    }
}

/// Runs one scenario to its end (killed past the limit) and returns its exit success and
/// its output.
async fn run_scenario(mut command: tokio::process::Command, name: &str) -> (bool, String) {
    let run = command
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(SCENARIO_LIMIT, run)
        .await
        .unwrap_or_else(|_| panic!("the {name} scenario did not finish in {SCENARIO_LIMIT:?}"))
        .unwrap_or_else(|error| panic!("could not start the {name} scenario: {error}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("==== {name} scenario\n{text}");
    (output.status.success(), text)
}

/// A scenario command with the daemon's address, token and bases in its environment, and no
/// LangSmith key the SDKs would pick up on their own.
fn scenario(
    program: &str,
    script: &Path,
    sdk: &Path,
    url: &str,
    bases: [&str; 2],
    tag: &str,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    command
        .arg(script)
        .env("PYTHONPATH", sdk.join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("ANTLER_LANGGRAPH_SDK_DIR", sdk)
        .env("ANTLER_URL", url)
        .env("ANTLER_TOKEN", TOKEN_A)
        .env("ANTLER_BASE", bases[0])
        .env("ANTLER_OTHER_BASE", bases[1])
        .env("ANTLER_AGENT", AGENT)
        .env("ANTLER_TAG", tag)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env_remove("LANGGRAPH_API_KEY")
        .env_remove("LANGSMITH_API_KEY")
        .env_remove("LANGCHAIN_API_KEY");
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_and_js_sdks_drive_the_daemon_unchanged() {
    let Some(sdk) = sdk_dir() else { return };
    let fake = FakeOpenAi::start().await;
    fake.respond_with(answer);
    // The caller creates its own agent, as DeerFlow's users do.
    let setup = Setup::new(&fake.base_url(), "agents:\n  self_service: true\n");
    let daemon = setup.start();

    let created = daemon
        .post("/api/agents", TOKEN_A)
        .json(&json!({
            "name": AGENT,
            "description": "The scenario agent, for the SDK tests",
            "soul": format!("# Scenario agent\n\nYou answer the SDK scenario. {SOUL_MARKER}\n"),
        }))
        .send()
        .await
        .unwrap();
    assert!(created.status().is_success(), "{:?}", created.text().await);

    let scripts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/langgraph/sdk");
    let python = scenario(
        "python3",
        &scripts.join("scenario.py"),
        &sdk,
        &daemon.base,
        ["/api", "/api/langgraph"],
        "python",
    );
    let node = scenario(
        "node",
        &scripts.join("scenario.mjs"),
        &sdk,
        &daemon.base,
        ["/api/langgraph", "/api"],
        "js",
    );
    let ((python_ok, python_out), (node_ok, node_out)) =
        tokio::join!(run_scenario(python, "python"), run_scenario(node, "js"));

    for (name, ok, out) in [
        ("python", python_ok, &python_out),
        ("js", node_ok, &node_out),
    ] {
        let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL ")).collect();
        assert!(
            ok && failed.is_empty(),
            "the {name} scenario failed:\n{}",
            failed.join("\n")
        );
        for needle in [
            "PASS assistants.search: ",
            "PASS runs.stream: ",
            "PASS runs.cancel: \"interrupted\"",
            "PASS runs.wait(thread_id=None): \"You said: stateless hello\"",
            "I am the scenario agent.",
            &format!("SUMMARY {name}: 0 failed"),
        ] {
            let needle = if name == "js" {
                needle.replace("thread_id=None", "threadId=null")
            } else {
                needle.to_owned()
            };
            assert!(
                out.contains(&needle),
                "{needle:?} missing from the {name} scenario's output"
            );
        }
    }
}
