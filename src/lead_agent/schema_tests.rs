//! Every tool a lead agent can hand the model, checked for what the model reads: properties
//! in declared order, plain JSON Schema, no internal comments.

use serde_json::Value;

use super::*;

/// Every tool any branch can hand the model: the configured kinds (the web tools added), the
/// middlewares' (`ask_clarification`, `write_todos`, `present_files`), `task`, `setup_agent`,
/// `update_agent` and `schedule_task`.
fn every_builtin_tool() -> Vec<ToolRef> {
    let f = fixture(|config| {
        let kinds = [
            "bash",
            "ls",
            "read_file",
            "write_file",
            "str_replace",
            "glob",
            "grep",
            "view_image",
            "web_search",
            "web_fetch",
        ];
        for kind in kinds {
            config.tools.push(crate::config::ToolConfig {
                name: kind.into(),
                group: None,
                use_kind: kind.into(),
                params: Default::default(),
            });
        }
    });
    f.create("root", "reviewer", |_| {});
    let planning = RunOptions {
        model_name: Some("seer".into()),
        is_plan_mode: true,
        subagent_enabled: true,
        ..Default::default()
    };
    let bootstrap = RunOptions {
        is_bootstrap: true,
        agent_name: Some("new-bot".into()),
        ..Default::default()
    };
    let mut tools: Vec<ToolRef> = Vec::new();
    for options in [planning, bootstrap, custom("reviewer")] {
        let lead = f.build("root", options).unwrap();
        for tool in lead.agent.tools {
            if !tools.iter().any(|t| t.name() == tool.name()) {
                tools.push(tool);
            }
        }
    }
    tools
}

/// The properties of each tool's arguments in the order their structs declare them.
const DECLARED_ORDER: [(&str, &[&str]); 18] = [
    ("bash", &["description", "command"]),
    ("ls", &["description", "path"]),
    (
        "read_file",
        &["description", "path", "start_line", "end_line"],
    ),
    ("write_file", &["description", "path", "content", "append"]),
    (
        "str_replace",
        &["description", "path", "old_str", "new_str", "replace_all"],
    ),
    (
        "glob",
        &[
            "description",
            "pattern",
            "path",
            "include_dirs",
            "max_results",
        ],
    ),
    (
        "grep",
        &[
            "description",
            "pattern",
            "path",
            "glob",
            "literal",
            "case_sensitive",
            "max_results",
        ],
    ),
    ("view_image", &["description", "path"]),
    ("web_search", &["query", "max_results"]),
    ("web_fetch", &["url"]),
    ("present_files", &["filepaths"]),
    (
        "task",
        &["description", "prompt", "subagent_type", "max_turns"],
    ),
    ("write_todos", &["todos"]),
    (
        "ask_clarification",
        &["question", "clarification_type", "context", "options"],
    ),
    ("setup_agent", &["soul", "description", "skills"]),
    (
        "update_agent",
        &["soul", "description", "skills", "tool_groups", "model"],
    ),
    ("tool_search", &["query", "max_results"]),
    (
        "schedule_task",
        &[
            "action", "prompt", "when", "timezone", "name", "catch_up", "deliver", "id",
        ],
    ),
];

/// Every schema node below `schema` (itself included).
fn schema_nodes(schema: &Value, out: &mut Vec<serde_json::Map<String, Value>>) {
    match schema {
        Value::Object(node) => {
            out.push(node.clone());
            node.values().for_each(|child| schema_nodes(child, out));
        }
        Value::Array(items) => items.iter().for_each(|child| schema_nodes(child, out)),
        _ => {}
    }
}

#[test]
fn every_builtin_tool_schema_is_plain_json_schema_in_declared_order() {
    let mut tools = every_builtin_tool();
    let catalog = DeferredCatalog::new(&[]);
    tools.push(Arc::new(crate::mcp::ToolSearchTool::new(catalog)));
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    let declared: Vec<&str> = DECLARED_ORDER.iter().map(|(name, _)| *name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    let mut expected = declared.clone();
    expected.sort_unstable();
    assert_eq!(sorted, expected, "every built-in tool is checked");
    for tool in &tools {
        let schema = tool.parameters();
        let (_, order) = DECLARED_ORDER
            .iter()
            .find(|(name, _)| *name == tool.name())
            .unwrap();
        let properties: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(properties, *order, "{}", tool.name());
        let text = schema.to_string();
        for internal in [
            "Arguments of",
            "the schema the model sees",
            "$schema",
            "title",
        ] {
            assert!(!text.contains(internal), "{}: {text}", tool.name());
        }
        assert!(
            schema.get("description").is_none(),
            "{}: {text}",
            tool.name()
        );
        let mut nodes = Vec::new();
        schema_nodes(&schema, &mut nodes);
        for node in nodes {
            assert!(node.get("format").is_none(), "{}: {text}", tool.name());
            assert!(node.get("anyOf").is_none(), "{}: {text}", tool.name());
            if let Some(kind) = node.get("type") {
                assert!(kind.is_string(), "{}: a plain type: {text}", tool.name());
            }
            if let Some(values) = node.get("enum").and_then(Value::as_array) {
                assert!(
                    !values.iter().any(Value::is_null),
                    "{}: {text}",
                    tool.name()
                );
            }
        }
    }
    let write_file = tools.iter().find(|t| t.name() == "write_file").unwrap();
    assert!(
        write_file
            .description()
            .contains("at most 80 KB unless append=true"),
        "{}",
        write_file.description()
    );
    let web_fetch = tools.iter().find(|t| t.name() == "web_fetch").unwrap();
    assert!(
        web_fetch
            .description()
            .contains("Only fetch exact URLs the user gave or that web_search returned")
            && web_fetch.description().contains("scheme"),
        "{}",
        web_fetch.description()
    );
}
