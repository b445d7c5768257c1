//! `antler run` (the default): the daemon in the foreground until SIGTERM/SIGINT.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use crate::config::{ConfigHandle, EXIT_CONFIG_INVALID, LoadedConfig, ProcessEnv};
use crate::daemon::{DaemonOptions, Shutdown};

/// Runs the daemon on `loaded` until it is stopped; `cwd` finds the config file a later
/// SIGHUP re-reads when none was named.
pub async fn run(loaded: LoadedConfig, cwd: &Path) -> anyhow::Result<ExitCode> {
    let config_path = loaded.origin.file().map(Path::to_path_buf);
    let config_candidates = match config_path {
        Some(_) => Vec::new(),
        None => crate::config::config_candidates(&ProcessEnv, cwd),
    };
    if let Err(e) = crate::daemon::listen_address(&loaded.config) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(EXIT_CONFIG_INVALID as u8));
    }
    let config = ConfigHandle::fixed(loaded.config);
    let shutdown = Shutdown::default();
    let reload = Arc::new(tokio::sync::Notify::new());
    spawn_signal_handler(shutdown.clone(), reload.clone())?;
    let options = DaemonOptions {
        config_path,
        config_candidates,
        env: Arc::new(ProcessEnv),
        on_ready: Some(Box::new(|addr| {
            // Scripts and tests read the bound address (the port may be 0 in the config).
            println!("antler listening on http://{addr}");
        })),
        reload_signal: Some(reload),
        converter: None,
    };
    crate::daemon::run(config, options, shutdown)
        .await
        .context("the daemon stopped with an error")?;
    Ok(ExitCode::SUCCESS)
}

/// First SIGTERM/SIGINT starts the graceful drain; a second one cuts it short. SIGHUP re-reads
/// the config file (`systemctl reload antler`). The tasks live as long as the process.
fn spawn_signal_handler(
    shutdown: Shutdown,
    reload: Arc<tokio::sync::Notify>,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
    // The signal handlers live as long as the process: nothing outlives them to wait for.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            reload.notify_one();
        }
    });
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move {
        let mut seen = 0;
        loop {
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
            seen += 1;
            if seen == 1 {
                tracing::info!("Signal received: draining (send it again to stop now)");
                shutdown.graceful.cancel();
            } else {
                shutdown.force.cancel();
                break;
            }
        }
    });
    Ok(())
}
