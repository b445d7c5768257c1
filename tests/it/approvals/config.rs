//! `approvals:` as an operator writes it: read from YAML (a keyword or a list of approvers),
//! the defaults kept for keys left out, and every problem named by its key.

use std::path::Path;

use antler::config::approvals::{ApproverKind, ApproversSetting};
use antler::config::{AppConfig, ConfigOrigin, MapEnv, load_from_str};

fn load_ok(text: &str) -> AppConfig {
    match load_from_str(
        text,
        ConfigOrigin::Embedded,
        &MapEnv::new(),
        Path::new("/work"),
    ) {
        Ok(loaded) => loaded.config,
        Err(error) => panic!("expected a valid config, got: {error}"),
    }
}

fn paths(text: &str) -> Vec<String> {
    match load_from_str(
        text,
        ConfigOrigin::Embedded,
        &MapEnv::new(),
        Path::new("/work"),
    ) {
        Ok(_) => panic!("expected problems in:\n{text}"),
        Err(error) => error.problems().iter().map(|p| p.path.clone()).collect(),
    }
}

#[test]
fn approvals_load_from_yaml_and_report_problems_by_key() {
    let base = "config_version: 1\nmodels:\n  - name: m\n    model: x\n    base_url: http://127.0.0.1:1/v1\n";
    let config = load_ok(&format!(
        "{base}approvals:\n  tools: [bash, \"mcp:github_*\"]\n  approvers: [alice, bob]\n  timeout_minutes: 5\n"
    ));
    assert_eq!(config.approvals.tools, ["bash", "mcp:github_*"]);
    assert_eq!(
        config.approvals.approvers,
        ApproversSetting::Users(vec!["alice".into(), "bob".into()])
    );
    assert_eq!(
        config.approvals.when_untrusted,
        [
            "bash",
            "web_fetch",
            "group:mcp",
            "write_file",
            "str_replace"
        ],
        "the default stays while only other keys are set"
    );
    let config = load_ok(&format!("{base}approvals:\n  approvers: admins\n"));
    assert_eq!(
        config.approvals.approvers,
        ApproversSetting::Named(ApproverKind::Admins)
    );
    assert_eq!(
        paths(&format!(
            "{base}approvals:\n  when_untrusted: [\"group:nope\"]\n  timeout_minutes: 0\n"
        )),
        ["approvals.when_untrusted[0]", "approvals.timeout_minutes"]
    );
}
