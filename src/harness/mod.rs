//! The in-process engine shared by the daemon and the embedded client: threads, runs, models.
//!
//! A [`Harness`] owns the thread store, a model registry rebuilt when the configuration changes,
//! and the registry of active runs, which enforces one run per thread. Each run is a task
//! tracked for shutdown; its events stream to the caller through the [`RunHandle`].

mod admission;
pub mod approvals;
mod errors;
mod jobs;
pub(crate) mod memory_queue;
pub mod progress;
mod registries;
mod request;
mod run_claims;
mod run_guard;
mod run_task;
mod sandbox_slot;
mod schedules;
mod schedules_dispatch;
mod schedules_loop;
mod shutdown;
pub mod testing;
mod thread_updates;

pub use errors::{HarnessError, RunError};
pub use jobs::{JOBS_TREE, JobClaim};
pub use request::{RunHandle, RunRequest, Speaker};
pub use run_claims::{CANCELS_TREE, RUNS_TREE, RunRecord};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent_api::{BackgroundTasks, EventSink, RunContext, RunEvents, RunUsers};
use crate::cluster::Cluster;
use crate::config::{AppConfig, ConfigHandle};
use crate::custom_agents::AgentStore;
use crate::lead_agent::{LeadAgentCache, LeadAgentDeps, make_lead_agent};
use crate::mcp::{McpManager, McpToolSet};
use crate::memory::MemoryService;
use crate::model::ModelRegistry;
use crate::sandbox::{SandboxError, SandboxInfo, SandboxProvider};
use crate::skills::SkillCatalog;
use crate::tools::registry::ToolRegistry;
use crate::usage::{UsageStore, budget_notice};
use antler_convert::Converter;
use antler_store::state::ThreadState;
use antler_store::threads::ThreadError;
use antler_store::threads::ThreadStoreOptions;
use antler_store::{Checkpointer, StoreRef, ThreadRecord, ThreadStatus, ThreadStore};

use run_guard::RunGuard;
use sandbox_slot::SandboxSlot;

/// How long cancelled runs get to wind down at shutdown before the harness stops waiting.
pub(crate) const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// The engine. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Harness {
    inner: Arc<Inner>,
}

struct Inner {
    config: ConfigHandle,
    threads: ThreadStore,
    models: Models,
    /// Custom agents of every user, under the data dir.
    agents: Arc<AgentStore>,
    /// Skill scans and system prompts the lead-agent factory reuses across runs.
    lead_cache: LeadAgentCache,
    /// Chosen at start-up ([`Harness::prepare_sandbox`]) or on the first run, replaced when
    /// the sandbox settings change (see [`sandbox_slot`]).
    sandbox: SandboxSlot,
    /// The configured tools, rebuilt when the configuration `Arc` or the provider changes.
    tools: Mutex<Option<ToolsFor>>,
    runs: Mutex<HashMap<String, ActiveRun>>,
    /// Runs ended since start: lets the daemon see activity without a hook per run.
    runs_finished: AtomicU64,
    tracker: TaskTracker,
    /// What runs leave behind (generated titles): stopped once the runs have drained.
    background: BackgroundTasks,
    accepting: AtomicBool,
    /// Long-term memory (`None` when the harness was built outside a runtime).
    memory: Option<MemoryService>,
    /// MCP servers of `extensions_config.json`, connected on the first run that needs them.
    mcp: McpManager,
    /// The bounded child processes documents and fetched pages are converted in.
    converter: Converter,
    /// This daemon among the daemons sharing the store: its leases (see [`crate::cluster`]).
    cluster: Cluster,
    /// Other daemons may share the store: runs also claim their thread there
    /// (see [`run_claims`]).
    shared: bool,
    /// Periodic work claimed across instances (see [`jobs`]).
    jobs: jobs::Jobs,
    /// Approval requests and decisions (the `approvals` tree).
    approvals: crate::approvals::ApprovalStore,
    /// Where a decision made away from a request's chat goes (the channel layer's hook).
    chat_resume: Mutex<Option<Arc<dyn crate::approvals::ChatResume>>>,
    /// Schedules and their slots (see [`crate::scheduler`]; the firing loop is `schedules`).
    scheduler: crate::scheduler::Scheduler,
    /// Where a fired slot of a schedule created in a chat goes (the channel layer's hook).
    chat_schedule: Mutex<Option<Arc<dyn crate::scheduler::ChatSchedule>>>,
    /// The firing loop and the scheduled runs it dispatches (see [`schedules`]).
    runner: schedules::Runner,
    /// The audio endpoints' client: voice notes transcribed, answers spoken.
    voice: crate::voice::Voice,
}

/// A tool registry and what it was built for.
struct ToolsFor {
    config: Arc<AppConfig>,
    sandbox: Arc<dyn SandboxProvider>,
    mcp: Arc<McpToolSet>,
    registry: Arc<ToolRegistry>,
}

struct ActiveRun {
    run_id: String,
    cancel: CancellationToken,
}

enum Models {
    /// Given by the caller (tests, benches, embedded apps with in-process models).
    Fixed(Arc<ModelRegistry>),
    /// Built from the configuration, rebuilt when the configuration `Arc` changes.
    FromConfig(Mutex<Option<(Arc<AppConfig>, Arc<ModelRegistry>)>>),
}

impl Harness {
    /// Opens the configured store (sled at `{data_dir}/store`, or PostgreSQL) and resets threads
    /// a crash left busy.
    pub fn open(config: ConfigHandle) -> Result<Self, HarnessError> {
        let data_dir = config.current().data_dir();
        std::fs::create_dir_all(&data_dir).map_err(|e| HarnessError::DataDir {
            path: data_dir.display().to_string(),
            detail: e.to_string(),
        })?;
        let store = crate::storage::open_store(&config.current())?;
        crate::skills::bundled::install_for(&config.current());
        Self::with_parts(config, store, None)
    }

    /// A harness over any store; `models` fixes the registry instead of building it from config.
    pub fn with_parts(
        config: ConfigHandle,
        store: StoreRef,
        models: Option<ModelRegistry>,
    ) -> Result<Self, HarnessError> {
        let snapshot = config.current();
        let cluster = Cluster::new(
            store.clone(),
            snapshot.cluster.effective_instance_id(),
            Duration::from_secs(snapshot.cluster.lease_seconds),
            backend_label(&snapshot),
            schedules::wall_clock()?,
        );
        Self::with_cluster(config, store, models, cluster)
    }

    /// Like [`Harness::with_parts`], as the instance `cluster` names (its id, lease length and
    /// clock): several harnesses on one store in tests, or an embedder that runs its own.
    pub fn with_cluster(
        config: ConfigHandle,
        store: StoreRef,
        models: Option<ModelRegistry>,
        cluster: Cluster,
    ) -> Result<Self, HarnessError> {
        let snapshot = config.current();
        let shared = run_claims::is_shared(&cluster);
        let threads = ThreadStore::with_options(
            store.clone(),
            ThreadStoreOptions {
                state_cache_bytes: usize::try_from(snapshot.cache.thread_states_mb)
                    .unwrap_or(usize::MAX)
                    .saturating_mul(1024 * 1024),
                shared,
                ..ThreadStoreOptions::default()
            },
        )?;
        let reset = run_claims::reset_at_open(&threads, &cluster, shared)?;
        if !reset.is_empty() {
            tracing::warn!(threads = ?reset, "Threads left busy by an unclean stop were marked interrupted");
        }
        let models = match models {
            Some(registry) => Models::Fixed(Arc::new(registry)),
            None => Models::FromConfig(Mutex::new(None)),
        };
        let agents =
            Arc::new(AgentStore::new(snapshot.data_dir()).with_cache(snapshot.cache.agents));
        let lead_cache = LeadAgentCache::with_capacity(snapshot.cache.prompts);
        let skill_store = store.clone();
        let skills_loader = lead_cache.skills_loader();
        // A store one process opens (sled) means one daemon: its containers keep their names.
        let instance = (!cluster.store_is_exclusive()).then(|| cluster.instance_id().to_string());
        let sandbox = SandboxSlot::new()
            .with_instance(instance)
            .with_skill_mounts(Arc::new(move |config: &AppConfig| {
                Arc::new(SkillCatalog::from_config(
                    config,
                    skill_store.clone(),
                    skills_loader.clone(),
                )) as Arc<dyn crate::sandbox::SkillMounts>
            }));
        let approvals = crate::approvals::ApprovalStore::new(store.clone());
        let scheduler = crate::scheduler::Scheduler::new(store.clone(), cluster.clock());
        Ok(Self {
            inner: Arc::new_cyclic(|weak| Inner {
                memory: memory_queue::start(
                    weak.clone(),
                    store,
                    &config,
                    shared.then(|| memory_queue::owner(&cluster)),
                ),
                approvals,
                chat_resume: Mutex::new(None),
                scheduler,
                chat_schedule: Mutex::new(None),
                runner: schedules::Runner::default(),
                voice: crate::voice::Voice::new(),
                cluster,
                shared,
                jobs: jobs::Jobs::default(),
                config,
                threads,
                models,
                agents,
                lead_cache,
                sandbox,
                tools: Mutex::new(None),
                runs: Mutex::new(HashMap::new()),
                runs_finished: AtomicU64::new(0),
                tracker: TaskTracker::new(),
                background: BackgroundTasks::new(),
                accepting: AtomicBool::new(true),
                mcp: McpManager::in_data_dir(&snapshot.data_dir()),
                converter: Converter::for_config(&snapshot.conversion),
            }),
        })
    }

    pub fn config(&self) -> &ConfigHandle {
        &self.inner.config
    }

    /// The skills under `config` (its skills directory, this harness's store).
    pub fn skills(&self, config: &AppConfig) -> SkillCatalog {
        SkillCatalog::from_config(
            config,
            self.inner.threads.store().clone(),
            self.inner.lead_cache.skills_loader(),
        )
    }

    pub fn threads(&self) -> &ThreadStore {
        &self.inner.threads
    }

    /// This daemon's leases and the instances sharing its store.
    /// Schedules: what every surface creates, lists and changes them through.
    pub fn scheduler(&self) -> &crate::scheduler::Scheduler {
        &self.inner.scheduler
    }

    /// Transcription and speech (`voice.*`).
    pub fn voice(&self) -> &crate::voice::Voice {
        &self.inner.voice
    }

    pub fn cluster(&self) -> &Cluster {
        &self.inner.cluster
    }

    pub fn memory(&self) -> Option<&MemoryService> {
        self.inner.memory.as_ref()
    }

    /// The MCP servers; point them at the right file with [`McpManager::set_path`].
    pub fn mcp(&self) -> &McpManager {
        &self.inner.mcp
    }

    /// The custom agents of every user (`{data_dir}/users/{user}/agents`).
    pub fn agents(&self) -> &Arc<AgentStore> {
        &self.inner.agents
    }

    /// Chooses the sandbox provider now (probing bubblewrap or the Docker engine) instead of on
    /// the first run, and logs the choice and why. The daemon calls this at start.
    pub async fn prepare_sandbox(&self) -> Result<SandboxInfo, SandboxError> {
        let config = self.inner.config.current();
        let (provider, _lease) = self.inner.sandbox.lease(&config).await?;
        Ok(provider.info())
    }

    /// The sandbox provider in force (`None` before one was chosen, or when choosing failed).
    pub fn sandbox_info(&self) -> Option<SandboxInfo> {
        self.inner.sandbox.info()
    }

    /// Starts a run on a thread, creating the thread for `user_id` (its owner) if it does not
    /// exist; the run acts as `speaker` (see [`Speaker`]). The run uses the configuration in
    /// force now, for its whole life.
    pub async fn start_run(&self, request: RunRequest) -> Result<RunHandle, RunError> {
        let config = self.inner.config.current();
        self.start_run_with_config(request, config).await
    }

    /// Like [`Harness::start_run`], with an injected configuration for this run only: the
    /// request-scoped override (DeerFlow's ContextVar) that a parent run hands its sub-runs, or
    /// a caller uses to try a variant without touching the live config.
    pub async fn start_run_with_config(
        &self,
        request: RunRequest,
        config: Arc<AppConfig>,
    ) -> Result<RunHandle, RunError> {
        if !self.inner.accepting.load(Ordering::SeqCst) {
            return Err(RunError::ShuttingDown);
        }
        let users = request.users();
        let RunRequest {
            thread_id,
            input,
            options,
            want_values,
            ..
        } = request;
        let record = self.admit(&config, &users, &thread_id)?;
        let run_id = (options.run_id.clone()).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let cancel = CancellationToken::new();
        let mut guard = self.register(&thread_id, &run_id, &cancel)?;
        let lead = self
            .build_lead(&options, &config, &users, &mut guard)
            .await?;
        let state = self.check_out(&thread_id, &record, lead.agent_name.as_deref())?;
        let input = self.supersede(&thread_id, &state, input);

        let (events, agent_events) = EventSink::channel(want_values);
        let (caller_events, receiver) = RunEvents::channel();
        let mut ctx = RunContext::new(thread_id.clone(), users.owner.clone(), config);
        ctx.users = users;
        ctx.run_id = run_id.clone();
        ctx.agent_name = lead.agent_name;
        ctx.options = lead.options;
        ctx.cancel = cancel.clone();
        ctx.events = events;
        ctx.background = self.inner.background.clone();
        run_task::meter(&mut ctx, self.inner.threads.store());
        let span = ctx.trace_span();
        let task = run_task::RunTask {
            agent: lead.agent,
            subagents: lead.subagent_tasks,
            ctx,
            state,
            input,
            agent_events,
            caller_events,
            threads: self.inner.threads.clone(),
            guard,
        };
        // Traced as a child of the inbound message's or API request's span.
        let run = tracing::Instrument::instrument(task.run(), span);
        let outcome = self.inner.tracker.spawn(run);
        Ok(RunHandle {
            run_id,
            thread_id,
            events: receiver,
            cancel,
            outcome,
        })
    }

    /// Takes the thread for the run: remembers the agent it runs with (for listings and
    /// surfaces), checks its state out (so the run appends to a long history without copying
    /// it; the run task checks it in once the run is over) and marks it busy.
    fn check_out(
        &self,
        thread_id: &str,
        record: &ThreadRecord,
        agent_name: Option<&str>,
    ) -> Result<ThreadState, RunError> {
        if agent_name.is_some() && record.agent_name.as_deref() != agent_name {
            let agent_name = agent_name.map(str::to_string);
            self.inner
                .threads
                .update(thread_id, |r| r.agent_name.clone_from(&agent_name))?;
        }
        let state = self
            .inner
            .threads
            .checkout(thread_id)
            .map_err(RunError::Thread)?
            .unwrap_or_default();
        self.inner
            .threads
            .set_status(thread_id, ThreadStatus::Busy)?;
        Ok(state)
    }

    /// Whether this run may start: the process has memory to spare, the thread is the owner's
    /// (created for them if new), and the speaker has budget left today (in a shared
    /// conversation each person pays for their own turns).
    fn admit(
        &self,
        config: &AppConfig,
        users: &RunUsers,
        thread_id: &str,
    ) -> Result<ThreadRecord, RunError> {
        admission::overload_check(config)?;
        let record = self.owned_or_created(&users.owner, thread_id)?;
        let usage = UsageStore::new(self.inner.threads.store().clone());
        if let Some(notice) =
            budget_notice(&usage, config, &users.speaker).map_err(ThreadError::Store)?
        {
            return Err(RunError::BudgetSpent { notice });
        }
        Ok(record)
    }

    /// The lead agent for this run, on the models, sandbox (leased for the run's life), MCP
    /// tools and tools of `config`.
    async fn build_lead(
        &self,
        options: &crate::agent_api::RunOptions,
        config: &Arc<AppConfig>,
        users: &RunUsers,
        guard: &mut RunGuard,
    ) -> Result<crate::lead_agent::LeadAgent, RunError> {
        let models = self.models(config)?;
        let checkpointer: Arc<dyn Checkpointer> = Arc::new(self.inner.threads.clone());
        let (sandbox, lease) = self.inner.sandbox.lease(config).await?;
        guard.sandbox = Some(lease);
        let mcp = self.inner.mcp.tools().await;
        let tools = self.tools(config, &sandbox, &mcp)?;
        Ok(make_lead_agent(
            options,
            config,
            LeadAgentDeps {
                models: &models,
                tools: Some(&tools),
                sandbox: Some(sandbox),
                checkpointer: Some(checkpointer),
                users: users.clone(),
                agents: Some(self.inner.agents.clone()),
                cache: Some(&self.inner.lead_cache),
                memory: self.inner.memory.as_ref(),
                skills: Some(self.skills(config)),
                approvals: Some(self.approval_gate()),
                scheduler: Some(self.inner.scheduler.clone()),
            },
        )?)
    }

    /// (runs in flight now, runs ended since the harness opened however they ended).
    pub fn run_activity(&self) -> (usize, u64) {
        let finished = self.inner.runs_finished.load(Ordering::Relaxed);
        (lock_runs(&self.inner).len(), finished)
    }

    /// The thread's state as of its last completed step. Callers check ownership first.
    pub async fn thread_state(&self, thread_id: &str) -> Result<Option<ThreadState>, HarnessError> {
        let latest = self.inner.threads.latest(thread_id).await?;
        Ok(latest.map(|c| c.state))
    }

    pub fn create_thread(
        &self,
        user_id: &str,
        thread_id: Option<String>,
        metadata: Map<String, Value>,
    ) -> Result<ThreadRecord, ThreadError> {
        self.inner.threads.create(user_id, thread_id, metadata)
    }

    /// The thread if `user_id` owns it; another user's thread reads as absent.
    pub fn get_thread(
        &self,
        user_id: &str,
        thread_id: &str,
    ) -> Result<Option<ThreadRecord>, ThreadError> {
        Ok(self
            .inner
            .threads
            .get(thread_id)?
            .filter(|record| record.user_id == user_id))
    }

    pub fn list_threads(&self, user_id: &str) -> Result<Vec<ThreadRecord>, ThreadError> {
        self.inner.threads.list(user_id)
    }

    /// Deletes a thread of `user_id`. A thread with a run in progress is `Busy`.
    pub fn delete_thread(&self, user_id: &str, thread_id: &str) -> Result<(), RunError> {
        if self.get_thread(user_id, thread_id)?.is_none() {
            return Err(RunError::NotFound {
                thread_id: thread_id.to_string(),
            });
        }
        let runs = self.runs();
        if runs.contains_key(thread_id) {
            return Err(RunError::Busy {
                thread_id: thread_id.to_string(),
            });
        }
        // Holding the run registry (and, shared, the thread's run lease) keeps a new run from
        // starting on the thread mid-delete, here or on another instance.
        let held = self.hold_thread(thread_id)?;
        self.inner.threads.delete(thread_id)?;
        drop(held);
        drop(runs);
        Ok(())
    }

    fn owned_or_created(&self, user_id: &str, thread_id: &str) -> Result<ThreadRecord, RunError> {
        let not_found = || RunError::NotFound {
            thread_id: thread_id.to_string(),
        };
        match self.inner.threads.get(thread_id)? {
            Some(record) if record.user_id == user_id => Ok(record),
            Some(_) => Err(not_found()),
            None => {
                match self
                    .inner
                    .threads
                    .create(user_id, Some(thread_id.to_string()), Map::new())
                {
                    Ok(record) => Ok(record),
                    // Another user created it between the two calls.
                    Err(ThreadError::Unavailable { .. }) => Err(not_found()),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    fn register(
        &self,
        thread_id: &str,
        run_id: &str,
        cancel: &CancellationToken,
    ) -> Result<RunGuard, RunError> {
        let mut runs = self.runs();
        if runs.contains_key(thread_id) {
            return Err(RunError::Busy {
                thread_id: thread_id.to_string(),
            });
        }
        // Under the registry's lock: the orphan sweep checks the registry under it too.
        let claim = self.claim_thread(thread_id, run_id, cancel)?;
        runs.insert(
            thread_id.to_string(),
            ActiveRun {
                run_id: run_id.to_string(),
                cancel: cancel.clone(),
            },
        );
        Ok(RunGuard {
            inner: self.inner.clone(),
            thread_id: thread_id.to_string(),
            run_id: run_id.to_string(),
            sandbox: None,
            claim,
        })
    }

    fn runs(&self) -> MutexGuard<'_, HashMap<String, ActiveRun>> {
        lock_runs(&self.inner)
    }
}

fn lock_runs(inner: &Inner) -> MutexGuard<'_, HashMap<String, ActiveRun>> {
    match inner.runs.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod cluster_tests;

/// The store backend's name for `/readyz` and `antler status`.
fn backend_label(config: &AppConfig) -> &'static str {
    crate::storage::backend_name(config)
}
