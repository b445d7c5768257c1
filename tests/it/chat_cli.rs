//! `antler chat` driven through stdin, as a person would type, against the fake model.

use std::io::Write;
use std::process::{Command, Stdio};

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::json;

fn config(dir: &std::path::Path, model_url: &str) -> std::path::PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "data_dir: {}\nmodels:\n  - name: fake\n    model: fake-model\n    base_url: {model_url}\nllm_call:\n  retry_max_attempts: 1\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    path
}

fn chat(config: &std::path::Path, args: &[&str], input: &str) -> (String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_antler"))
        .arg("--config")
        .arg(config)
        .arg("chat")
        .args(args)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "chat exited with {:?}",
        output.status
    );
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn thread_id(stdout: &str) -> String {
    stdout
        .split_whitespace()
        .skip_while(|w| *w != "thread")
        .nth(1)
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_answers_from_the_model_and_resumes_threads() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::chunks(["Hello ", "from the fake."]))
        .push(Reply::text("A fresh start."))
        .push(Reply::text("Still here."));
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake.base_url());

    let (stdout, _) = chat(&config, &[], "hi there\n/new\nsecond thread\n");
    assert!(stdout.contains("Hello from the fake."), "{stdout}");
    assert!(stdout.contains("New conversation started"), "{stdout}");
    assert!(stdout.contains("A fresh start."), "{stdout}");
    let first = thread_id(&stdout);

    // The first thread's history is sent again when it is resumed.
    let (stdout, _) = chat(&config, &["--thread", &first], "and again\n");
    assert!(stdout.contains("Still here."), "{stdout}");
    let last = fake.requests().pop().unwrap();
    let contents: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(contents.contains(&"hi there"), "{contents:?}");
    assert!(contents.contains(&"Hello from the fake."), "{contents:?}");
    assert!(!contents.contains(&"second thread"), "{contents:?}");
    assert_eq!(fake.unscripted_calls(), 0);
}

#[test]
fn an_unreachable_model_says_so_and_names_the_variables() {
    let dir = tempfile::tempdir().unwrap();
    // Port 9 (discard) on loopback: nothing listens there.
    let config = config(dir.path(), "http://127.0.0.1:9/v1");
    let (stdout, _) = chat(&config, &[], "hello?\n");
    assert!(stdout.contains("could not reach model"), "{stdout}");
    assert!(stdout.contains("http://127.0.0.1:9/v1"), "{stdout}");
    // The config names the URL itself, so the key is what to change.
    assert!(stdout.contains("set models[0].base_url"), "{stdout}");
}

#[test]
fn thread_ids_are_checked_and_an_unknown_one_starts_a_thread_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "http://127.0.0.1:9/v1");
    let bad = Command::new(env!("CARGO_BIN_EXE_antler"))
        .arg("--config")
        .arg(&config)
        .args(["chat", "--thread", "../../etc"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("invalid thread id \"../../etc\""),
        "{stderr}"
    );

    let (stdout, _) = chat(&config, &["--thread", "notes-1"], "");
    assert!(
        stdout.starts_with(
            "No conversation has the id notes-1 yet: starting a new one under that id.\n"
        ),
        "{stdout}"
    );
    let (stdout, _) = chat(&config, &["--thread", "notes-1"], "");
    assert!(
        stdout.starts_with("antler chat: thread notes-1 "),
        "{stdout}"
    );
}

/// In-process too, a model id the server does not serve is one sentence naming what to set,
/// not the provider's JSON body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_id_the_server_does_not_serve_is_one_sentence_in_the_chat() {
    let fake = FakeOpenAi::start().await;
    fake.serve_models(&["qwen2.5:7b"]);
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &fake.base_url());
    let yaml = std::fs::read_to_string(&path)
        .unwrap()
        .replace("model: fake-model", "model: qwen9");
    std::fs::write(&path, yaml).unwrap();
    let (stdout, _) = chat(&path, &[], "hello?\n");
    assert!(
        stdout.contains(&format!(
            "error: model id 'qwen9' is not served at {} (HTTP 404); set models[0].model to a \
             model id that server has",
            fake.base_url()
        )),
        "{stdout}"
    );
    assert!(!stdout.contains("{\"error\""), "{stdout}");
}

/// The names of the tools a model request offered.
fn tools_offered(request: &serde_json::Value) -> Vec<String> {
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

/// The chat commands every surface has work in the console: none of them reaches the model,
/// the settings they change apply to the next turn, and the log stays out of the conversation
/// (a file in the data dir).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_commands_work_in_the_console_and_logs_stay_out_of_it() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("Planned."));
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake.base_url());
    let input = "/help\n/plan on\n/status\n/model fake\n/model nosuch\n/models\n/memory\n\
                 /usage\n/skills\n/agent\n/agent nobody\nmake a plan\n/new\n/plan\n/cancel\n";
    let (stdout, stderr) = chat(&config, &[], input);
    for needle in [
        "/memory [facts] — What I remember about you",
        "/quit — Leave the chat",
        "Plan mode on.",
        "Plan mode: on",
        "Model: fake",
        "This chat now uses fake.",
        "Unknown model nosuch. Use /models to list them.",
        "Available models:\n• fake (default)",
        "I don't remember anything about you yet.",
        "No token usage recorded",
        "You have no agents yet. Use /bootstrap to create one.",
        "You have no agent named nobody.",
        "Planned.",
        "New conversation started.",
        "Now in thread ",
        "Plan mode is on.",
        "Nothing is running in this chat.",
    ] {
        assert!(
            stdout.contains(needle),
            "{needle:?} missing from:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("Skills you can use here") || stdout.contains("No skills are available"),
        "{stdout}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "only the message reached the model");
    let tools = tools_offered(&requests[0]);
    assert!(
        tools.contains(&"write_todos".to_string()),
        "plan mode: {tools:?}"
    );
    let asked: Vec<String> = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert!(asked.iter().all(|text| !text.starts_with('/')), "{asked:?}");
    // Logs go to the data dir's file, not between the answers.
    for line in stdout.lines() {
        assert!(
            !line.contains(" INFO ") && !line.contains(" WARN ") && !line.contains("antler::"),
            "a log line in the chat: {line}"
        );
    }
    let log = dir.path().join("data").join("logs").join("chat.log");
    assert!(stderr.contains(&log.display().to_string()), "{stderr}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.is_empty(), "the log file stayed empty");
}

/// A presented file says where to get it: in process, its path on this machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presented_file_shows_where_to_get_it() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call(
        "write_file",
        json!({"path": "/mnt/user-data/outputs/report.md", "content": "# Report\n"}),
    ))
    .push(Reply::tool_call(
        "present_files",
        json!({"filepaths": ["/mnt/user-data/outputs/report.md"]}),
    ))
    .push(Reply::text("Here it is."));
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake.base_url());
    let (stdout, _) = chat(&config, &[], "write a report\n");
    let thread = thread_id(&stdout);
    let host = dir
        .path()
        .join("data/users/local/threads")
        .join(&thread)
        .join("user-data/outputs/report.md");
    let expected = format!(
        "[file] /mnt/user-data/outputs/report.md: {}",
        host.display()
    );
    assert!(
        stdout.contains(&expected),
        "{expected:?} missing from:\n{stdout}"
    );
    assert_eq!(std::fs::read_to_string(&host).unwrap(), "# Report\n");
    assert_eq!(fake.unscripted_calls(), 0);
}

/// `/bootstrap` in the console without a name: the model asks for one, the answer goes on with
/// the bootstrap, `setup_agent` creates the agent under the chosen name, and the session then
/// talks to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_in_the_console_asks_for_a_name_then_talks_to_the_new_agent() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("What shall we call your agent?"))
        .push(Reply::tool_call(
            "setup_agent",
            json!({"name": "scribe", "soul": "**Identity**\nScribe.\n", "description": "Takes notes"}),
        ))
        .push(Reply::text("Scribe is ready."))
        .push(Reply::text("Scribe here."));
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake.base_url());
    let (stdout, _) = chat(&config, &[], "/bootstrap\nscribe\nhello\n/status\n");
    for needle in [
        "What shall we call your agent?",
        "Scribe is ready.",
        "[agent] scribe is set up; this conversation now talks to it.",
        "Scribe here.",
        "Agent: scribe\n",
    ] {
        assert!(
            stdout.contains(needle),
            "{needle:?} missing from:\n{stdout}"
        );
    }
    let requests = fake.requests();
    let prompt = |i: usize| {
        requests[i]["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(prompt(0).contains("has no name yet"), "{}", prompt(0));
    assert_eq!(
        requests[0]["messages"].as_array().unwrap().last().unwrap()["content"],
        "Set up a new agent."
    );
    assert!(
        prompt(1).contains("<bootstrap>"),
        "the answer is the bootstrap's"
    );
    assert!(prompt(3).contains("You are scribe,"), "{}", prompt(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_call_is_shown_in_the_console_and_approve_runs_it_in_process() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fake.base_url());
    let yaml = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{yaml}approvals:\n  tools: [bash]\n")).unwrap();

    fake.push(Reply::tool_call(
        "bash",
        json!({"command": "echo ran >> /mnt/user-data/outputs/ran.txt"}),
    ));
    let (stdout, _) = chat(&config, &[], "log a run\n");
    let thread = thread_id(&stdout);
    let prompt = stdout
        .lines()
        .find(|line| line.starts_with("Approval needed ("))
        .unwrap_or_else(|| panic!("no request shown: {stdout}"));
    let id = prompt["Approval needed (".len()..]
        .split(')')
        .next()
        .unwrap()
        .to_string();
    assert!(
        stdout.contains(&format!("Answer /approve {id}, or /deny {id} [reason].")),
        "{stdout}"
    );
    assert_eq!(fake.requests().len(), 1);

    fake.push(Reply::text("Logged."));
    let (stdout, _) = chat(
        &config,
        &["--thread", &thread],
        &format!("/approve {id}\n/approve {id}\n"),
    );
    assert!(stdout.contains("Approved: bash `echo ran"), "{stdout}");
    assert!(stdout.contains("Logged."), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "{id} was already approved by local; nothing changed."
        )),
        "{stdout}"
    );
    assert_eq!(fake.requests().len(), 2, "the repeat ran nothing");
    let ran = dir
        .path()
        .join("data/users/local/threads")
        .join(&thread)
        .join("user-data/outputs/ran.txt");
    assert_eq!(std::fs::read_to_string(ran).unwrap(), "ran\n");
}
