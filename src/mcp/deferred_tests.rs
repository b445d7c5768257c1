use super::*;
use crate::tools::FnTool;

fn tool(name: &str, description: &str) -> ToolRef {
    Arc::new(FnTool::new(name, description, |_args| async {
        Ok(ToolOutput::text("ok"))
    }))
}

fn catalog() -> Arc<DeferredCatalog> {
    DeferredCatalog::new(&[
        tool("github_create_issue", "Create an issue in a repository"),
        tool("github_list_issues", "List the issues of a repository"),
        tool("weather_forecast", "Weather forecast for a city"),
    ])
}

fn names(found: Vec<&Arc<ToolSpec>>) -> Vec<String> {
    found.into_iter().map(|s| s.name.clone()).collect()
}

#[test]
fn keywords_rank_name_hits_above_description_hits() {
    let catalog = catalog();
    assert_eq!(
        names(catalog.search("issue create", 5)),
        ["github_create_issue", "github_list_issues"]
    );
    assert_eq!(names(catalog.search("city", 5)), ["weather_forecast"]);
    assert!(catalog.search("database", 5).is_empty());
    assert_eq!(catalog.search("issue", 1).len(), 1);
}

#[test]
fn select_picks_exact_names_only() {
    let catalog = catalog();
    assert_eq!(
        names(catalog.search("select:weather_forecast, github_list_issues, nope", 5)),
        ["github_list_issues", "weather_forecast"]
    );
}

#[test]
fn a_tool_is_hidden_until_promoted_in_the_state() {
    let catalog = catalog();
    let mut state = ThreadState::default();
    assert!(catalog.is_hidden("weather_forecast", &state));
    assert!(
        !catalog.is_hidden("bash", &state),
        "only deferred tools hide"
    );
    state
        .apply(StateUpdate {
            promoted_tools: vec!["weather_forecast".into()],
            ..Default::default()
        })
        .unwrap();
    assert!(!catalog.is_hidden("weather_forecast", &state));
    assert!(catalog.is_hidden("github_list_issues", &state));
}

#[test]
fn old_checkpoints_without_promoted_tools_still_load() {
    let state: ThreadState = serde_json::from_value(json!({"messages": [], "title": "t"})).unwrap();
    assert!(state.promoted_tools.is_empty());
}
