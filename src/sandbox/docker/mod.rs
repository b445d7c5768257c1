//! The `docker` provider: one container per (user, thread) through the Docker Engine API.
//!
//! **Needs a Docker engine** the daemon can reach (`sandbox.docker.host`, default the local unix
//! socket); none is started for it, and start-up fails with a clear error when the engine does
//! not answer. Containers are named deterministically (`antler-{user}-{thread}-{hash}`),
//! labelled `antler.managed=true`, run `sleep infinity` from `sandbox.docker.image` as the
//! daemon's uid with all capabilities dropped and no network unless `sandbox.docker.network`,
//! and see the thread's directories bind-mounted at the virtual paths (skills read-only).
//! Commands run through `exec`; file operations use the bind-mounted host directories through
//! the same [`PathMapper`] code as the host providers.
//!
//! Released containers stay warm for reuse by the same thread. `replicas` caps the containers
//! kept (in use plus warm): making room evicts the least recently released warm one (stopped and
//! removed); when every container is in use a new one is still created (logged). A background
//! sweeper removes containers warm for longer than `idle_timeout`. At start, containers left by
//! an earlier run are adopted into the warm pool when their name and labels match a valid
//! (user, thread) and their image is the configured one; the rest are removed. A warm
//! container is inspected before reuse (started if stopped, recreated if gone). `shutdown`
//! stops the sweeper and stops and removes every container of this provider.

mod container;
mod engine;
mod naming;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::config::DockerSandboxConfig;
use crate::paths::{ThreadPaths, VIRTUAL_WORKSPACE};
use crate::sandbox::host_files::HostFiles;
use crate::sandbox::quota::DiskQuota;
use crate::sandbox::{
    PathMapper, ProviderSettings, Sandbox, SandboxError, SandboxInfo, SandboxProvider,
};

pub use container::DockerSandbox;
use engine::Engine;
pub use naming::{MANAGED_LABEL, container_name, container_name_in};

/// Longest pause between idle sweeps (the reference checks every 60 s).
const MAX_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// How long released containers stay warm and how often that is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolTiming {
    /// `Duration::ZERO` keeps warm containers until they are evicted.
    pub idle_timeout: Duration,
    pub sweep_interval: Duration,
}

impl PoolTiming {
    /// `idle_timeout` from the config; sweeps every half of it, at most every 60 s.
    pub fn from_config(config: &DockerSandboxConfig) -> Self {
        let idle_timeout = Duration::from_secs(config.idle_timeout);
        Self {
            idle_timeout,
            sweep_interval: (idle_timeout / 2).clamp(Duration::from_millis(10), MAX_SWEEP_INTERVAL),
        }
    }
}

/// A released container waiting for its thread to come back.
struct Warm {
    sandbox_id: String,
    user_id: String,
    thread_id: String,
    container: String,
    released_at: Instant,
}

#[derive(Default)]
struct Pool {
    active: HashMap<String, Arc<DockerSandbox>>,
    /// Least recently released first.
    warm: Vec<Warm>,
}

struct Inner {
    engine: Engine,
    settings: ProviderSettings,
    /// The bind-mounted thread directories are on this host, so they are measured here.
    quota: Arc<DiskQuota>,
    docker: DockerSandboxConfig,
    timing: PoolTiming,
    pool: Mutex<Pool>,
    /// Serialises acquire/release/sweep so two callers never create or evict the same
    /// container; `pool` alone guards the maps for the synchronous `get`.
    ops: tokio::sync::Mutex<()>,
}

/// Hands out one container per (user, thread); see the module docs.
pub struct DockerSandboxProvider {
    inner: Arc<Inner>,
    cancel: CancellationToken,
    sweeper: Mutex<Option<JoinHandle<()>>>,
    /// Stops the sweeper when the provider is dropped without `shutdown`.
    _stop_on_drop: DropGuard,
}

impl DockerSandboxProvider {
    /// Connects to `sandbox.docker.host`, adopts or removes leftover containers and starts the
    /// idle sweeper.
    pub async fn connect(settings: ProviderSettings) -> Result<Self, SandboxError> {
        let timing = PoolTiming::from_config(&settings.sandbox.docker);
        Self::connect_with_timing(settings, timing).await
    }

    /// [`connect`](Self::connect) with explicit warm-pool timing.
    pub async fn connect_with_timing(
        mut settings: ProviderSettings,
        timing: PoolTiming,
    ) -> Result<Self, SandboxError> {
        settings.data_dir =
            std::path::absolute(&settings.data_dir).unwrap_or(settings.data_dir.clone());
        let docker = settings.sandbox.docker.clone();
        let engine = Engine::connect(docker.host.as_deref())?.ping().await?;
        let inner = Arc::new(Inner {
            engine,
            quota: DiskQuota::new(&settings.data_dir, &settings.sandbox),
            settings,
            docker,
            timing,
            pool: Mutex::new(Pool::default()),
            ops: tokio::sync::Mutex::new(()),
        });
        inner.adopt_orphans().await?;
        let cancel = CancellationToken::new();
        // Owned by the provider: `cancel` stops the sweeper and `shutdown` awaits its handle.
        #[allow(clippy::disallowed_methods)]
        let sweeper = (!timing.idle_timeout.is_zero())
            .then(|| tokio::spawn(sweep_idle(inner.clone(), cancel.clone())));
        Ok(Self {
            inner,
            _stop_on_drop: cancel.clone().drop_guard(),
            cancel,
            sweeper: Mutex::new(sweeper),
        })
    }

    /// Containers currently handed out.
    pub fn active_count(&self) -> usize {
        self.inner.pool().active.len()
    }

    /// Names of the warm containers, least recently released first.
    pub fn warm_containers(&self) -> Vec<String> {
        self.inner
            .pool()
            .warm
            .iter()
            .map(|w| w.container.clone())
            .collect()
    }
}

impl Inner {
    fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn adopt_orphans(&self) -> Result<(), SandboxError> {
        let _ops = self.ops.lock().await;
        let instance = self.settings.instance.as_deref();
        for listed in self.engine.list_managed().await? {
            if naming::made_by_another(instance, &listed.labels) {
                continue;
            }
            let owner = naming::owner_of(instance, &listed.name, &listed.labels)
                .filter(|_| listed.image == self.docker.image);
            let name = listed.name.trim_start_matches('/').to_string();
            match owner {
                Some((user_id, thread_id)) => {
                    tracing::info!(container = %name, "adopting a sandbox container from an earlier run");
                    self.pool().warm.push(Warm {
                        sandbox_id: naming::sandbox_id(&user_id, &thread_id),
                        user_id,
                        thread_id,
                        container: name,
                        released_at: Instant::now(),
                    });
                }
                None => {
                    tracing::info!(container = %name, "removing a stale sandbox container");
                    if let Err(error) = self.engine.stop_and_remove(&name).await {
                        tracing::warn!(container = %name, %error, "could not remove a stale sandbox container");
                    }
                }
            }
        }
        self.evict_over_capacity().await;
        Ok(())
    }

    async fn acquire(&self, user_id: &str, thread_id: &str) -> Result<String, SandboxError> {
        let id = naming::sandbox_id(user_id, thread_id);
        let _ops = self.ops.lock().await;
        if self.pool().active.contains_key(&id) {
            return Ok(id);
        }
        let paths = ThreadPaths::new(&self.settings.data_dir, user_id, thread_id)
            .map_err(|e| SandboxError::Unavailable(e.to_string()))?;
        paths.ensure_dirs().map_err(|e| {
            SandboxError::Unavailable(format!("could not create the thread directories: {e}"))
        })?;
        // A container's binds are fixed when it is created: skills enabled later appear in the
        // thread's next container (after release or idle reaping).
        let mapper = self
            .settings
            .mapper(&paths, self.settings.skill_mounts_for(user_id));
        let container =
            naming::container_name_in(self.settings.instance.as_deref(), user_id, thread_id);
        let warm = {
            let mut pool = self.pool();
            let index = pool.warm.iter().position(|w| w.sandbox_id == id);
            index.map(|i| pool.warm.remove(i))
        };
        let reused = match warm {
            Some(_) => self.revive(&container).await,
            None => false,
        };
        if !reused {
            self.make_room().await;
            let body = self.create_body(user_id, thread_id, &mapper);
            self.engine.create(&container, body).await?;
            if let Err(error) = self.engine.start(&container).await {
                // A container that cannot start would only be found again as an orphan.
                let _ = self.engine.stop_and_remove(&container).await;
                return Err(error);
            }
        }
        let sandbox = Arc::new(DockerSandbox {
            id: id.clone(),
            container,
            engine: self.engine.clone(),
            files: HostFiles::new(mapper, self.quota.thread(paths.user_data())),
            default_timeout: Duration::from_secs(self.settings.sandbox.bash_command_timeout.max(1)),
        });
        self.pool().active.insert(id.clone(), sandbox);
        Ok(id)
    }

    /// Makes a warm container usable again; `false` when it is gone or broken (then removed),
    /// so the caller creates a fresh one.
    async fn revive(&self, container: &str) -> bool {
        // The engine may have restarted or someone removed the container while it was warm.
        let revived = match self.engine.is_running(container).await {
            Ok(Some(true)) => Ok(()),
            Ok(Some(false)) => self.engine.start(container).await,
            Ok(None) => return false,
            Err(error) => Err(error),
        };
        match revived {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(container, %error, "a warm sandbox container is unusable; replacing it");
                let _ = self.engine.stop_and_remove(container).await;
                false
            }
        }
    }

    async fn release(&self, sandbox_id: &str) {
        let _ops = self.ops.lock().await;
        let Some(sandbox) = self.pool().active.remove(sandbox_id) else {
            return;
        };
        let Some((user_id, thread_id)) = split_id(sandbox_id) else {
            return;
        };
        self.pool().warm.push(Warm {
            sandbox_id: sandbox_id.to_string(),
            user_id: user_id.to_string(),
            thread_id: thread_id.to_string(),
            container: sandbox.container.clone(),
            released_at: Instant::now(),
        });
        self.evict_over_capacity().await;
    }

    /// Evicts the least recently released warm container when a new one would exceed
    /// `replicas`; with every container in use the new one bursts past the cap.
    async fn make_room(&self) {
        let victim = {
            let mut pool = self.pool();
            let total = pool.active.len() + pool.warm.len();
            if total < self.docker.replicas || pool.warm.is_empty() {
                if total >= self.docker.replicas {
                    tracing::warn!(
                        replicas = self.docker.replicas,
                        "every sandbox container is in use; creating one past sandbox.docker.replicas"
                    );
                }
                None
            } else {
                Some(pool.warm.remove(0))
            }
        };
        if let Some(victim) = victim {
            self.evict(victim).await;
        }
    }

    async fn evict_over_capacity(&self) {
        loop {
            let victim = {
                let mut pool = self.pool();
                let total = pool.active.len() + pool.warm.len();
                if total <= self.docker.replicas || pool.warm.is_empty() {
                    return;
                }
                pool.warm.remove(0)
            };
            self.evict(victim).await;
        }
    }

    async fn evict(&self, victim: Warm) {
        tracing::debug!(container = %victim.container, user = %victim.user_id, thread = %victim.thread_id, "evicting a warm sandbox container");
        if let Err(error) = self.engine.stop_and_remove(&victim.container).await {
            tracing::warn!(container = %victim.container, %error, "could not remove an evicted sandbox container");
        }
    }

    async fn sweep(&self) {
        let _ops = self.ops.lock().await;
        let expired: Vec<Warm> = {
            let mut pool = self.pool();
            let (expired, kept) = std::mem::take(&mut pool.warm)
                .into_iter()
                .partition(|w| w.released_at.elapsed() >= self.timing.idle_timeout);
            pool.warm = kept;
            expired
        };
        for victim in expired {
            self.evict(victim).await;
        }
    }

    async fn remove_all(&self) {
        let _ops = self.ops.lock().await;
        let names: Vec<String> = {
            let mut pool = self.pool();
            let active = std::mem::take(&mut pool.active);
            let warm = std::mem::take(&mut pool.warm);
            active
                .into_values()
                .map(|s| s.container.clone())
                .chain(warm.into_iter().map(|w| w.container))
                .collect()
        };
        for name in names {
            if let Err(error) = self.engine.stop_and_remove(&name).await {
                tracing::warn!(container = %name, %error, "could not remove a sandbox container at shutdown");
            }
        }
    }

    fn create_body(
        &self,
        user_id: &str,
        thread_id: &str,
        mapper: &PathMapper,
    ) -> ContainerCreateBody {
        let config = &self.settings.sandbox;
        let mounts = mapper
            .mounts()
            .iter()
            .map(|m| Mount {
                target: Some(m.virtual_path.clone()),
                source: Some(m.host_path.to_string_lossy().into_owned()),
                typ: Some(MountType::BIND),
                read_only: Some(m.read_only),
                ..Default::default()
            })
            .collect();
        // Files the command writes into the bind mounts must stay manageable by the daemon,
        // so the container runs as the owner of the data directory.
        let user = std::fs::metadata(&self.settings.data_dir)
            .ok()
            .map(|m| format!("{}:{}", m.uid(), m.gid()));
        ContainerCreateBody {
            image: Some(self.docker.image.clone()),
            cmd: Some(vec!["sleep".into(), "infinity".into()]),
            labels: Some(naming::labels(
                self.settings.instance.as_deref(),
                user_id,
                thread_id,
            )),
            working_dir: Some(VIRTUAL_WORKSPACE.into()),
            user,
            host_config: Some(HostConfig {
                mounts: Some(mounts),
                network_mode: (!self.docker.network).then(|| "none".to_string()),
                init: Some(true),
                cap_drop: Some(vec!["ALL".into()]),
                security_opt: Some(vec!["no-new-privileges:true".into()]),
                memory: i64::try_from(config.memory_mb.saturating_mul(1024 * 1024)).ok(),
                pids_limit: i64::try_from(config.max_processes).ok(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

fn split_id(sandbox_id: &str) -> Option<(&str, &str)> {
    let rest = sandbox_id.strip_prefix("docker:")?;
    rest.split_once(':')
}

async fn sweep_idle(inner: Arc<Inner>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(inner.timing.sweep_interval) => inner.sweep().await,
        }
    }
}

#[async_trait]
impl SandboxProvider for DockerSandboxProvider {
    async fn acquire(&self, user_id: &str, thread_id: &str) -> Result<String, SandboxError> {
        self.inner.acquire(user_id, thread_id).await
    }

    fn get(&self, sandbox_id: &str) -> Option<Arc<dyn Sandbox>> {
        // Only containers in use are handed out; a released one is acquired again, which
        // reuses it from the warm pool.
        let sandbox = self.inner.pool().active.get(sandbox_id)?.clone();
        Some(sandbox)
    }

    async fn release(&self, sandbox_id: &str) -> Result<(), SandboxError> {
        self.inner.release(sandbox_id).await;
        Ok(())
    }

    async fn shutdown(&self) {
        self.cancel.cancel();
        let sweeper = self
            .sweeper
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(sweeper) = sweeper {
            let _ = sweeper.await;
        }
        self.inner.remove_all().await;
    }

    fn info(&self) -> SandboxInfo {
        SandboxInfo {
            provider: "docker".into(),
            bash: true,
            network: Some(self.inner.docker.network),
            reason: format!(
                "configured: docker, {} answers (image {})",
                self.inner.engine.endpoint(),
                self.inner.docker.image
            ),
            mounts: SandboxInfo::extra_mounts(&self.inner.settings.sandbox),
            holds_resources: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_every_half_idle_timeout_within_bounds() {
        let timing = |secs| {
            PoolTiming::from_config(&DockerSandboxConfig {
                idle_timeout: secs,
                ..Default::default()
            })
        };
        assert_eq!(timing(600).sweep_interval, MAX_SWEEP_INTERVAL);
        assert_eq!(timing(600).idle_timeout, Duration::from_secs(600));
        assert_eq!(timing(30).sweep_interval, Duration::from_secs(15));
        assert_eq!(timing(0).idle_timeout, Duration::ZERO);
    }

    #[test]
    fn sandbox_ids_split_back_into_user_and_thread() {
        assert_eq!(split_id("docker:alice:t-1"), Some(("alice", "t-1")));
        assert_eq!(split_id("local:alice:t-1"), None);
        assert_eq!(split_id("docker:alice"), None);
    }
}
