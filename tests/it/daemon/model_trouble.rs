//! Model trouble shows early and in one sentence: an unreachable model is a warning before
//! "Antler is ready", a model id the server does not serve is named by `antler status` with
//! the ids it does serve, and a chat turn against it or with a refused key says what to set
//! (the shipped config's variables) instead of printing the provider's JSON.

use std::path::Path;

use antler_test_support::FakeOpenAi;

use super::cli::antler;
use super::{Daemon, Setup};

/// `setup`'s model read from the shipped config's variables, as `config.yaml` does.
fn model_from_variables(setup: &Setup, url: &str) {
    let yaml = std::fs::read_to_string(&setup.config_path).unwrap();
    let yaml = yaml
        .replacen("    model: fake-model\n", "    model: ${ANTLER_MODEL:-fake-model}\n", 1)
        .replacen(
            &format!("    base_url: {url}\n"),
            &format!("    base_url: ${{ANTLER_MODEL_URL:-{url}}}\n    api_key: ${{ANTLER_MODEL_API_KEY:-}}\n"),
            1,
        );
    std::fs::write(&setup.config_path, yaml).unwrap();
}

/// `antler chat` through the running daemon: what it prints for `input`.
async fn chat(config: &Path, input: &str) -> String {
    let output = antler(config, &["chat"], input).await;
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn status(config: &Path) -> String {
    let output = antler(config, &["status"], "").await;
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_model_is_a_warning_before_ready_naming_the_variable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let setup = Setup::new(&url, "");
    model_from_variables(&setup, &url);
    let log = setup.dir.path().join("daemon.log");
    let _daemon = Daemon::spawn(&setup.config_path, &[("RUST_LOG", "info")], Some(&log));
    let logged = std::fs::read_to_string(&log).unwrap();
    let warning = logged
        .lines()
        .position(|line| line.contains("WARN") && line.contains("default model is unreachable"))
        .unwrap_or_else(|| panic!("no warning in\n{logged}"));
    let ready = logged
        .lines()
        .position(|line| line.contains("Antler is ready"))
        .unwrap_or_else(|| panic!("not ready in\n{logged}"));
    assert!(warning < ready, "{logged}");
    let line = logged.lines().nth(warning).unwrap();
    assert!(line.contains("cannot connect"), "{line}");
    assert!(line.contains("set ANTLER_MODEL_URL"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_id_the_server_does_not_serve_is_named_by_status_and_the_chat() {
    let fake = FakeOpenAi::start().await;
    fake.serve_models(&["qwen2.5:7b", "llama3.1"]);
    let setup = Setup::new(&fake.base_url(), "");
    model_from_variables(&setup, &fake.base_url());
    let log = setup.dir.path().join("daemon.log");
    let _daemon = Daemon::spawn(&setup.config_path, &[("ANTLER_MODEL", "qwen9")], Some(&log));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("model id 'qwen9' is not served at"),
        "no warning at start:\n{logged}"
    );

    let out = status(&setup.config_path).await;
    let expected = format!(
        "reachable, but model id 'qwen9' is not served at {}; it serves: qwen2.5:7b, llama3.1; \
         set ANTLER_MODEL to one of them",
        fake.base_url()
    );
    assert!(out.contains(&expected), "{out}");

    let out = chat(&setup.config_path, "hello\n").await;
    let expected = format!(
        "error: model id 'qwen9' is not served at {} (HTTP 404); set ANTLER_MODEL to a model id \
         that server has (`antler status` lists them)",
        fake.base_url()
    );
    assert!(out.contains(&expected), "{out}");
    assert!(!out.contains("{\"error\""), "the provider's JSON: {out}");
    assert!(!out.contains("model_not_found"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_names_the_variable_in_status_and_the_chat() {
    let fake = FakeOpenAi::start().await;
    fake.require_api_key("sk-good-123");
    let setup = Setup::new(&fake.base_url(), "");
    model_from_variables(&setup, &fake.base_url());
    let _daemon = Daemon::spawn(
        &setup.config_path,
        &[("ANTLER_MODEL_API_KEY", "sk-bad-456")],
        None,
    );
    let out = status(&setup.config_path).await;
    assert!(
        out.contains(
            "reachable, but the endpoint refused the API key (HTTP 401); set \
             ANTLER_MODEL_API_KEY to a key it accepts"
        ),
        "{out}"
    );
    let out = chat(&setup.config_path, "hello\n").await;
    let expected = format!(
        "error: model 'fake' at {} refused the API key (HTTP 401); set ANTLER_MODEL_API_KEY to \
         a key that server accepts",
        fake.base_url()
    );
    assert!(out.contains(&expected), "{out}");
    assert!(
        !out.contains("sk-bad") && !out.contains("Incorrect API key"),
        "{out}"
    );
}
