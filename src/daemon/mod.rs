//! The daemon: HTTP server, config watcher and harness as owned tasks, drained on shutdown.
//!
//! Shutdown order (first SIGTERM/SIGINT): stop accepting connections and runs → let runs in
//! flight finish up to `gateway.shutdown_grace_seconds` → cancel what is left (their threads end
//! `Interrupted`) → flush the store. A second signal skips the grace period.

pub mod heap_trim;
pub mod listener;
pub mod local_socket;
mod membership;
pub mod runtime_file;
pub mod service_manager;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::channels::{ChannelHub, Channels};
use crate::config::{ConfigHandle, ConfigWatcher, EnvSource, PollOutcome, ReloadPhase};
use crate::daemon::listener::ListenerLimits;
use crate::daemon::service_manager::ServiceManager;
use crate::harness::{Harness, HarnessError};
use crate::http::{AppState, router};

/// Tells systemd about a SIGHUP reload: RELOADING while it runs, READY with what happened.
fn reload_hook(manager: ServiceManager) -> crate::config::ReloadHook {
    Box::new(move |phase| match phase {
        ReloadPhase::Started => manager.reloading(),
        ReloadPhase::Finished(outcome) => manager.ready(match outcome {
            PollOutcome::Reloaded => "config reloaded",
            PollOutcome::Unchanged => "config unchanged",
            PollOutcome::Rejected => "config change rejected; the previous config stays",
            PollOutcome::Unreadable => "config file unreadable; the previous config stays",
        }),
    })
}

/// How long the HTTP server gets to close its connections after the runs were drained.
const HTTP_CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The longest a SIGTERM stop can take with `grace` for runs in flight: the drain, the
/// cancelled runs winding down, the memory flush (a model that is down makes every pending
/// update retry until the deadline), then the channels and the HTTP server closing. The
/// systemd unit's `TimeoutStopSec` and compose's `stop_grace_period` leave room for it, so a
/// stop ends cleanly instead of by SIGKILL.
pub(crate) fn longest_stop(grace: Duration) -> Duration {
    grace
        + crate::harness::CANCEL_GRACE
        + crate::harness::memory_queue::MEMORY_FLUSH_DEADLINE
        + HTTP_CLOSE_GRACE
        + HTTP_CLOSE_GRACE
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("gateway.listen {0:?} is not a socket address like 127.0.0.1:8787")]
    BadListen(String),
    #[error(
        "could not listen on {addr}: {detail}; is another antler (or another program) using the \
         port? Stop it, or listen elsewhere: set ANTLER_LISTEN=127.0.0.1:8788 (the shipped \
         config reads it) or gateway.listen in the config"
    )]
    Bind { addr: SocketAddr, detail: String },
    #[error(transparent)]
    Harness(#[from] HarnessError),
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    #[error("could not join the cluster: {0}; check that the store (store.backend) answers")]
    Cluster(String),
    #[error(
        "another daemon named {0:?} keeps its lease in this store: give every daemon its own \
         cluster.instance_id (or leave it empty for hostname-pid)"
    )]
    InstanceTaken(String),
    #[error("the HTTP server failed: {0}")]
    Serve(String),
}

/// Signals from the outside world: `graceful` starts the drain, `force` cuts it short.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    pub graceful: CancellationToken,
    pub force: CancellationToken,
}

/// What the daemon needs besides the configuration.
pub struct DaemonOptions {
    /// The file to watch for hot reload (`None` when running on the embedded default).
    pub config_path: Option<PathBuf>,
    /// Without `config_path`: the config search path's files, watched so one created after the
    /// start is loaded (see `config::config_candidates`); empty watches nothing.
    pub config_candidates: Vec<PathBuf>,
    pub env: Arc<dyn EnvSource + Send + Sync>,
    /// Called once the server accepts connections, with the bound address.
    pub on_ready: Option<Box<dyn FnOnce(SocketAddr) + Send>>,
    /// Notified on SIGHUP: re-read the config file now (with `config_path`).
    pub reload_signal: Option<Arc<tokio::sync::Notify>>,
    /// What converts documents and fetched pages; `None`: this binary's `convert` (a daemon
    /// run inside another binary, a test, names the `antler` binary).
    pub converter: Option<antler_convert::Program>,
}

/// The address to bind, checked before anything binds.
///
/// A non-loopback address without `gateway.api_tokens` is accepted: the daemon then serves
/// probes and channel webhooks and locks the API (see `http::auth`), so a container is
/// reachable without a custom config and nothing is exposed before a token is set.
pub fn listen_address(config: &crate::config::AppConfig) -> Result<SocketAddr, DaemonError> {
    config
        .gateway
        .listen
        .parse()
        .map_err(|_| DaemonError::BadListen(config.gateway.listen.clone()))
}

/// Runs the daemon until `shutdown.graceful` fires, then drains and returns.
pub async fn run(
    config: ConfigHandle,
    options: DaemonOptions,
    shutdown: Shutdown,
) -> Result<(), DaemonError> {
    let snapshot = config.current();
    let addr = listen_address(&snapshot)?;
    config.set_origin(match &options.config_path {
        Some(path) => crate::config::ConfigOrigin::File(path.clone()),
        None => crate::config::ConfigOrigin::Embedded,
    });
    let extensions = crate::mcp::extensions_path(
        options.env.as_ref(),
        options.config_path.as_deref(),
        &snapshot.data_dir(),
    );
    let harness = open_harness(&config, &snapshot, options.converter.clone(), extensions).await?;
    // Held for the daemon's life; the harness's shutdown releases it with the other leases.
    let _member = membership::join(harness.cluster()).await?;
    let limits = ListenerLimits::from_config(&snapshot.gateway);
    let bind_error = |e: std::io::Error| DaemonError::Bind {
        addr,
        detail: e.to_string(),
    };
    let listener = crate::daemon::listener::bind(addr, limits.backlog).map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;

    let tasks = tokio_util::task::TaskTracker::new();
    let stop_accepting = CancellationToken::new();
    let watcher_stop = CancellationToken::new();
    let hub = ChannelHub::default();
    if let Some(warning) = crate::config::check::locked_api_warning(&snapshot) {
        tracing::warn!(%bound, "{warning}");
    }
    let auth_failures = Arc::new(crate::http::AuthFailures::default());
    let model_probe = crate::model::probe::ModelProbe::default();
    let hooks = crate::hooks::Hooks::new(harness.clone());
    let app = router(Arc::new(AppState {
        harness: harness.clone(),
        config: config.clone(),
        channels: hub.clone(),
        exposed: !bound.ip().is_loopback(),
        model_probe: model_probe.clone(),
        auth_failures: auth_failures.clone(),
        hooks: hooks.clone(),
        api_runs: Arc::new(crate::http::ApiRuns::open(harness.clone())),
    }));
    // Bound only now that the store's lock is ours: a socket file left over is stale.
    let socket_file = serve_local_socket(
        &snapshot.data_dir(),
        harness.cluster(),
        &app,
        &tasks,
        &stop_accepting,
    );
    let server = tasks.spawn(crate::daemon::listener::serve(
        listener,
        app,
        limits,
        stop_accepting.clone(),
    ));
    let failures_stop = watcher_stop.clone();
    tasks.spawn(async move { auth_failures.log_every_minute(failures_stop).await });
    let manager = ServiceManager::default();
    spawn_upkeep(&harness, &config, &options, &manager, &tasks, &watcher_stop);
    let channels = Channels::start(harness.clone(), config.clone(), hub);
    // Webhook deliveries for a chat are journalled there; those a stop left undone go on.
    hooks.set_chat_delivery(channels.chat_delivery());
    hooks.recover();
    // After the channels installed their hook: a chat's slot recovered at start reaches it.
    harness.start_schedules();
    tasks.close();
    log_default_model(&snapshot);
    warn_about_default_model(&snapshot, &model_probe).await;
    let record = socket_file
        .as_ref()
        .and_then(|file| publish_record(&options, file.path(), &snapshot, bound));
    announce_ready(&config, options, socket_file.as_ref(), bound, &manager);

    shutdown.graceful.cancelled().await;
    manager.stopping();
    stop_accepting.cancel();
    watcher_stop.cancel();
    channels.stop_intake();
    hooks.stop();
    drain(&config, &harness, &shutdown).await?;
    if tokio::time::timeout(HTTP_CLOSE_GRACE, hooks.wait())
        .await
        .is_err()
    {
        tracing::warn!("Webhook deliveries still finishing after the drain");
    }
    channels.wait(HTTP_CLOSE_GRACE).await;
    if tokio::time::timeout(HTTP_CLOSE_GRACE, tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("HTTP connections still open after the drain; closing anyway");
    } else if let Err(e) = server.await {
        return Err(DaemonError::Serve(e.to_string()));
    }
    drop(record);
    drop(socket_file);
    tracing::info!("Antler stopped cleanly");
    Ok(())
}

/// Opens the harness (the store's lock, models, MCP servers of `extensions`) and probes the
/// sandbox, as config.yaml promises: a sandbox that cannot start fails here, loudly, rather
/// than on some user's first run.
async fn open_harness(
    config: &ConfigHandle,
    snapshot: &crate::config::AppConfig,
    converter: Option<antler_convert::Program>,
    extensions: PathBuf,
) -> Result<Arc<Harness>, DaemonError> {
    crate::metrics::install();
    crate::metrics::register_known(&known_labels(snapshot));
    let harness = Arc::new(Harness::open(config.clone())?);
    if let Some(program) = converter {
        harness.converter().set_program(program);
    }
    harness.mcp().set_path(extensions);
    harness.prepare_sandbox().await?;
    Ok(harness)
}

/// The daemon's housekeeping, stopped by `stop`: heap trimming, the config watcher (with SIGHUP
/// reloads told to systemd), systemd's watchdog and rollback reports; and the harness's jobs
/// (store retention, claimed across instances), stopped by its shutdown.
fn spawn_upkeep(
    harness: &Arc<Harness>,
    config: &ConfigHandle,
    options: &DaemonOptions,
    manager: &ServiceManager,
    tasks: &tokio_util::task::TaskTracker,
    stop: &CancellationToken,
) {
    harness.start_jobs();
    tasks.spawn(crate::daemon::heap_trim::run(
        (**harness).clone(),
        stop.clone(),
    ));
    let watcher = match options.config_path.clone() {
        Some(path) => Some(ConfigWatcher::new(
            path,
            config.clone(),
            options.env.clone(),
        )),
        None if !options.config_candidates.is_empty() => Some(ConfigWatcher::awaiting(
            options.config_candidates.clone(),
            config.clone(),
            options.env.clone(),
        )),
        None => None,
    };
    if let Some(mut watcher) = watcher {
        if let Some(signal) = options.reload_signal.clone() {
            watcher = watcher.with_reload_signal(signal, reload_hook(manager.clone()));
        }
        tasks.spawn(watcher.spawn(stop.clone()));
    }
    if let Some(watchdog) = manager.spawn_watchdog(harness.clone(), stop.clone()) {
        tasks.spawn(watchdog);
    }
    tasks.spawn(
        manager
            .clone()
            .report_rollbacks(config.clone(), stop.clone()),
    );
}

/// Says the daemon is ready: the log line, the caller's `on_ready` (scripts read the bound
/// address) and systemd's READY.
fn announce_ready(
    config: &ConfigHandle,
    options: DaemonOptions,
    socket_file: Option<&crate::daemon::local_socket::SocketFile>,
    bound: SocketAddr,
    manager: &ServiceManager,
) {
    let snapshot = config.current();
    let socket = socket_file.map_or("(none)".to_string(), |file| {
        file.path().display().to_string()
    });
    let origin = config.origin();
    tracing::info!(%bound, %socket, data_dir = %snapshot.data_dir().display(), config = %origin, "Antler is ready");
    if let (crate::config::ConfigOrigin::Embedded, Some(first)) =
        (&origin, options.config_candidates.first())
    {
        tracing::info!(create = %first.display(), "No config file found: running on the embedded default config; a config file created there is loaded without a restart");
    }
    if let Some(on_ready) = options.on_ready {
        on_ready(bound);
    }
    manager.ready(&format!("serving on {bound}"));
}

/// Lets runs in flight finish within `gateway.shutdown_grace_seconds` (read now: a reload may
/// have changed it), or cancels them at once on a second signal.
async fn drain(
    config: &ConfigHandle,
    harness: &Harness,
    shutdown: &Shutdown,
) -> Result<(), DaemonError> {
    let grace = Duration::from_secs(config.current().gateway.shutdown_grace_seconds);
    tracing::info!(
        ?grace,
        at_most = ?longest_stop(grace),
        "Shutting down: finishing runs in flight"
    );
    tokio::select! {
        result = harness.shutdown(grace) => result?,
        _ = shutdown.force.cancelled() => {
            tracing::warn!("Second signal: cancelling runs in flight now");
            harness.shutdown(Duration::ZERO).await?;
        }
    }
    Ok(())
}

/// Records this daemon for the CLI of its user (see [`crate::daemon::runtime_file`]); without it the CLI
/// still finds the daemon through its config's data dir.
fn publish_record(
    options: &DaemonOptions,
    socket: &std::path::Path,
    config: &crate::config::AppConfig,
    bound: SocketAddr,
) -> Option<crate::daemon::runtime_file::RecordFile> {
    let record = crate::daemon::runtime_file::DaemonRecord {
        pid: std::process::id(),
        socket: socket.to_path_buf(),
        data_dir: config.data_dir(),
        config: options
            .config_path
            .as_deref()
            .map(crate::daemon::runtime_file::canonical),
        listen: bound.to_string(),
    };
    match crate::daemon::runtime_file::publish(options.env.as_ref(), &record) {
        Ok(file) => file,
        Err(error) => {
            tracing::warn!(%error, "Could not record this daemon for the CLI; commands run from elsewhere may not find it");
            None
        }
    }
}

/// Serves `app` on the data dir's Unix socket as the local operator (see
/// [`crate::daemon::local_socket`]), owned by `tasks` and stopped with the TCP server. Without the
/// socket the daemon still serves HTTP; the CLI then cannot reach it, which the log says.
fn serve_local_socket(
    data_dir: &std::path::Path,
    cluster: &crate::cluster::Cluster,
    app: &axum::Router,
    tasks: &tokio_util::task::TaskTracker,
    stop: &CancellationToken,
) -> Option<crate::daemon::local_socket::SocketFile> {
    // A store one process opens (sled) means one daemon per data dir; a shared one may mean
    // several daemons on one shared data dir, each with its own socket.
    let bound = if cluster.store_is_exclusive() {
        crate::daemon::local_socket::bind(data_dir)
    } else {
        crate::daemon::local_socket::bind_instance(data_dir, cluster.instance_id())
    };
    let (listener, file) = match bound {
        Ok(bound) => bound,
        Err(error) => {
            tracing::error!(%error, "No local socket: antler chat, agents and status cannot reach this daemon");
            return None;
        }
    };
    let app = app
        .clone()
        .layer(axum::Extension(crate::http::peer::LocalOperator));
    let stop = stop.clone();
    tasks.spawn(async move {
        if let Err(error) = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
        {
            tracing::error!(%error, "The local socket server failed");
        }
    });
    Some(file)
}

/// Says which model answers by default and where, so a wrong endpoint shows at start.
/// Probes the default model once before the daemon says it is ready (at most the probe's
/// timeout; `/readyz` reuses the answer): a model that cannot answer is a warning at start,
/// naming what to set, instead of a surprise at the first run.
async fn warn_about_default_model(
    config: &crate::config::AppConfig,
    probe: &crate::model::probe::ModelProbe,
) {
    let Some(model) = config.default_model() else {
        return;
    };
    let answer = probe.check(model).await;
    if let Some(problem) = &answer.problem {
        let state = if answer.reachable {
            "answers, but"
        } else {
            "is unreachable:"
        };
        tracing::warn!(
            model = %model.name,
            endpoint = %answer.endpoint,
            "The default model {state} {problem}; runs will fail until that is fixed"
        );
    }
}

/// The label values a fresh `/metrics` shows at 0: every stop reason and error code, and the
/// models, tools and enabled channels of the config the daemon starts with.
fn known_labels(config: &crate::config::AppConfig) -> crate::metrics::KnownLabels {
    use crate::agent_api::{ErrorCode, StopReason};
    crate::metrics::KnownLabels {
        stop_reasons: StopReason::ALL.iter().map(|r| r.as_str()).collect(),
        error_codes: ErrorCode::ALL.iter().map(|c| c.as_str()).collect(),
        models: config.models.iter().map(|m| m.name.clone()).collect(),
        tools: crate::tools::registry::configured_tool_names(config),
        channels: config
            .channels
            .sections()
            .iter()
            .filter(|section| section.enabled())
            .map(|section| section.name().to_string())
            .collect(),
    }
}

fn log_default_model(config: &crate::config::AppConfig) {
    use crate::model::display_endpoint;
    use crate::model::probe::provider_name;
    match config.default_model() {
        Some(model) => tracing::info!(
            model = %model.name,
            provider = %provider_name(&model.provider),
            model_id = %model.model,
            endpoint = %display_endpoint(&model.base_url),
            "Default model"
        ),
        None => tracing::warn!("No model is configured; runs will fail until models[] has one"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ApiToken, AppConfig, Secret};

    #[test]
    fn the_unit_and_compose_stop_timeouts_cover_the_longest_clean_stop() {
        let grace = Duration::from_secs(AppConfig::default().gateway.shutdown_grace_seconds);
        let longest = longest_stop(grace).as_secs();
        let unit = include_str!("../../systemd/antler.service");
        let unit_timeout: u64 = unit
            .lines()
            .find_map(|line| line.strip_prefix("TimeoutStopSec="))
            .expect("the unit sets TimeoutStopSec")
            .trim()
            .parse()
            .unwrap();
        let compose = include_str!("../../docker-compose.yml");
        let compose_timeout: u64 = compose
            .lines()
            .find_map(|line| line.trim().strip_prefix("stop_grace_period:"))
            .expect("compose sets stop_grace_period")
            .trim()
            .trim_end_matches('s')
            .parse()
            .unwrap();
        assert!(unit_timeout > longest, "{unit_timeout} s <= {longest} s");
        assert!(
            compose_timeout > longest,
            "{compose_timeout} s <= {longest} s"
        );
    }

    #[test]
    fn any_socket_address_is_accepted_with_or_without_tokens() {
        let mut config = AppConfig::default();
        config.gateway.listen = "0.0.0.0:8787".into();
        assert_eq!(
            listen_address(&config).unwrap(),
            "0.0.0.0:8787".parse::<SocketAddr>().unwrap()
        );
        config.gateway.api_tokens.push(ApiToken {
            token: Secret::new("t"),
            user: "alice".into(),
        });
        assert!(listen_address(&config).is_ok());
        config.gateway.listen = "127.0.0.1:0".into();
        config.gateway.api_tokens.clear();
        assert!(listen_address(&config).is_ok());
        config.gateway.listen = "nonsense".into();
        assert!(matches!(
            listen_address(&config),
            Err(DaemonError::BadListen(_))
        ));
    }
}
