//! `antler bench`: measurements printed as figures (medians and percentiles), never asserted.
//!
//! `turn` measures the harness itself: one turn of "1 message → 2 tool calls → final answer"
//! against an in-process scripted model, through the default middleware chain, with a
//! checkpoint after every step — so the figure is what Antler adds on top of the model.
//! `factory` measures building the lead agent per run (DeerFlow estimates tens of milliseconds).

pub mod command;
pub mod daemon;
pub mod meter;
pub mod stream;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tracing::Instrument;

use crate::agent::features::Feature;
use crate::agent::{AgentOptions, RuntimeFeatures, create_agent};
use crate::agent_api::{RunContext, RunOptions, RunUsers};
use crate::agent_api::{ToolOutput, ToolRef};
use crate::config::{AppConfig, ModelConfig};
use crate::custom_agents::{AgentConfig, AgentStore};
use crate::lead_agent::access::LOCAL_OPERATOR;
use crate::lead_agent::{LeadAgentCache, LeadAgentDeps, make_lead_agent};
use crate::model::{ModelRegistry, ScriptedModel, ScriptedTurn};
use crate::sandbox::{ExecMode, HostSandboxProvider, ProviderSettings};
use crate::tools::FnTool;
use crate::tools::registry::ToolRegistry;
use antler_store::messages::Message;
use antler_store::state::ThreadState;
use antler_store::{MemoryStore, SledStore, StoreRef, ThreadStore};

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("could not prepare the benchmark: {0}")]
    Setup(String),
    #[error("a benchmark turn failed: {0}")]
    Turn(String),
}

/// Percentiles of one measured series.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub samples: usize,
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub mean: Duration,
    /// Process CPU time (user + system) per iteration.
    pub cpu_per_iter: Duration,
}

impl Series {
    fn from_samples(label: &str, mut samples: Vec<Duration>, cpu: Duration) -> Self {
        samples.sort();
        let n = samples.len().max(1);
        let pick = |q: f64| samples[((n as f64 - 1.0) * q).round() as usize];
        let total: Duration = samples.iter().sum();
        Self {
            label: label.to_string(),
            samples: samples.len(),
            p50: pick(0.50),
            p90: pick(0.90),
            p99: pick(0.99),
            mean: total / n as u32,
            cpu_per_iter: cpu / n as u32,
        }
    }
}

impl fmt::Display for Series {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        write!(
            f,
            "{:<34} n={:<6} p50={:>8.1} µs  p90={:>8.1} µs  p99={:>8.1} µs  mean={:>8.1} µs  cpu/turn={:>8.1} µs",
            self.label,
            self.samples,
            us(self.p50),
            us(self.p90),
            us(self.p99),
            us(self.mean),
            us(self.cpu_per_iter)
        )
    }
}

/// The report of `antler bench turn`.
#[derive(Clone, Debug)]
pub struct TurnReport {
    pub series: Vec<Series>,
}

impl fmt::Display for TurnReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "turn = 1 message -> 2 tool calls -> final answer; default middleware chain; checkpoint per step"
        )?;
        for series in &self.series {
            writeln!(f, "{series}")?;
        }
        Ok(())
    }
}

/// A tool that answers instantly, so only the harness is measured.
fn echo_tool() -> ToolRef {
    let tool = FnTool::new(
        "echo",
        "Returns its text argument.",
        |args: Value| async move {
            Ok(ToolOutput::text(
                args.get("text").and_then(Value::as_str).unwrap_or_default(),
            ))
        },
    )
    .with_parameters(
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
    );
    Arc::new(tool)
}

fn turn_script() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::ToolCalls {
            text: String::new(),
            calls: vec![
                ("echo".into(), json!({"text": "a"})),
                ("echo".into(), json!({"text": "b"})),
            ],
        },
        ScriptedTurn::Text(vec!["done".into()]),
    ]
}

/// Runs `iterations` turns (after a warm-up) against each store backend.
pub async fn turn(iterations: usize) -> Result<TurnReport, BenchError> {
    let iterations = iterations.max(10);
    let dir = scratch_dir()?;
    let sled: StoreRef =
        Arc::new(SledStore::open(dir.join("store")).map_err(|e| BenchError::Setup(e.to_string()))?);
    let memory: StoreRef = Arc::new(MemoryStore::new());
    let mut series = Vec::new();
    for (label, store) in [("sled store", sled), ("in-memory store", memory)] {
        series.push(measure(label, store, iterations).await?);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(TurnReport { series })
}

/// The agent of the turn benches: the scripted turn, the echo tool, titles on, a checkpoint per
/// step into `threads`.
pub(super) fn turn_agent(
    threads: &ThreadStore,
    config: &Arc<AppConfig>,
) -> Result<crate::agent::Agent, BenchError> {
    let model = Arc::new(ScriptedModel::cycling("bench", turn_script()));
    let tools: Vec<ToolRef> = vec![echo_tool()];
    let features = RuntimeFeatures {
        auto_title: Feature::BuiltIn,
        ..RuntimeFeatures::default()
    };
    create_agent(
        model,
        tools,
        AgentOptions {
            features: Some(features),
            checkpointer: Some(Arc::new(threads.clone())),
            config: Some(config.clone()),
            ..Default::default()
        },
    )
    .map_err(|e| BenchError::Setup(e.to_string()))
}

async fn measure(label: &str, store: StoreRef, iterations: usize) -> Result<Series, BenchError> {
    let config = Arc::new(AppConfig::default());
    let threads = ThreadStore::new(store).map_err(|e| BenchError::Setup(e.to_string()))?;
    let agent = turn_agent(&threads, &config)?;
    let warmup = (iterations / 10).max(5);
    let mut samples = Vec::with_capacity(iterations);
    let cpu_start = process_cpu_time();
    for i in 0..warmup + iterations {
        if i == warmup {
            samples.clear();
        }
        let ctx = RunContext::new(format!("bench-{i}"), "bench", config.clone());
        let started = Instant::now();
        // Traced like a daemon run when `telemetry.otlp` is set (the cost of tracing on).
        let span = crate::telemetry::spans::run("lead", &ctx.thread_id, Some("bench"), "bench");
        let outcome = agent
            .run(ThreadState::default(), vec![Message::human("hi")], &ctx)
            .instrument(span.clone())
            .await;
        crate::telemetry::spans::record_stop(&span, outcome.stop.as_str(), false);
        let elapsed = started.elapsed();
        if let Some(error) = outcome.error {
            return Err(BenchError::Turn(error.message));
        }
        if i >= warmup {
            samples.push(elapsed);
        }
    }
    let cpu = process_cpu_time().saturating_sub(cpu_start);
    // CPU covers warm-up too; scale it to the measured share.
    let cpu = cpu.mul_f64(iterations as f64 / (warmup + iterations) as f64);
    Ok(Series::from_samples(label, samples, cpu))
}

/// The report of `antler bench agent`.
#[derive(Clone, Debug)]
pub struct FactoryReport {
    pub series: Vec<Series>,
}

impl fmt::Display for FactoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "lead agent factory call (no model call): skills scan, agent load, prompt, middleware chain"
        )?;
        for series in &self.series {
            writeln!(f, "{series}")?;
        }
        Ok(())
    }
}

const BENCH_SOUL: &str =
    "**Identity**\nA careful reviewer.\n\n**Core Traits**\n- Precise\n- Kind\n";

/// Times `make_lead_agent` for the default, custom and bootstrap branches (with the per-harness
/// cache, as the daemon runs it) and once more for a custom agent without any cache.
pub async fn factory(iterations: usize) -> Result<FactoryReport, BenchError> {
    let iterations = iterations.max(10);
    let dir = scratch_dir()?;
    let result = factory_in(&dir, iterations);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn factory_in(dir: &std::path::Path, iterations: usize) -> Result<FactoryReport, BenchError> {
    let setup = |e: &dyn fmt::Display| BenchError::Setup(e.to_string());
    let skills_dir = dir.join("skills");
    for (name, description) in [
        (
            "bootstrap",
            "Create a new custom agent through a short interview.",
        ),
        ("research", "Deep research with citations."),
        ("pdf", "Read and write PDF files."),
    ] {
        std::fs::create_dir_all(skills_dir.join(name)).map_err(|e| setup(&e))?;
        std::fs::write(
            skills_dir.join(name).join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n"),
        )
        .map_err(|e| setup(&e))?;
    }
    let mut config = AppConfig {
        data_dir: Some(dir.join("data")),
        ..Default::default()
    };
    config.sandbox.skills_path = Some(skills_dir);
    let config = Arc::new(config);
    let models = ModelRegistry::new().with_model(
        "bench",
        Arc::new(ScriptedModel::new("bench", [])),
        ModelConfig::default(),
    );
    let provider = Arc::new(HostSandboxProvider::new(
        ProviderSettings::from_config(&config, None),
        ExecMode::Local { allow_bash: false },
    ));
    let tools = ToolRegistry::from_config(&config, provider)
        .map_err(|problems| BenchError::Setup(format!("{} tool problems", problems.len())))?;
    let store = Arc::new(AgentStore::new(config.data_dir()));
    let mut agent = AgentConfig::new("bench-agent", "Reviews code");
    agent.tool_groups = Some(vec!["file:read".into()]);
    store
        .create(LOCAL_OPERATOR, "bench-agent", &agent, BENCH_SOUL)
        .map_err(|e| setup(&e))?;
    store.set_default_soul(BENCH_SOUL).map_err(|e| setup(&e))?;
    let cache = LeadAgentCache::new();
    let custom = RunOptions {
        agent_name: Some("bench-agent".into()),
        ..Default::default()
    };
    let bootstrap = RunOptions {
        is_bootstrap: true,
        agent_name: Some("new-agent".into()),
        ..Default::default()
    };
    let cases = [
        ("default agent", RunOptions::default(), true),
        ("custom agent", custom.clone(), true),
        ("bootstrap", bootstrap, true),
        ("custom agent, no cache", custom, false),
    ];
    let mut series = Vec::new();
    for (label, options, cached) in cases {
        let deps = LeadAgentDeps {
            models: &models,
            tools: Some(&tools),
            sandbox: None,
            checkpointer: None,
            users: RunUsers::alone(LOCAL_OPERATOR),
            agents: Some(store.clone()),
            cache: cached.then_some(&cache),
            memory: None,
            skills: None,
            approvals: None,
            scheduler: None,
        };
        let warmup = (iterations / 10).max(5);
        let mut samples = Vec::with_capacity(iterations);
        let cpu_start = process_cpu_time();
        for i in 0..warmup + iterations {
            let started = Instant::now();
            let lead = make_lead_agent(&options, &config, deps.clone())
                .map_err(|e| BenchError::Turn(e.to_string()))?;
            let elapsed = started.elapsed();
            drop(lead);
            if i >= warmup {
                samples.push(elapsed);
            }
        }
        let cpu = process_cpu_time().saturating_sub(cpu_start);
        let cpu = cpu.mul_f64(iterations as f64 / (warmup + iterations) as f64);
        series.push(Series::from_samples(label, samples, cpu));
    }
    Ok(FactoryReport { series })
}

fn scratch_dir() -> Result<PathBuf, BenchError> {
    let dir = std::env::temp_dir().join(format!("antler-bench-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::Setup(e.to_string()))?;
    Ok(dir)
}

/// User + system CPU time of this process, from `/proc/self/stat` (clock ticks; Linux only).
pub fn process_cpu_time() -> Duration {
    cpu_time_of("self")
}

/// User + system CPU time of a process (`"self"` or a pid) from `/proc/<pid>/stat`, in clock
/// ticks of 10 ms (Linux only; zero when unreadable).
pub fn cpu_time_of(pid: &str) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // Fields after the `(comm)` part; utime and stime are fields 14 and 15 overall.
    let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
        return Duration::ZERO;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let total = ticks(11) + ticks(12);
    Duration::from_secs_f64(total as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_right_samples() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        let s = Series::from_samples("x", samples, Duration::from_micros(500));
        assert_eq!(s.p50, Duration::from_micros(51));
        assert_eq!(s.p99, Duration::from_micros(99));
        assert_eq!(s.cpu_per_iter, Duration::from_micros(5));
        assert!(s.to_string().contains("p50="));
    }

    #[tokio::test]
    async fn a_short_factory_bench_covers_every_branch() {
        let report = factory(10).await.unwrap();
        let labels: Vec<&str> = report.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "default agent",
                "custom agent",
                "bootstrap",
                "custom agent, no cache"
            ]
        );
        assert!(report.series.iter().all(|s| s.samples == 10));
        assert!(report.to_string().contains("cpu/turn="));
    }

    #[tokio::test]
    async fn a_short_turn_bench_completes() {
        let report = turn(10).await.unwrap();
        assert_eq!(report.series.len(), 2);
        assert!(report.series.iter().all(|s| s.samples == 10));
    }
}
