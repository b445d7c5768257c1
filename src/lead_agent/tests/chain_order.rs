//! The lead chain's order, pinned: every slot the lead fills sits where `CHAIN_ORDER` puts it
//! (the seed's production order), the extras in the `Extras` slot unless
//! they anchor themselves.

use super::*;
use crate::agent_api::ToolOutput;
use crate::tools::FnTool;

fn middleware_names(lead: &LeadAgent) -> Vec<String> {
    lead.agent
        .middleware
        .iter()
        .map(|m| m.name().to_string())
        .collect()
}

#[test]
fn the_lead_chain_follows_the_one_chain_order() {
    let mut f = fixture(|config| {
        config.summarization.enabled = true;
        config.guardrails.enabled = true;
        config.token_budget.enabled = true;
        config.tool_search.enabled = true;
    });
    f.tools.add_external([
        Arc::new(FnTool::new("mcp_lookup", "an MCP tool", |_args| async {
            Ok(ToolOutput::text("found"))
        })) as ToolRef,
    ]);
    f.create("alice", "helper", |c| {
        c.model_settings = ModelSettings {
            temperature: Some(0.2),
            ..Default::default()
        };
    });
    let options = RunOptions {
        agent_name: Some("helper".into()),
        model_name: Some("seer".into()),
        is_plan_mode: true,
        subagent_enabled: true,
        ..Default::default()
    };
    let lead = make_lead_agent(
        &options,
        &f.config,
        LeadAgentDeps {
            models: &f.models,
            tools: Some(&f.tools),
            sandbox: None,
            checkpointer: None,
            users: RunUsers {
                owner: "alice".into(),
                speaker: "alice".into(),
                shared: true,
            },
            agents: Some(f.store.clone()),
            cache: Some(&f.cache),
            memory: None,
            skills: None,
            approvals: Some(crate::approvals::ApprovalGate {
                store: crate::approvals::ApprovalStore::new(Arc::new(
                    antler_store::MemoryStore::new(),
                )),
                config: None,
                clock: Arc::new(crate::cluster::SystemWallClock),
            }),
            scheduler: None,
        },
    )
    .unwrap();
    assert_eq!(
        middleware_names(&lead),
        [
            "ThreadDataMiddleware",
            "UploadsMiddleware",
            "SandboxMiddleware",
            // Anchored by itself just before DanglingToolCall (which adds unnamed messages).
            "SenderNamesMiddleware",
            "DanglingToolCallMiddleware",
            "GuardrailMiddleware",
            "ApprovalMiddleware",
            "ToolErrorHandlingMiddleware",
            "DynamicContextMiddleware",
            "SkillActivationMiddleware",
            "SummarizationMiddleware",
            "TodoMiddleware",
            "TokenUsageMiddleware",
            "TitleMiddleware",
            "ViewImageMiddleware",
            "DeferredToolsMiddleware",
            "SystemMessageCoalescingMiddleware",
            "SubagentLimitMiddleware",
            "LoopDetectionMiddleware",
            "TokenBudgetMiddleware",
            // Innermost of the tool wraps but for the rest of the extras: it marks what a
            // tool returned before the outer middlewares see it.
            "TaintMiddleware",
            AGENT_MODEL_SETTINGS,
            "TerminalResponseMiddleware",
            "ModelLengthFinishReasonMiddleware",
            "SafetyFinishReasonMiddleware",
            "ClarificationMiddleware",
        ]
    );
}
