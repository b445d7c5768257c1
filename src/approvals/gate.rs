//! `ApprovalMiddleware`: decides, per tool call, whether it runs, returns a settled decision,
//! or parks the run. In order: a request already made for this call (a resumed run) is
//! honoured (approved: run once; otherwise its denial); a call the conversation granted
//! (`approve_conversation` of the same tool, for `bash` the same command prefix) runs; a call
//! the policy gates parks (or, in a sub-agent, is refused with a word for the lead); the rest
//! run.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};

use crate::agent_api::approval::{
    ApprovalReason, ApprovalRequest, ApprovalStatus, Approvers, Decision,
};
use crate::agent_api::{Middleware, ToolContext, ToolError, ToolNext, ToolRef, ToolResult, taint};
use crate::approvals::{ApprovalError, ApprovalStore, policy, texts};
use crate::cluster::WallClock;
use crate::config::approvals::{ApprovalAdditions, ApproverKind, ApproversSetting};
use crate::config::{AppConfig, ConfigHandle};
use antler_store::messages::{ToolCall, ToolMessage};

pub const APPROVAL_MIDDLEWARE: &str = "ApprovalMiddleware";

/// What every run's gate shares: the store, the live config and the clock.
#[derive(Clone)]
pub struct ApprovalGate {
    pub store: ApprovalStore,
    /// The live config, read at every call; `None`: the run's own config.
    pub config: Option<ConfigHandle>,
    pub clock: Arc<dyn WallClock>,
}

impl ApprovalGate {
    fn config(&self, run: &Arc<AppConfig>) -> Arc<AppConfig> {
        self.config
            .as_ref()
            .map_or_else(|| run.clone(), ConfigHandle::current)
    }

    pub fn now(&self) -> DateTime<Utc> {
        let millis = i64::try_from(self.clock.now_ms()).unwrap_or(i64::MAX);
        DateTime::from_timestamp_millis(millis).unwrap_or_else(Utc::now)
    }
}

/// Whose chain the middleware is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateMode {
    /// The lead agent: a gated call parks the run.
    Lead,
    /// A sub-agent: it cannot park its parent's `task` call, so a gated call is answered with
    /// a result saying it is left to the lead agent.
    Subagent,
}

pub struct ApprovalMiddleware {
    gate: ApprovalGate,
    /// Tool name → its group, for `group:` and `mcp:` patterns.
    groups: Arc<HashMap<String, Option<String>>>,
    /// What the run's custom agent adds to the policy.
    additions: ApprovalAdditions,
    mode: GateMode,
}

impl ApprovalMiddleware {
    pub fn new(gate: ApprovalGate, tools: &[ToolRef], additions: ApprovalAdditions) -> Self {
        let groups = tools
            .iter()
            .map(|tool| (tool.name().to_string(), tool.group().map(str::to_string)))
            .collect();
        Self {
            gate,
            groups: Arc::new(groups),
            additions,
            mode: GateMode::Lead,
        }
    }

    /// The same policy for a sub-agent of the run.
    pub fn for_subagent(&self) -> Self {
        Self {
            gate: self.gate.clone(),
            groups: self.groups.clone(),
            additions: self.additions.clone(),
            mode: GateMode::Subagent,
        }
    }

    fn decide(&self, call: &ToolCall, ctx: &ToolContext<'_>) -> Result<Verdict, ApprovalError> {
        let run = ctx.run;
        // A request for this very call first: a resumed run honours its decision even if the
        // policy changed since.
        if let Some(request) = self.gate.store.find_call(&run.thread_id, &call.id)? {
            return self.settled(request, call, ctx);
        }
        let config = self.gate.config(&run.config);
        let group = self.groups.get(&call.name).cloned().flatten();
        let untrusted = taint::sources(ctx.state);
        let Some(reason) = policy::reason(
            &config.approvals,
            &self.additions,
            &call.name,
            group.as_deref(),
            &untrusted,
        ) else {
            return Ok(Verdict::Run);
        };
        if self.granted(&run.thread_id, call)? {
            return Ok(Verdict::Run);
        }
        let summary = policy::summary(&call.name, &call.args);
        if self.mode == GateMode::Subagent {
            let text = texts::needs_lead(&call.name, &summary, &texts::reason_label(&reason));
            return Ok(Verdict::answer(call, text));
        }
        let request = self.park(call, ctx, &config, reason, summary)?;
        Ok(Verdict::Answer(Box::new(parked(call, request))))
    }

    /// The result of a call whose request is settled (or still pending).
    fn settled(
        &self,
        request: ApprovalRequest,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
    ) -> Result<Verdict, ApprovalError> {
        match request.status {
            ApprovalStatus::Pending => Ok(Verdict::Answer(Box::new(parked(call, request)))),
            // The mark is set before the call starts: a crash mid-call, or a second resume,
            // never runs it twice.
            ApprovalStatus::Approved => {
                if self.gate.store.consume(&request.id, &ctx.run.run_id)? {
                    Ok(Verdict::Run)
                } else {
                    let text = texts::ran_already(&request.tool, &request.summary);
                    Ok(Verdict::answer(call, text))
                }
            }
            _ => Ok(Verdict::answer(
                call,
                texts::not_run(&request).unwrap_or_default(),
            )),
        }
    }

    /// Whether an `approve_conversation` in this thread covers the call.
    fn granted(&self, thread_id: &str, call: &ToolCall) -> Result<bool, ApprovalError> {
        let Some(key) = policy::grant_key(&call.name, &call.args) else {
            return Ok(false);
        };
        Ok(self
            .gate
            .store
            .list_thread(thread_id)?
            .iter()
            .any(|request| {
                request.status == ApprovalStatus::Approved
                    && request
                        .decision
                        .as_ref()
                        .is_some_and(|d| d.decision == Decision::ApproveConversation)
                    && request.tool == call.name
                    && policy::grant_key(&request.tool, &request.args).as_deref()
                        == Some(key.as_str())
            }))
    }

    /// Persists a pending request for the call.
    fn park(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
        config: &AppConfig,
        reason: ApprovalReason,
        summary: String,
    ) -> Result<ApprovalRequest, ApprovalError> {
        let run = ctx.run;
        let now = self.gate.now();
        let minutes = i64::try_from(config.approvals.timeout_minutes).unwrap_or(i64::MAX);
        let request = ApprovalRequest {
            id: String::new(),
            thread_id: run.thread_id.clone(),
            run_id: run.run_id.clone(),
            tool_call_id: call.id.clone(),
            tool: call.name.clone(),
            args: call.args.clone(),
            summary,
            reason,
            owner: run.users.owner.clone(),
            requester: run.users.speaker.clone(),
            approvers: approvers(&config.approvals.approvers),
            options: run.options.clone(),
            created_at: now,
            expires_at: now + TimeDelta::try_minutes(minutes).unwrap_or(TimeDelta::MAX),
            status: ApprovalStatus::Pending,
            decision: None,
            origin: None,
            agent_owner: run.options.agent_owner.clone(),
        };
        let request = self.gate.store.insert(request)?;
        tracing::info!(
            approval_id = %request.id,
            thread_id = %request.thread_id,
            tool = %request.tool,
            "A tool call waits for approval"
        );
        Ok(request)
    }
}

#[async_trait]
impl Middleware for ApprovalMiddleware {
    fn name(&self) -> &str {
        APPROVAL_MIDDLEWARE
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn wrap_tool_call(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
        next: ToolNext<'_>,
    ) -> Result<ToolResult, ToolError> {
        match self.decide(call, ctx) {
            Ok(Verdict::Run) => next.call(call, ctx).await,
            Ok(Verdict::Answer(result)) => Ok(*result),
            Err(error) => {
                tracing::warn!(%error, tool = %call.name, "Could not check a tool call's approval; not running it");
                let text = texts::unavailable(&call.name, &error.to_string());
                Ok(ToolResult::message(ToolMessage::error(call, text)))
            }
        }
    }
}

/// `approvals.approvers` as a request records it.
pub fn approvers(setting: &ApproversSetting) -> Approvers {
    match setting {
        ApproversSetting::Named(ApproverKind::Requester) => Approvers::Requester,
        ApproversSetting::Named(ApproverKind::Admins) => Approvers::Admins,
        ApproversSetting::Users(users) => Approvers::Users(users.clone()),
    }
}

/// What becomes of one call.
enum Verdict {
    /// Run it (not gated, granted, or approved and not run before).
    Run,
    /// Answer it without running: parked, denied, or left to the lead agent.
    Answer(Box<ToolResult>),
}

impl Verdict {
    fn answer(call: &ToolCall, text: String) -> Self {
        Verdict::Answer(Box::new(ToolResult::message(ToolMessage::error(
            call, text,
        ))))
    }
}

fn parked(call: &ToolCall, request: ApprovalRequest) -> ToolResult {
    let mut result = ToolResult::message(ToolMessage::success(call, "Waiting for approval."));
    result.parked = Some(Box::new(request));
    result
}
