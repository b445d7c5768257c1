//! Test entry points that must run in a separate process (crash and restart scenarios).
//!
//! `antler __crash-child <data_dir>` calls [`crash_child`]; the persistence test kills that
//! process with SIGKILL mid-run and checks what a fresh open of the same `data_dir` sees.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, json};

use crate::agent::Agent;
use crate::agent_api::{EventSink, RunContext, RunEvent};
use crate::config::AppConfig;
use crate::model::{ScriptedModel, ScriptedTurn};
use antler_store::messages::Message;
use antler_store::{SledStore, ThreadStatus, ThreadStore};

/// The thread the crash child runs on.
pub const CRASH_THREAD_ID: &str = "crash-thread";
/// The owner of [`CRASH_THREAD_ID`].
pub const CRASH_USER_ID: &str = "crash-user";
/// Printed on stdout once the turn's completed steps are checkpointed and flushed; kill the
/// child after it.
pub const CRASH_READY_LINE: &str = "antler-crash-child: ready";
/// Turns the thread has before the turn that is killed (a long thread: a checkpoint must not
/// depend on rewriting its history).
pub const CRASH_HISTORY_TURNS: usize = 150;
/// Written in the data dir before the ready line: the state after the last completed step
/// (JSON), what a reopened store must return.
pub const CRASH_EXPECTED_FILE: &str = "crash-expected-state.json";
/// The child gives up (and exits) if nobody kills it within this time.
const SELF_DESTRUCT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum CrashChildError {
    #[error(transparent)]
    Store(#[from] antler_store::StoreError),
    #[error(transparent)]
    Thread(#[from] antler_store::threads::ThreadError),
    #[error("the run ended before it could be killed: {0}")]
    RunEnded(String),
    #[error("could not write the ready line: {0}")]
    Io(#[from] std::io::Error),
    #[error("a history turn failed: {0}")]
    History(String),
}

/// Builds a long thread on a sled store in `data_dir/store`, then runs a turn on it: the input,
/// a model step and a tool step complete (three checkpoints), then the model streams so slowly
/// that the parent can kill the process mid-step.
pub async fn crash_child(data_dir: &Path) -> Result<(), CrashChildError> {
    let store = Arc::new(SledStore::open(data_dir.join("store"))?);
    let threads = ThreadStore::new(store)?;
    threads.create(CRASH_USER_ID, Some(CRASH_THREAD_ID.into()), Map::new())?;
    let history = build_history(&threads).await?;
    threads.set_status(CRASH_THREAD_ID, ThreadStatus::Busy)?;
    threads.flush()?;
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            ScriptedTurn::ToolCalls {
                text: "checking".into(),
                calls: vec![("lookup".into(), json!({"q": "x"}))],
            },
            ScriptedTurn::Slow {
                chunks: vec!["never".into(), " finished".into()],
                delay: SELF_DESTRUCT,
            },
        ],
    ));
    let agent = Agent {
        name: "crash-child".into(),
        model,
        tools: Vec::new(),
        middleware: Vec::new(),
        system_prompt: None,
        recursion_limit: 10,
        checkpointer: Some(Arc::new(threads.clone())),
    };
    let (events, mut receiver) = EventSink::channel(true);
    let mut ctx = RunContext::new(
        CRASH_THREAD_ID,
        CRASH_USER_ID,
        Arc::new(AppConfig::default()),
    );
    ctx.events = events;
    let run = agent.run(history, vec![Message::human("start")], &ctx);
    let signal = async {
        let mut completed_steps = 0;
        while let Some(event) = receiver.recv().await {
            // `Values` follows each step's checkpoint; after the third one (input, model, tool)
            // the run is inside the slow model call and checkpoints nothing more.
            if let RunEvent::Values { state, .. } = event {
                completed_steps += 1;
                if completed_steps == 3 {
                    let expected = serde_json::to_vec(&*state).map_err(std::io::Error::other)?;
                    std::fs::write(data_dir.join(CRASH_EXPECTED_FILE), expected)?;
                    break;
                }
            }
        }
        let durable = {
            let threads = threads.clone();
            tokio::task::spawn_blocking(move || threads.wait_durable(Duration::from_secs(10)))
                .await
                .unwrap_or(false)
        };
        if durable {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{CRASH_READY_LINE}")?;
            stdout.flush()?;
        }
        std::future::pending::<Result<(), std::io::Error>>().await
    };
    tokio::select! {
        outcome = run => Err(CrashChildError::RunEnded(format!("{:?}", outcome.stop))),
        written = signal => written.map_err(CrashChildError::Io),
    }
}

/// [`CRASH_HISTORY_TURNS`] completed turns on the crash thread; returns its state.
async fn build_history(
    threads: &ThreadStore,
) -> Result<antler_store::state::ThreadState, CrashChildError> {
    let model = Arc::new(ScriptedModel::cycling(
        "history",
        vec![ScriptedTurn::Text(vec![
            "an answer of some length ".repeat(8),
        ])],
    ));
    let agent = Agent {
        name: "history".into(),
        model,
        tools: Vec::new(),
        middleware: Vec::new(),
        system_prompt: None,
        recursion_limit: 10,
        checkpointer: Some(Arc::new(threads.clone())),
    };
    let mut state = antler_store::state::ThreadState::default();
    for turn in 0..CRASH_HISTORY_TURNS {
        let ctx = RunContext::new(
            CRASH_THREAD_ID,
            CRASH_USER_ID,
            Arc::new(AppConfig::default()),
        );
        let input = vec![Message::human(format!("question {turn}"))];
        let outcome = agent.run(state, input, &ctx).await;
        if let Some(error) = outcome.error {
            return Err(CrashChildError::History(error.message));
        }
        state = outcome.state;
    }
    Ok(state)
}
