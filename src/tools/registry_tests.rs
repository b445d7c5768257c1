//! Tests of the tool registry: groups, configured tools and external tools.

use super::*;
use crate::config::{SandboxConfig, ToolGroupConfig};
use crate::sandbox::{ExecMode, HostSandboxProvider, ProviderSettings};
use serde_json::json;

fn provider() -> Arc<dyn SandboxProvider> {
    Arc::new(HostSandboxProvider::new(
        ProviderSettings {
            data_dir: std::env::temp_dir(),
            skills_dir: None,
            skill_mounts: None,
            sandbox: SandboxConfig::default(),
            host_env: Vec::new(),
            instance: None,
        },
        ExecMode::Local { allow_bash: false },
    ))
}

fn names(tools: &[ToolRef]) -> Vec<&str> {
    tools.iter().map(|t| t.name()).collect()
}

fn tool(name: &str, group: Option<&str>, kind: &str, params: Value) -> ToolConfig {
    ToolConfig {
        name: name.into(),
        group: group.map(str::to_string),
        use_kind: kind.into(),
        params: serde_json::from_value(params).unwrap(),
    }
}

#[test]
fn defaults_cover_the_reference_tools_and_groups_filter_them() {
    let registry = ToolRegistry::from_config(&AppConfig::default(), provider()).unwrap();
    assert_eq!(
        names(registry.all()),
        [
            "ls",
            "read_file",
            "glob",
            "grep",
            "write_file",
            "str_replace",
            "bash",
            "web_search",
            "web_fetch",
            "present_files"
        ]
    );
    let read_only = registry.tools_for_groups(Some(&["file:read".to_string()]));
    assert_eq!(
        names(&read_only),
        ["ls", "read_file", "glob", "grep", "present_files"]
    );
    assert_eq!(
        names(&registry.tools_for_groups(Some(&[]))),
        ["present_files"]
    );
    assert_eq!(
        names(&registry.tools_for_groups(Some(&["web".to_string()]))),
        ["web_search", "web_fetch", "present_files"]
    );
    assert_eq!(registry.tools_for_groups(None).len(), 10);
}

#[test]
fn config_tools_win_over_builtins_and_external_ones() {
    let config = AppConfig {
        tools: vec![
            tool("shell", Some("bash"), "bash", json!({"timeout_seconds": 5})),
            tool("present_files", None, "ls", json!({})),
        ],
        ..Default::default()
    };
    let mut registry = ToolRegistry::from_config(&config, provider()).unwrap();
    assert_eq!(names(registry.all()), ["shell", "present_files"]);
    assert_eq!(
        registry.all()[1].description(),
        "List the contents of a directory up to 2 levels deep, directories ending in '/'."
    );
    registry.add_external(vec![
        Arc::new(PresentFilesTool::new("/data".into())) as ToolRef
    ]);
    assert_eq!(names(registry.all()), ["shell", "present_files"]);
}

#[test]
fn config_errors_are_all_reported() {
    let config = AppConfig {
        tool_groups: vec![ToolGroupConfig {
            name: "bash".into(),
        }],
        tools: vec![
            tool("a", None, "web_search_9000", json!({})),
            tool("b", Some("file:read"), "ls", json!({})),
            tool("c", None, "bash", json!({"colour": "red"})),
            tool("d", None, "bash", json!({"timeout_seconds": "soon"})),
        ],
        ..Default::default()
    };
    let Err(problems) = ToolRegistry::from_config(&config, provider()) else {
        panic!("bad config accepted");
    };
    assert_eq!(problems.len(), 4);
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert!(text[0].contains("unknown `use: web_search_9000`; use one of bash, ls"));
    assert!(text[1].contains("group `file:read` is not in tool_groups"));
    assert!(text[2].contains("unknown parameter `colour`"));
    assert!(text[3].contains("parameter `timeout_seconds` is invalid"));
}

#[test]
fn yaml_tool_entries_keep_their_parameters() {
    let yaml = r#"
models:
  - name: default
    provider: openai
    model: m
    base_url: http://127.0.0.1:1/v1
sandbox:
  provider: local
  allow_host_bash: true
  mounts:
    - host_path: /srv/ref
      container_path: /mnt/ref
      read_only: true
tool_groups:
  - name: bash
  - name: file:read
tools:
  - name: bash
    group: bash
    use: bash
    timeout_seconds: 30
  - name: read_file
    group: file:read
    use: read_file
"#;
    let loaded = crate::config::load_from_str(
        yaml,
        crate::config::ConfigOrigin::Embedded,
        &crate::config::MapEnv::new(),
        std::path::Path::new("/"),
    )
    .unwrap();
    let config = loaded.config;
    assert_eq!(
        config.sandbox.provider,
        crate::config::SandboxProviderKind::Local
    );
    assert!(config.sandbox.mounts[0].read_only);
    assert_eq!(config.tools[0].params["timeout_seconds"], json!(30));
    let registry = ToolRegistry::from_config(&config, provider()).unwrap();
    assert_eq!(
        names(registry.all()),
        ["bash", "read_file", "present_files"]
    );
}

#[test]
fn view_image_is_only_for_vision_models_and_a_tools_list_replaces_the_defaults() {
    let defaults = ToolRegistry::from_config(&AppConfig::default(), provider()).unwrap();
    assert_eq!(names(defaults.vision_tools()), ["view_image"]);
    assert!(
        !names(&defaults.tools_for_model(None, false)).contains(&"view_image"),
        "a model without vision got view_image"
    );
    assert_eq!(
        names(&defaults.tools_for_model(Some(&[]), true)),
        ["present_files", "view_image"]
    );

    let config = AppConfig {
        tools: vec![
            tool(
                "web_search",
                Some("web"),
                "web_search",
                json!({"provider": "tavily", "api_key": "k", "max_results": 3}),
            ),
            tool(
                "web_fetch",
                Some("web"),
                "web_fetch",
                json!({"max_chars": 500}),
            ),
            tool("look", Some("file:read"), "view_image", json!({})),
        ],
        ..Default::default()
    };
    let mut registry = ToolRegistry::from_config(&config, provider()).unwrap();
    assert_eq!(
        names(registry.all()),
        ["web_search", "web_fetch", "present_files"]
    );
    assert_eq!(names(registry.vision_tools()), ["look", "view_image"]);
    let web_only = registry.tools_for_model(Some(&["web".to_string()]), true);
    assert_eq!(
        names(&web_only),
        ["web_search", "web_fetch", "present_files", "view_image"]
    );
    registry.add_external(vec![
        Arc::new(PresentFilesTool::new("/data".into())) as ToolRef
    ]);
    assert_eq!(registry.all().len(), 3);

    let bad = AppConfig {
        tools: vec![tool("s", None, "web_search", json!({"provider": "tavily"}))],
        ..Default::default()
    };
    let Err(problems) = ToolRegistry::from_config(&bad, provider()) else {
        panic!("tavily without a key accepted");
    };
    assert!(problems[0].to_string().contains("needs `api_key`"));
}

#[test]
fn approvals_checks_group_patterns_against_the_same_default_groups() {
    assert_eq!(
        DEFAULT_TOOL_GROUPS,
        crate::config::approvals::DEFAULT_GROUPS.as_slice()
    );
}
