//! `antler bench meter`: what metering and budgets add to each model call, on the sled store.
//!
//! Two measurements: one model call's bookkeeping alone (the budget check before it and the
//! recording after it, with every kind of limit configured, against metering without budgets),
//! and the `bench turn` turn (three model calls) with the run's account on and off, so the
//! per-call figure can be read off a whole turn too.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::agent_api::{CallMeter, RunContext, UsageKind};
use crate::cli::bench::{BenchError, Series, process_cpu_time, scratch_dir, turn_agent};
use crate::config::AppConfig;
use crate::config::budgets::{BudgetLimits, ModelPrice};
use crate::usage::{Account, UsageStore};
use antler_store::messages::{Message, Usage};
use antler_store::state::ThreadState;
use antler_store::{SledStore, StoreRef, ThreadStore};

/// The report of `antler bench meter`.
#[derive(Clone, Debug)]
pub struct MeterReport {
    pub calls: Vec<Series>,
    pub turns: Vec<Series>,
}

impl fmt::Display for MeterReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "one model call's metering (sled): budget check before it + usage, thread and ledger records after it"
        )?;
        for series in &self.calls {
            writeln!(f, "{series}")?;
        }
        writeln!(
            f,
            "turn = 1 message -> 2 tool calls -> final answer (3 model calls), sled store"
        )?;
        for series in &self.turns {
            writeln!(f, "{series}")?;
        }
        if let [off, on] = self.turns.as_slice() {
            let per_call =
                |a: Duration, b: Duration| (a.as_secs_f64() - b.as_secs_f64()) * 1e6 / 3.0;
            writeln!(
                f,
                "added per model call: p50 {:.1} µs, cpu {:.1} µs",
                per_call(on.p50, off.p50),
                per_call(on.cpu_per_iter, off.cpu_per_iter)
            )?;
        }
        Ok(())
    }
}

/// Every limit configured (never reached), so each check reads what it would in production.
fn budgets_config() -> AppConfig {
    let mut config = AppConfig::default();
    config.budgets.default = Some(BudgetLimits {
        daily_tokens: Some(u64::MAX / 2),
        daily_cost: Some(1e12),
        monthly_cost: Some(1e12),
    });
    config
        .budgets
        .agents
        .insert("bench-agent".into(), BudgetLimits::from(u64::MAX / 2));
    for model in ["bench", "main"] {
        config.pricing.models.insert(
            model.into(),
            ModelPrice {
                input: 2.5,
                output: 10.0,
                cached_input: Some(1.25),
            },
        );
    }
    config
}

pub async fn meter(iterations: usize) -> Result<MeterReport, BenchError> {
    let iterations = iterations.max(10);
    let dir = scratch_dir()?;
    let setup = |e: &dyn fmt::Display| BenchError::Setup(e.to_string());
    let store: StoreRef = Arc::new(SledStore::open(dir.join("store")).map_err(|e| setup(&e))?);
    let with_budgets = Arc::new(budgets_config());
    let without = Arc::new(AppConfig::default());
    let mut calls = Vec::new();
    for (label, config) in [
        ("call: check + record, budgets on", &with_budgets),
        ("call: check + record, no budgets", &without),
    ] {
        calls.push(measure_calls(label, &store, config, iterations));
    }
    let mut turns = Vec::new();
    for (label, metered) in [
        ("turn: no account", false),
        ("turn: account + budgets", true),
    ] {
        turns.push(measure_turns(label, &store, &with_budgets, metered, iterations).await?);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(MeterReport { calls, turns })
}

fn measure_calls(
    label: &str,
    store: &StoreRef,
    config: &Arc<AppConfig>,
    iterations: usize,
) -> Series {
    let usage = UsageStore::new(store.clone());
    let account = Account::new(
        usage,
        config.clone(),
        "bench-user",
        Some("bench-agent"),
        "bench-thread",
    );
    let spent = Usage {
        input_tokens: 1200,
        output_tokens: 300,
        total_tokens: 1500,
        cached_input_tokens: 800,
    };
    let warmup = (iterations / 10).max(5);
    let mut samples = Vec::with_capacity(iterations);
    let cpu_start = process_cpu_time();
    for i in 0..warmup + iterations {
        let started = Instant::now();
        let admitted = account.admit(UsageKind::Lead).is_ok();
        account.record(UsageKind::Lead, "main", &spent, admitted);
        if i >= warmup {
            samples.push(started.elapsed());
        }
    }
    let cpu = process_cpu_time().saturating_sub(cpu_start);
    let cpu = cpu.mul_f64(iterations as f64 / (warmup + iterations) as f64);
    Series::from_samples(label, samples, cpu)
}

async fn measure_turns(
    label: &str,
    store: &StoreRef,
    config: &Arc<AppConfig>,
    metered: bool,
    iterations: usize,
) -> Result<Series, BenchError> {
    let threads = ThreadStore::new(store.clone()).map_err(|e| BenchError::Setup(e.to_string()))?;
    let agent = turn_agent(&threads, config)?;
    let warmup = (iterations / 10).max(5);
    let mut samples = Vec::with_capacity(iterations);
    let cpu_start = process_cpu_time();
    for i in 0..warmup + iterations {
        let thread_id = format!("bench-{}-{i}", if metered { "on" } else { "off" });
        let mut ctx = RunContext::new(thread_id.clone(), "bench", config.clone());
        if metered {
            let usage = UsageStore::new(store.clone());
            let account = Account::new(usage, config.clone(), "bench", None, &thread_id);
            ctx.meter = Some(Arc::new(account));
        }
        let started = Instant::now();
        let outcome = agent
            .run(ThreadState::default(), vec![Message::human("hi")], &ctx)
            .await;
        let elapsed = started.elapsed();
        if let Some(error) = outcome.error {
            return Err(BenchError::Turn(error.message));
        }
        if i >= warmup {
            samples.push(elapsed);
        }
    }
    let cpu = process_cpu_time().saturating_sub(cpu_start);
    let cpu = cpu.mul_f64(iterations as f64 / (warmup + iterations) as f64);
    Ok(Series::from_samples(label, samples, cpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_short_meter_bench_completes_and_records_its_calls() {
        let report = meter(10).await.unwrap();
        let text = report.to_string();
        assert_eq!(report.calls.len(), 2);
        assert!(text.contains("added per model call"), "{text}");
        assert!(text.contains("call: check + record, budgets on"), "{text}");
    }
}
