//! The daemon: HTTP server, config watcher and harness as owned tasks, drained on shutdown.
//!
//! Shutdown order (first SIGTERM/SIGINT): stop accepting connections and runs → let runs in
//! flight finish up to `gateway.shutdown_grace_seconds` → cancel what is left (their threads end
//! `Interrupted`) → flush the store. A second signal skips the grace period.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::channels::{ChannelHub, Channels};
use crate::config::{ConfigHandle, ConfigWatcher, EnvSource};
use crate::harness::{Harness, HarnessError};
use crate::http::{AppState, router};

/// How long the HTTP server gets to close its connections after the runs were drained.
const HTTP_CLOSE_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("gateway.listen {0:?} is not a socket address like 127.0.0.1:8787")]
    BadListen(String),
    #[error(
        "refusing to listen on {0}, a non-loopback address, without any gateway.api_tokens: \
         anyone on the network could drive the agent. Add a token (gateway.api_tokens: \
         [{{token: $ANTLER_API_TOKEN, user: you}}]) or listen on 127.0.0.1"
    )]
    InsecureListen(SocketAddr),
    #[error("could not listen on {addr}: {detail}; is another process using the port?")]
    Bind { addr: SocketAddr, detail: String },
    #[error(transparent)]
    Harness(#[from] HarnessError),
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
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
    pub env: Arc<dyn EnvSource + Send + Sync>,
    /// Called once the server accepts connections, with the bound address.
    pub on_ready: Option<Box<dyn FnOnce(SocketAddr) + Send>>,
}

/// Checks the listen address against the tokens before anything binds.
pub fn listen_address(config: &crate::config::AppConfig) -> Result<SocketAddr, DaemonError> {
    let addr: SocketAddr = config
        .gateway
        .listen
        .parse()
        .map_err(|_| DaemonError::BadListen(config.gateway.listen.clone()))?;
    if !addr.ip().is_loopback() && config.gateway.api_tokens.is_empty() {
        return Err(DaemonError::InsecureListen(addr));
    }
    Ok(addr)
}

/// Runs the daemon until `shutdown.graceful` fires, then drains and returns.
pub async fn run(
    config: ConfigHandle,
    options: DaemonOptions,
    shutdown: Shutdown,
) -> Result<(), DaemonError> {
    let snapshot = config.current();
    let addr = listen_address(&snapshot)?;
    let harness = Arc::new(Harness::open(config.clone())?);
    // Probed now, as config.yaml promises: a sandbox that cannot start fails here, loudly,
    // rather than on some user's first run.
    harness.prepare_sandbox().await?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| DaemonError::Bind {
            addr,
            detail: e.to_string(),
        })?;
    let bound = listener.local_addr().map_err(|e| DaemonError::Bind {
        addr,
        detail: e.to_string(),
    })?;

    let tasks = tokio_util::task::TaskTracker::new();
    let stop_accepting = CancellationToken::new();
    let hub = ChannelHub::default();
    let app = router(Arc::new(AppState {
        harness: harness.clone(),
        config: config.clone(),
        channels: hub.clone(),
    }));
    let server_stop = stop_accepting.clone();
    let server = tasks.spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(server_stop.cancelled_owned())
            .await
    });
    let watcher_stop = CancellationToken::new();
    if let Some(path) = options.config_path {
        tasks.spawn(
            ConfigWatcher::new(path, config.clone(), options.env.clone())
                .spawn(watcher_stop.clone()),
        );
    }
    let channels = Channels::start(harness.clone(), config.clone(), hub);
    tasks.close();
    tracing::info!(%bound, data_dir = %snapshot.data_dir().display(), "Antler is ready");
    if let Some(on_ready) = options.on_ready {
        on_ready(bound);
    }

    shutdown.graceful.cancelled().await;
    let grace = Duration::from_secs(config.current().gateway.shutdown_grace_seconds);
    tracing::info!(?grace, "Shutting down: finishing runs in flight");
    stop_accepting.cancel();
    watcher_stop.cancel();
    channels.stop_intake();
    tokio::select! {
        result = harness.shutdown(grace) => result?,
        _ = shutdown.force.cancelled() => {
            tracing::warn!("Second signal: cancelling runs in flight now");
            harness.shutdown(Duration::ZERO).await?;
        }
    }
    channels.wait(HTTP_CLOSE_GRACE).await;
    if tokio::time::timeout(HTTP_CLOSE_GRACE, tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("HTTP connections still open after the drain; closing anyway");
    } else if let Ok(Err(e)) = server.await {
        return Err(DaemonError::Serve(e.to_string()));
    }
    tracing::info!("Antler stopped cleanly");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ApiToken, AppConfig, Secret};

    #[test]
    fn non_loopback_needs_a_token() {
        let mut config = AppConfig::default();
        config.gateway.listen = "0.0.0.0:8787".into();
        assert!(matches!(
            listen_address(&config),
            Err(DaemonError::InsecureListen(_))
        ));
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
