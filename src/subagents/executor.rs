//! Runs one sub-agent: its own agent (own messages, no writes to the lead thread's checkpoints)
//! on a task owned by the lead run, with the lead's sandbox, thread data, user, configuration
//! snapshot and trace id, a timeout enforced by cooperative cancellation, and its progress
//! forwarded to the lead run's events.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::agent::{Agent, AgentOptions, Feature, RunOutcome, RuntimeFeatures, create_agent};
use crate::agent_api::taint;
use crate::agent_api::{CapReason, TaskStatus};
use crate::agent_api::{
    EventSink, MiddlewareRef, RunContext, RunEvent, RunEvents, RunOptions, StopReason, ToolRef,
};
use crate::custom_agents::{SkillSummary, UNTRUSTED_CONTENT};
use crate::middleware::TaintMiddleware;
use crate::model::{ChatModel, ModelRegistry};
use crate::sandbox::SandboxProvider;
use crate::skills::fit::fits;
use crate::subagents::registry::{ModelChoice, SubagentRegistry, SubagentSpec};
use crate::subagents::report::TaskReport;
use antler_store::messages::{Message, Usage};
use antler_store::state::ThreadState;

/// How long the lead run waits, once it ended, for cancelled sub-agents to wind down.
const WIND_DOWN: Duration = Duration::from_secs(10);

/// What one `task` call asks for.
#[derive(Clone, Debug)]
pub struct TaskRequest {
    pub task_id: String,
    pub description: String,
    pub prompt: String,
    pub subagent_type: String,
    pub max_turns: Option<u32>,
}

/// The sub-agent tasks of one lead run. The run's owner waits for them after the run (they
/// were cancelled with it when it was cancelled), so none outlives the run that started it.
#[derive(Clone, Default)]
pub struct SubagentTasks {
    tracker: TaskTracker,
}

impl SubagentTasks {
    /// Waits up to [`WIND_DOWN`] for every sub-agent of the run to end.
    pub async fn wait(&self) {
        self.tracker.close();
        if tokio::time::timeout(WIND_DOWN, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                tasks = self.tracker.len(),
                "Sub-agents still running after their lead run ended"
            );
        }
    }

    pub fn running(&self) -> usize {
        self.tracker.len()
    }
}

/// Everything a sub-agent is built from, captured when the lead agent is built.
pub struct SubagentRunner {
    pub(crate) registry: SubagentRegistry,
    /// The lead run's model (`inherit`).
    pub(crate) parent_model: Arc<dyn ChatModel>,
    pub(crate) models: ModelRegistry,
    /// The lead agent's tools, before any filtering by type.
    pub(crate) tools: Vec<ToolRef>,
    pub(crate) skills: Vec<SkillSummary>,
    pub(crate) sandbox: Option<Arc<dyn SandboxProvider>>,
    pub(crate) tasks: SubagentTasks,
    /// The lead's approval policy in its sub-agent form (a gated call is left to the lead).
    pub(crate) approvals: Option<MiddlewareRef>,
}

impl SubagentRunner {
    pub fn new(
        registry: SubagentRegistry,
        parent_model: Arc<dyn ChatModel>,
        models: ModelRegistry,
        tools: Vec<ToolRef>,
        skills: Vec<SkillSummary>,
        sandbox: Option<Arc<dyn SandboxProvider>>,
    ) -> Self {
        Self {
            registry,
            parent_model,
            models,
            tools,
            skills,
            sandbox,
            tasks: SubagentTasks::default(),
            approvals: None,
        }
    }

    /// Sub-agents answer calls the approval policy gates instead of running them.
    pub fn with_approvals(mut self, gate: MiddlewareRef) -> Self {
        self.approvals = Some(gate);
        self
    }

    pub fn registry(&self) -> &SubagentRegistry {
        &self.registry
    }

    pub fn tasks(&self) -> SubagentTasks {
        self.tasks.clone()
    }

    /// Runs the task to its end (completed, failed, timed out or cancelled).
    pub async fn run(
        &self,
        request: TaskRequest,
        parent: &RunContext,
        state: &ThreadState,
    ) -> TaskReport {
        let Some(spec) = self.registry.get(&request.subagent_type) else {
            return TaskReport::failed_early(
                &request.task_id,
                &request.subagent_type,
                format!(
                    "Unknown subagent type '{}'. Available: {}",
                    request.subagent_type,
                    self.registry.names().join(", ")
                ),
            );
        };
        let agent = match self.build(spec, &request, parent) {
            Ok(agent) => agent,
            Err(error) => {
                return TaskReport::failed_early(&request.task_id, &spec.name, error);
            }
        };
        let (events, receiver) = EventSink::channel(false);
        let ctx = child_context(parent, &agent, events);
        let cancel = ctx.cancel.clone();
        // A lead run whose tool step is abandoned (cancelled) takes its sub-agents with it.
        let _cancel_on_drop = cancel.clone().drop_guard();
        parent.events.emit(RunEvent::TaskStarted {
            task_id: request.task_id.clone(),
            description: request.description.clone(),
            subagent_type: spec.name.clone(),
            prompt: request.prompt.clone(),
        });
        // The lead's untrusted sources come along: what the lead read may be in the prompt.
        let mut input_state = ThreadState {
            sandbox: state.sandbox.clone(),
            thread_data: state.thread_data.clone(),
            ..Default::default()
        };
        if let Some(inherited) = taint::mark(&input_state, taint::sources(state)) {
            input_state.extra = inherited.extra;
        }
        let watch = Watch {
            task_id: request.task_id.clone(),
            parent: parent.events.clone(),
            model: agent.model.name().to_string(),
        };
        let timeout = spec.timeout;
        let subagent_type = spec.name.clone();
        let span = tracing::info_span!(
            "subagent",
            trace_id = %parent.run_id,
            task_id = %request.task_id,
            subagent_type = %subagent_type,
        );
        // A child of the `task` tool's span (current here), when traced.
        let otel_span = crate::telemetry::spans::subagent(&subagent_type, &parent.thread_id);
        let stopped_span = otel_span.clone();
        let parent_events = parent.events.clone();
        let model_name = agent.model.name().to_string();
        let task_id = request.task_id.clone();
        let prompt = request.prompt;
        let handle = self.tasks.tracker.spawn(
            async move {
                let run = async {
                    let run = agent.run(input_state, vec![Message::human(prompt)], &ctx);
                    tokio::pin!(run);
                    tokio::select! {
                        outcome = &mut run => (outcome, false),
                        _ = tokio::time::sleep(timeout) => {
                            tracing::warn!(seconds = timeout.as_secs(), "Sub-agent timed out; cancelling it");
                            ctx.cancel.cancel();
                            (run.await, true)
                        }
                    }
                };
                let ((outcome, timed_out), watched) = tokio::join!(run, watch.forward(receiver));
                let failed = outcome.stop == StopReason::Error;
                crate::telemetry::spans::record_stop(&stopped_span, outcome.stop.as_str(), failed);
                let ended = Ended { outcome, timed_out, timeout, watched, model: model_name };
                let report = report(&task_id, &subagent_type, ended);
                parent_events.emit(report.event());
                report
            }
            .instrument(span)
            .instrument(otel_span),
        );
        match handle.await {
            Ok(report) => report,
            Err(join) => TaskReport::failed_early(
                &request.task_id,
                &spec.name,
                format!("the sub-agent stopped unexpectedly: {join}"),
            ),
        }
    }

    pub(crate) fn build(
        &self,
        spec: &SubagentSpec,
        request: &TaskRequest,
        parent: &RunContext,
    ) -> Result<Agent, String> {
        let model = match &spec.model {
            ModelChoice::Inherit => self.parent_model.clone(),
            ModelChoice::Named(name) => self.models.get(name).ok_or_else(|| {
                format!("sub-agent type '{}' names model '{name}', which is not configured; fix subagents.custom_agents.{}.model", spec.name, spec.name)
            })?,
        };
        let max_turns = request.max_turns.unwrap_or(spec.max_turns).max(1);
        let features = RuntimeFeatures {
            sandbox: Feature::BuiltIn,
            loop_detection: Feature::BuiltIn,
            token_budget: Feature::BuiltIn,
            approvals: match &self.approvals {
                Some(gate) => Feature::Custom(gate.clone()),
                None => Feature::Off,
            },
            ..RuntimeFeatures::none()
        };
        let tools = spec.filter_tools(self.tools.clone());
        let taint: MiddlewareRef = Arc::new(TaintMiddleware::for_tools(&tools));
        let mut agent = create_agent(
            model,
            tools,
            AgentOptions {
                system_prompt: Some(self.prompt(spec).into()),
                features: Some(features),
                sandbox_provider: self.sandbox.clone(),
                name: Some(format!("subagent:{}", spec.name)),
                recursion_limit: Some(max_turns),
                config: Some(parent.config.clone()),
                extra_middleware: vec![taint],
                ..Default::default()
            },
        )
        .map_err(|e| format!("could not assemble the sub-agent: {e}"))?;
        // The chain brings tools of its own (ask_clarification): the type's filter applies to them
        // too, and `task` never passes.
        agent.tools = spec.filter_tools(std::mem::take(&mut agent.tools));
        Ok(agent)
    }

    /// The type's prompt, the untrusted-content rule when it has a tool that reads outside text,
    /// plus the skills it may read: those its list allows and whose tools it
    /// has (`skills::fit`), as one line each instead of the lead's `<available_skills>` block.
    pub(crate) fn prompt(&self, spec: &SubagentSpec) -> String {
        let tools: Vec<&str> = self
            .tools
            .iter()
            .map(|tool| tool.name())
            .filter(|name| spec.allows(name))
            .collect();
        let skills: Vec<&SkillSummary> = self
            .skills
            .iter()
            .filter(|skill| {
                spec.skills
                    .as_ref()
                    .is_none_or(|names| names.contains(&skill.name))
            })
            .filter(|skill| fits(skill.allowed_tools.as_deref(), &tools))
            .collect();
        let untrusted = self
            .tools
            .iter()
            .filter(|tool| spec.allows(tool.name()))
            .any(|tool| tool.untrusted_output().is_some());
        let base = if untrusted {
            format!("{}\n\n{}", spec.system_prompt, UNTRUSTED_CONTENT)
        } else {
            spec.system_prompt.clone()
        };
        if skills.is_empty() {
            return base;
        }
        let list: Vec<String> = skills
            .iter()
            .map(|s| format!("- {}: {} ({})", s.name, s.description, s.path))
            .collect();
        format!(
            "{base}\n\n<skill_system>\nSkills hold tested workflows; read a skill's file with read_file before a task it fits.\n{}\n</skill_system>",
            list.join("\n")
        )
    }
}

/// The sub-agent's context: the lead's thread, user, configuration snapshot and agent; its own
/// run id and events; a cancellation that follows the lead's.
fn child_context(parent: &RunContext, agent: &Agent, events: EventSink) -> RunContext {
    let mut ctx = RunContext::new(
        &parent.thread_id,
        &parent.users.owner,
        parent.config.clone(),
    );
    ctx.users = parent.users.clone();
    ctx.agent_name = parent.agent_name.clone();
    ctx.options = RunOptions {
        model_name: Some(agent.model.name().to_string()),
        thinking_enabled: parent.options.thinking_enabled,
        reasoning_effort: parent.options.reasoning_effort.clone(),
        non_interactive: true,
        channel_name: parent.options.channel_name.clone(),
        ..Default::default()
    };
    ctx.cancel = parent.cancel.child_token();
    ctx.events = events;
    ctx.background = parent.background.clone();
    // The parent's account pays, so the parent's budget stops the sub-agent too.
    ctx.meter = parent.meter.clone();
    ctx.usage_kind = crate::agent_api::UsageKind::Subagent;
    ctx
}

/// What the forwarder saw of the sub-agent's run.
#[derive(Default)]
struct Watched {
    messages: usize,
    usage: BTreeMap<String, Usage>,
}

struct Watch {
    task_id: String,
    parent: EventSink,
    model: String,
}

impl Watch {
    /// Forwards each new AI message as `task_running` and sums the tokens, until `Finished`.
    async fn forward(self, mut events: RunEvents) -> Watched {
        let mut watched = Watched::default();
        while let Some(event) = events.recv().await {
            match event {
                RunEvent::Message {
                    message: Message::Ai(ai),
                } => {
                    watched.messages += 1;
                    if let Some(usage) = &ai.usage {
                        let model = ai
                            .model
                            .as_deref()
                            .map_or_else(|| self.model.clone(), str::to_string);
                        watched.usage.entry(model).or_default().add(usage);
                    }
                    self.parent.emit(RunEvent::TaskRunning {
                        task_id: self.task_id.clone(),
                        message: Message::Ai(ai),
                        message_index: watched.messages,
                    });
                }
                RunEvent::Finished { .. } => break,
                // A budget warning one of its calls claimed is the parent's to show.
                event @ RunEvent::Custom { .. } if is_budget_warning(&event) => {
                    self.parent.emit(event)
                }
                _ => {}
            }
        }
        watched
    }
}

fn is_budget_warning(event: &RunEvent) -> bool {
    matches!(event, RunEvent::Custom { name, .. } if name == crate::agent_api::metering::BUDGET_WARNING_EVENT)
}

/// How a sub-agent's run ended.
struct Ended {
    outcome: RunOutcome,
    timed_out: bool,
    timeout: Duration,
    watched: Watched,
    /// The model it was built with.
    model: String,
}

fn report(task_id: &str, subagent_type: &str, ended: Ended) -> TaskReport {
    let Ended {
        outcome,
        timed_out,
        timeout,
        watched,
        model,
    } = ended;
    let last_text = outcome
        .state
        .messages
        .iter()
        .rev()
        .find_map(|m| m.as_ai().filter(|ai| !ai.meta.hide_from_ui))
        .map(|ai| ai.content.trim().to_string())
        .filter(|text| !text.is_empty());
    let error = outcome.error.as_ref().map(|e| e.message.clone());
    // The model that wrote the last answer (a fallback model may have stepped in).
    let last_model = outcome.state.messages.iter().rev().find_map(|m| {
        m.as_ai()
            .and_then(|ai| ai.model.as_deref().map(str::to_string))
    });
    let cap = CapReason::of(outcome.stop);
    let (status, error) = match outcome.stop {
        _ if timed_out => (
            TaskStatus::TimedOut,
            Some(format!(
                "the sub-agent did not finish within {} s (subagents.timeouts.{subagent_type}); its work was cancelled",
                timeout.as_secs()
            )),
        ),
        StopReason::Cancelled => (TaskStatus::Cancelled, None),
        StopReason::RecursionLimit if last_text.is_some() => (TaskStatus::Completed, None),
        stop if stop.is_answered() => (TaskStatus::Completed, None),
        _ => (
            TaskStatus::Failed,
            Some(error.unwrap_or_else(|| format!("the sub-agent stopped ({})", outcome.stop))),
        ),
    };
    TaskReport {
        task_id: task_id.to_string(),
        subagent_type: subagent_type.to_string(),
        status,
        cap: if timed_out { None } else { cap },
        result: last_text,
        error,
        model: Some(last_model.unwrap_or(model)),
        usage: watched.usage,
        messages: watched.messages,
        untrusted: taint::sources(&outcome.state),
    }
}
