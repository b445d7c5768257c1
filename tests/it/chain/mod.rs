//! Integration tests: chain assembly (`create_agent`, `RuntimeFeatures`, anchors, injected tools);
//! the built-in middlewares' acceptance cases are in `chain/middlewares.rs`, whole runs through
//! the loop in `chain/runs.rs`.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use antler::agent::features::CHAIN_ORDER;
use antler::agent::{Agent, AgentBuildError, AgentOptions, Feature, RuntimeFeatures, create_agent};
use antler::agent_api::{Anchors, Middleware, MiddlewareRef};
use antler::agent_api::{ToolOutput, ToolRef};
use antler::middleware::clarification::ASK_CLARIFICATION;
use antler::model::{ChatModel, ScriptedModel};
use antler::tools::FnTool;

/// A do-nothing middleware with a chosen name and placement.
struct Named {
    name: String,
    anchors: Anchors,
}

#[async_trait]
impl Middleware for Named {
    fn name(&self) -> &str {
        &self.name
    }
    fn anchors(&self) -> Anchors {
        self.anchors.clone()
    }
}

fn named(name: &str) -> MiddlewareRef {
    Arc::new(Named {
        name: name.into(),
        anchors: Anchors::default(),
    })
}

fn after(name: &str, anchor: &str) -> MiddlewareRef {
    Arc::new(Named {
        name: name.into(),
        anchors: Anchors {
            next: Some(anchor.into()),
            prev: None,
        },
    })
}

fn before(name: &str, anchor: &str) -> MiddlewareRef {
    Arc::new(Named {
        name: name.into(),
        anchors: Anchors {
            next: None,
            prev: Some(anchor.into()),
        },
    })
}

fn model() -> Arc<dyn ChatModel> {
    Arc::new(ScriptedModel::text("scripted", "hi"))
}

fn build(options: AgentOptions) -> Result<Agent, AgentBuildError> {
    create_agent(model(), Vec::new(), options)
}

fn with_extras(extras: Vec<MiddlewareRef>) -> Result<Agent, AgentBuildError> {
    build(AgentOptions {
        extra_middleware: extras,
        ..Default::default()
    })
}

fn names(agent: &Agent) -> Vec<String> {
    agent
        .middleware
        .iter()
        .map(|m| m.name().to_string())
        .collect()
}

fn position(agent: &Agent, name: &str) -> usize {
    names(agent).iter().position(|n| n == name).unwrap()
}

// ---- chain assembly -------------------------------------------------------------------------

#[test]
fn middleware_and_features_together_is_an_error() {
    let err = build(AgentOptions {
        middleware: Some(vec![named("A")]),
        features: Some(RuntimeFeatures::default()),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(
        matches!(err, AgentBuildError::MiddlewareAndFeatures),
        "{err}"
    );
}

#[test]
fn explicit_middleware_is_used_as_given() {
    let agent = build(AgentOptions {
        middleware: Some(vec![named("B"), named("A")]),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(names(&agent), ["B", "A"]);
}

#[test]
fn extras_with_an_explicit_chain_is_an_error() {
    let err = build(AgentOptions {
        middleware: Some(vec![named("A")]),
        extra_middleware: vec![named("Extra")],
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(
        matches!(err, AgentBuildError::ExtrasWithExplicitMiddleware { ref middleware } if middleware == "Extra")
    );
}

#[test]
fn built_in_memory_is_an_error() {
    let features = RuntimeFeatures {
        memory: Feature::BuiltIn,
        ..RuntimeFeatures::default()
    };
    let err = build(AgentOptions {
        features: Some(features),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(matches!(
        err,
        AgentBuildError::NoBuiltIn { feature: "memory" }
    ));
    assert!(err.to_string().contains("pass a custom instance"), "{err}");
}

#[test]
fn built_in_summarization_summarizes_with_the_run_model_by_default() {
    let features = RuntimeFeatures {
        summarization: Feature::BuiltIn,
        ..RuntimeFeatures::default()
    };
    let agent = build(AgentOptions {
        features: Some(features),
        ..Default::default()
    })
    .unwrap();
    let names: Vec<&str> = agent.middleware.iter().map(|m| m.name()).collect();
    let at = names.iter().position(|n| *n == "SummarizationMiddleware");
    let tool_errors = names
        .iter()
        .position(|n| *n == "ToolErrorHandlingMiddleware");
    assert!(at > tool_errors, "{names:?}");
}

#[test]
fn both_anchors_is_an_error() {
    let both: MiddlewareRef = Arc::new(Named {
        name: "Both".into(),
        anchors: Anchors {
            next: Some("TitleMiddleware".into()),
            prev: Some("ClarificationMiddleware".into()),
        },
    });
    let err = with_extras(vec![both]).err().unwrap();
    assert!(matches!(err, AgentBuildError::BothAnchors { ref middleware } if middleware == "Both"));
}

#[test]
fn two_extras_claiming_the_same_position_is_an_error() {
    let err = with_extras(vec![
        after("A", "DanglingToolCallMiddleware"),
        after("B", "DanglingToolCallMiddleware"),
    ])
    .err()
    .unwrap();
    assert!(
        matches!(err, AgentBuildError::AnchorConflict { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("A") && err.to_string().contains("B"));

    // "after X" and "before the one right after X" are the same gap.
    let err = with_extras(vec![
        after("A", "DanglingToolCallMiddleware"),
        before("B", "ToolErrorHandlingMiddleware"),
    ])
    .err()
    .unwrap();
    assert!(
        matches!(err, AgentBuildError::AnchorConflict { .. }),
        "{err}"
    );
}

#[test]
fn anchor_to_another_extra_works() {
    // B is listed first but anchors to A, which only exists once A is placed.
    let agent = with_extras(vec![
        after("B", "A"),
        after("A", "ToolErrorHandlingMiddleware"),
    ])
    .unwrap();
    let order = names(&agent);
    let a = position(&agent, "A");
    assert_eq!(order[a - 1], "ToolErrorHandlingMiddleware");
    assert_eq!(order[a + 1], "B");
}

#[test]
fn unresolvable_anchor_is_an_error() {
    let err = with_extras(vec![after("A", "NoSuchMiddleware")])
        .err()
        .unwrap();
    assert!(
        matches!(err, AgentBuildError::UnresolvedAnchor { ref middleware, ref anchor }
            if middleware == "A" && anchor == "NoSuchMiddleware")
    );
    // A disabled middleware is not in the chain either.
    assert!(with_extras(vec![after("A", "TitleMiddleware")]).is_err());
}

#[test]
fn unanchored_extras_go_just_before_the_clarification_tail() {
    let agent = with_extras(vec![named("X"), named("Y")]).unwrap();
    let order = names(&agent);
    assert_eq!(
        &order[order.len() - 6..],
        [
            "X",
            "Y",
            "TerminalResponseMiddleware",
            "ModelLengthFinishReasonMiddleware",
            "SafetyFinishReasonMiddleware",
            "ClarificationMiddleware"
        ]
    );
    assert_eq!(order[order.len() - 7], "LoopDetectionMiddleware");
}

#[test]
fn clarification_stays_last_even_when_an_extra_anchors_after_it() {
    let agent = with_extras(vec![after("Late", "ClarificationMiddleware")]).unwrap();
    let order = names(&agent);
    assert_eq!(order.last().unwrap(), "ClarificationMiddleware");
    assert_eq!(order[order.len() - 2], "Late");
}

#[test]
fn full_feature_set_follows_the_seed_order() {
    let features = RuntimeFeatures {
        sandbox: Feature::BuiltIn,
        memory: Feature::Custom(named("MemoryMiddleware")),
        summarization: Feature::Custom(named("SummarizationMiddleware")),
        subagent: Feature::BuiltIn,
        vision: Feature::BuiltIn,
        auto_title: Feature::BuiltIn,
        guardrail: Feature::Custom(named("GuardrailMiddleware")),
        loop_detection: Feature::BuiltIn,
        token_budget: Feature::BuiltIn,
        dynamic_context: Feature::BuiltIn,
        ..RuntimeFeatures::default()
    };
    let mut config = antler::config::AppConfig::default();
    config.token_budget.enabled = true;
    let agent = build(AgentOptions {
        features: Some(features),
        plan_mode: true,
        config: Some(Arc::new(config)),
        ..Default::default()
    })
    .unwrap();
    let order = names(&agent);
    assert_eq!(
        order,
        [
            "ThreadDataMiddleware",
            "UploadsMiddleware",
            "SandboxMiddleware",
            "DanglingToolCallMiddleware",
            "GuardrailMiddleware",
            "ToolErrorHandlingMiddleware",
            "DynamicContextMiddleware",
            "SummarizationMiddleware",
            "TodoMiddleware",
            "TokenUsageMiddleware",
            "TitleMiddleware",
            "MemoryMiddleware",
            "ViewImageMiddleware",
            "SystemMessageCoalescingMiddleware",
            "SubagentLimitMiddleware",
            "LoopDetectionMiddleware",
            "TokenBudgetMiddleware",
            "TerminalResponseMiddleware",
            "ModelLengthFinishReasonMiddleware",
            "SafetyFinishReasonMiddleware",
            "ClarificationMiddleware",
        ]
    );
    // Restricted to the seed's SDK list, the order is exactly the seed's [0]..[14].
    let seed = [
        "ThreadDataMiddleware",
        "UploadsMiddleware",
        "SandboxMiddleware",
        "DanglingToolCallMiddleware",
        "GuardrailMiddleware",
        "ToolErrorHandlingMiddleware",
        "SummarizationMiddleware",
        "TodoMiddleware",
        "TitleMiddleware",
        "MemoryMiddleware",
        "ViewImageMiddleware",
        "SubagentLimitMiddleware",
        "LoopDetectionMiddleware",
        "TokenBudgetMiddleware",
        "ClarificationMiddleware",
    ];
    let filtered: Vec<&String> = order
        .iter()
        .filter(|n| seed.contains(&n.as_str()))
        .collect();
    assert_eq!(filtered, seed);
    // The seed's slots, the reference's additions, and Antler's `Approvals`.
    assert_eq!(CHAIN_ORDER.len(), 25);
}

#[test]
fn default_features_and_recursion_limit() {
    let agent = build(AgentOptions {
        recursion_limit: Some(5000),
        ..Default::default()
    })
    .unwrap();
    let order = names(&agent);
    assert!(order.contains(&"SandboxMiddleware".to_string()));
    assert!(order.contains(&"LoopDetectionMiddleware".to_string()));
    assert!(!order.contains(&"TitleMiddleware".to_string()));
    assert!(!order.contains(&"TodoMiddleware".to_string()));
    assert_eq!(
        agent.recursion_limit, 1000,
        "clamped to max_recursion_limit"
    );
    assert_eq!(agent.name, "default");
}

/// A tool the user brings, named like one a middleware injects.
fn user_tool(name: &'static str) -> ToolRef {
    Arc::new(FnTool::new(name, "the user's own", |_args: Value| async {
        Ok(ToolOutput::text("user"))
    }))
}

#[test]
fn injected_tools_follow_user_tools_and_user_wins_on_clash() {
    let tools: Vec<ToolRef> = vec![user_tool("web_search"), user_tool("write_todos")];
    let agent = create_agent(
        model(),
        tools,
        AgentOptions {
            plan_mode: true,
            ..Default::default()
        },
    )
    .unwrap();
    let tool_names: Vec<&str> = agent.tools.iter().map(|t| t.name()).collect();
    assert_eq!(tool_names, ["web_search", "write_todos", ASK_CLARIFICATION]);
    assert_eq!(agent.tools[1].description(), "the user's own");
    let without_plan = create_agent(model(), Vec::new(), AgentOptions::default()).unwrap();
    let tool_names: Vec<&str> = without_plan.tools.iter().map(|t| t.name()).collect();
    assert_eq!(tool_names, [ASK_CLARIFICATION]);
}

mod config_keys;
mod history;
mod middlewares;
mod runs;
mod summarization;
mod title;
