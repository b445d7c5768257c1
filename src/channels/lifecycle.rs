//! One channel for the daemon's whole life: connected while its section is enabled, restarted
//! alone when its connection settings (credentials, mode, endpoints) change, and stopped for
//! good only by a fatal error (until the settings change) or shutdown.
//!
//! A session: connect (retried with backoff) → register with the manager → answer what the
//! last run left pending → mount the webhook and/or run the transport under supervision (under
//! the transport's lease, see [`crate::channels::transport_lease`]).

use std::sync::Arc;

use antler_channel::{ChannelAdapter, ChannelConfig};
use tokio_util::sync::CancellationToken;

use crate::channels::ChannelHub;
use crate::channels::health::ChannelHealth;
use crate::channels::manager::ChannelManager;
use crate::channels::reload::SessionPhase;
use crate::channels::runtime::ChannelRuntime;
use crate::channels::supervise::{PhaseReport, backoff, mark_fatal};
use crate::channels::transport_lease::{LeasedTransport, lease_name};
use crate::cluster::Cluster;
use crate::config::{AppConfig, ConfigHandle};

/// What the lifecycle task of one channel needs.
pub(crate) struct Lifecycle {
    pub(crate) name: &'static str,
    pub(crate) manager: ChannelManager,
    pub(crate) hub: ChannelHub,
    pub(crate) config: ConfigHandle,
    /// Decides which daemon sharing the store runs the transport.
    pub(crate) cluster: Cluster,
}

/// How a session ended.
enum SessionEnd {
    Stopped,
    /// Retrying cannot help; wait for the operator to change the settings.
    Fatal,
}

impl Lifecycle {
    pub(crate) async fn run(self, stop: CancellationToken) {
        let mut changes = self.config.subscribe();
        loop {
            let config = self.config.current();
            let Some((key, adapter, lease)) = enabled(&config, self.name) else {
                self.hub.health.remove(self.name);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    changed = changes.changed() => if changed.is_err() { return },
                }
                continue;
            };
            let session_stop = stop.child_token();
            let session = self.session(key, adapter, &lease, session_stop.clone());
            tokio::pin!(session);
            let mut fatal = false;
            loop {
                tokio::select! {
                    end = &mut session, if !fatal => {
                        match end {
                            SessionEnd::Stopped => return,
                            SessionEnd::Fatal => fatal = true,
                        }
                    }
                    _ = stop.cancelled(), if fatal => return,
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        let now = self.config.current();
                        if enabled(&now, self.name).map(|(k, ..)| k) == Some(key) {
                            continue;
                        }
                        tracing::info!(channel = self.name, "The channel's connection settings changed; restarting it");
                        session_stop.cancel();
                        if !fatal {
                            (&mut session).await;
                        }
                        break;
                    }
                }
            }
        }
    }

    async fn session(
        &self,
        key: u64,
        adapter: Box<dyn ChannelAdapter>,
        lease: &str,
        stop: CancellationToken,
    ) -> SessionEnd {
        let name = self.name;
        let health = &self.hub.health;
        let phase: PhaseReport = {
            let sessions = self.hub.sessions.clone();
            Arc::new(move |phase| sessions.set(name, key, phase))
        };
        health.set(name, ChannelHealth::Starting);
        phase(SessionPhase::Connecting);
        let mut failures = 0;
        let connection = loop {
            let attempt = tokio::select! {
                _ = stop.cancelled() => return SessionEnd::Stopped,
                attempt = adapter.connect() => attempt,
            };
            match attempt {
                Ok(connection) => break connection,
                Err(error) if error.is_fatal() => {
                    mark_fatal(health, name, &error);
                    phase(SessionPhase::Failed(error.to_string()));
                    return SessionEnd::Fatal;
                }
                Err(error) => {
                    failures += 1;
                    let delay = backoff(failures);
                    tracing::warn!(channel = name, %error, ?delay, "Could not connect the channel; retrying");
                    phase(SessionPhase::Retrying(error.to_string()));
                    health.set(
                        name,
                        ChannelHealth::Degraded {
                            reason: error.to_string(),
                        },
                    );
                    tokio::select! {
                        _ = stop.cancelled() => return SessionEnd::Stopped,
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        };
        let mut runtime = ChannelRuntime::new(
            name,
            connection.parts,
            adapter.profile(),
            connection.bot_username,
        );
        runtime.health = health.clone();
        tracing::info!(
            channel = name,
            bot = runtime.bot_username.as_deref().unwrap_or(""),
            "Channel connected"
        );
        self.manager.register(runtime);
        if let Err(error) = self.manager.recover(name) {
            tracing::error!(channel = name, %error, "Could not read the journal of unanswered messages");
        }
        if let Some(handler) = connection.webhook {
            self.hub.mount(name, handler, self.manager.clone());
            health.set(name, ChannelHealth::Running);
        }
        let end = match connection.transport {
            // Up once the transport says it is live (a token only its socket checks fails there).
            Some(transport) => {
                let leased = LeasedTransport {
                    cluster: &self.cluster,
                    lease,
                    channel: name,
                    transport,
                    sink: self.manager.sink(name),
                    health,
                    phase: &phase,
                };
                match leased.run(&stop).await {
                    Ok(()) => SessionEnd::Stopped,
                    Err(error) => {
                        mark_fatal(health, name, &error);
                        phase(SessionPhase::Failed(error.to_string()));
                        SessionEnd::Fatal
                    }
                }
            }
            None => {
                phase(SessionPhase::Connected);
                stop.cancelled().await;
                SessionEnd::Stopped
            }
        };
        self.hub.unmount(name);
        self.manager.unregister(name);
        if matches!(end, SessionEnd::Stopped) {
            health.set(name, ChannelHealth::Stopped);
        }
        end
    }
}

/// The connection key, a fresh adapter and the transport's lease name of `name`'s section,
/// when it is enabled.
fn enabled(config: &AppConfig, name: &str) -> Option<(u64, Box<dyn ChannelAdapter>, String)> {
    let section: &dyn ChannelConfig = config.channels.section(name)?;
    section.enabled().then(|| {
        let lease = lease_name(name, section.transport_identity().as_ref());
        (section.connection_key(), section.adapter(), lease)
    })
}
