//! The harness's sandbox provider: chosen at start-up (probing bubblewrap or the Docker engine)
//! and replaced when a reload changes the sandbox settings.
//!
//! Each run leases the provider it started with and keeps it to the end, so a reload never
//! changes the sandbox under a run in flight, and the system prompt (which lists the mounts of
//! the provider the run got) always matches what its tools can reach. A provider that holds
//! nothing between calls (bwrap, local) is swapped at once and simply dropped when its last run
//! ends. One that holds containers (docker) is swapped at the first run start after its last
//! leased run ended: it is shut down (its containers removed) before the new provider connects,
//! so two providers never claim the same thread's container; until then new runs keep it.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::config::AppConfig;
use crate::sandbox::{ProviderSettings, SandboxError, SandboxInfo, SandboxProvider, SkillMounts};

/// Builds a provider from settings; the daemon uses [`crate::sandbox::select_provider`].
type Select = Arc<
    dyn Fn(
            ProviderSettings,
        )
            -> futures::future::BoxFuture<'static, Result<Arc<dyn SandboxProvider>, SandboxError>>
        + Send
        + Sync,
>;

/// Held by a run for its whole life: the provider it started with is "in use" while any lease
/// of it is alive.
pub(crate) struct SandboxLease {
    _in_use: Arc<()>,
}

struct Current {
    key: String,
    provider: Arc<dyn SandboxProvider>,
    in_use: Arc<()>,
    /// A replacement waits for runs to finish; logged once per waiting key.
    waiting_for: Option<String>,
}

/// What `/mnt/skills` shows under a configuration (see [`crate::sandbox::SkillMounts`]).
pub(crate) type SkillMountsOf = Arc<dyn Fn(&AppConfig) -> Arc<dyn SkillMounts> + Send + Sync>;

pub(crate) struct SandboxSlot {
    select: Select,
    /// `None`: providers mount the whole skills directory.
    skill_mounts: Option<SkillMountsOf>,
    /// This daemon's instance id when the store is shared (see `ProviderSettings::instance`).
    instance: Option<String>,
    current: tokio::sync::Mutex<Option<Current>>,
    /// The provider in force, readable without waiting (for `/readyz`).
    info: Mutex<Option<SandboxInfo>>,
    /// The last config leased with and its settings key: configs are shared and change only by
    /// reload, and serializing the sandbox settings for every run cost 40 K instructions (3 %
    /// of a fresh thread's turn).
    last_key: Mutex<Option<(Weak<AppConfig>, String)>>,
}

impl SandboxSlot {
    pub(crate) fn new() -> Self {
        Self::with_select(Arc::new(|settings| {
            Box::pin(crate::sandbox::select_provider(settings))
        }))
    }

    pub(crate) fn with_select(select: Select) -> Self {
        Self {
            select,
            skill_mounts: None,
            instance: None,
            current: tokio::sync::Mutex::new(None),
            info: Mutex::new(None),
            last_key: Mutex::new(None),
        }
    }

    /// Providers built from now on show each user's enabled skills only.
    pub(crate) fn with_skill_mounts(mut self, skill_mounts: SkillMountsOf) -> Self {
        self.skill_mounts = Some(skill_mounts);
        self
    }

    /// Names what the sandbox creates outside the data dir after this instance (several
    /// daemons on one store).
    pub(crate) fn with_instance(mut self, instance: Option<String>) -> Self {
        self.instance = instance;
        self
    }

    /// What the provider in force is, once one was chosen.
    pub(crate) fn info(&self) -> Option<SandboxInfo> {
        self.info
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The provider for a run under `config`, with the lease the run keeps.
    pub(crate) async fn lease(
        &self,
        config: &Arc<AppConfig>,
    ) -> Result<(Arc<dyn SandboxProvider>, SandboxLease), SandboxError> {
        let key = self.key_of(config);
        let mut current = self.current.lock().await;
        if let Some(slot) = current.as_mut()
            && slot.key != key
        {
            let runs = Arc::strong_count(&slot.in_use) - 1;
            if slot.provider.info().holds_resources && runs > 0 {
                if slot.waiting_for.as_deref() != Some(key.as_str()) {
                    tracing::info!(runs, provider = %slot.provider.info().provider, "Sandbox settings changed; they apply once the runs using the current sandbox finish");
                    slot.waiting_for = Some(key.clone());
                }
            } else {
                let old = current.take();
                if let Some(old) = old.filter(|old| old.provider.info().holds_resources) {
                    tracing::info!(provider = %old.provider.info().provider, "Sandbox settings changed; removing the old sandboxes");
                    old.provider.shutdown().await;
                }
            }
        }
        if current.is_none() {
            let provider = self.build(config).await?;
            *current = Some(Current {
                key,
                provider,
                in_use: Arc::new(()),
                waiting_for: None,
            });
        }
        let slot = current.as_ref().ok_or_else(|| {
            SandboxError::Unavailable("no sandbox provider could be chosen".into())
        })?;
        Ok((
            slot.provider.clone(),
            SandboxLease {
                _in_use: slot.in_use.clone(),
            },
        ))
    }

    /// `config`'s settings key, remembered for the config last asked about. The `Weak` keeps
    /// that config's allocation, so an equal pointer is the same config, never a new one at a
    /// reused address.
    fn key_of(&self, config: &Arc<AppConfig>) -> String {
        let mut last = self.last_key.lock().unwrap_or_else(PoisonError::into_inner);
        match last.as_ref() {
            Some((seen, key)) if std::ptr::eq(seen.as_ptr(), Arc::as_ptr(config)) => key.clone(),
            _ => {
                let key = settings_key(config);
                *last = Some((Arc::downgrade(config), key.clone()));
                key
            }
        }
    }

    /// Shuts the provider in force down (harness shutdown, after the runs drained).
    pub(crate) async fn shutdown(&self) {
        if let Some(current) = self.current.lock().await.take() {
            current.provider.shutdown().await;
        }
    }

    async fn build(&self, config: &AppConfig) -> Result<Arc<dyn SandboxProvider>, SandboxError> {
        let mut settings = ProviderSettings::from_config(config, None);
        settings.skill_mounts = self.skill_mounts.as_ref().map(|of| of(config));
        settings.instance = self.instance.clone();
        let result = (self.select)(settings).await;
        let mut info = self.info.lock().unwrap_or_else(PoisonError::into_inner);
        match &result {
            Ok(provider) => {
                let chosen = provider.info();
                if chosen.bash {
                    tracing::info!(provider = %chosen.provider, reason = %chosen.reason, "Sandbox ready");
                } else {
                    tracing::warn!(provider = %chosen.provider, reason = %chosen.reason, "Sandbox ready without shell commands: the bash tool answers with why and what to do");
                }
                *info = Some(chosen);
            }
            Err(error) => {
                tracing::error!(%error, "Could not start the sandbox; fix the sandbox settings");
                *info = None;
            }
        }
        result
    }
}

/// The settings a provider is built from. Keys read per call from the run's own config
/// (output caps, `write_file` size, the bash timeout the tool passes, `eager`) are left out, so
/// changing them does not replace the provider.
fn settings_key(config: &AppConfig) -> String {
    let mut sandbox = config.sandbox.clone();
    let defaults = crate::config::SandboxConfig::default();
    sandbox.bash_output_max_chars = defaults.bash_output_max_chars;
    sandbox.ls_output_max_chars = defaults.ls_output_max_chars;
    sandbox.read_file_output_max_chars = defaults.read_file_output_max_chars;
    sandbox.write_file_max_bytes = defaults.write_file_max_bytes;
    sandbox.bash_command_timeout = defaults.bash_command_timeout;
    sandbox.eager = defaults.eager;
    serde_json::json!({"data_dir": config.data_dir(), "sandbox": sandbox}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use crate::config::SandboxMountConfig;
    use crate::sandbox::Sandbox;

    /// A provider that records whether it was shut down and says whether it holds resources.
    struct Fake {
        holds: bool,
        mounts: Vec<(String, bool)>,
        shut: AtomicUsize,
    }

    #[async_trait]
    impl SandboxProvider for Fake {
        async fn acquire(&self, user: &str, thread: &str) -> Result<String, SandboxError> {
            Ok(format!("fake:{user}:{thread}"))
        }
        fn get(&self, _id: &str) -> Option<Arc<dyn Sandbox>> {
            None
        }
        async fn release(&self, _id: &str) -> Result<(), SandboxError> {
            Ok(())
        }
        async fn shutdown(&self) {
            self.shut.fetch_add(1, Ordering::SeqCst);
        }
        fn info(&self) -> SandboxInfo {
            SandboxInfo {
                provider: "fake".into(),
                bash: true,
                network: None,
                reason: "test".into(),
                mounts: self.mounts.clone(),
                holds_resources: self.holds,
            }
        }
    }

    fn slot(holds: bool, built: Arc<Mutex<Vec<Arc<Fake>>>>) -> SandboxSlot {
        SandboxSlot::with_select(Arc::new(move |settings: ProviderSettings| {
            let fake = Arc::new(Fake {
                holds,
                mounts: SandboxInfo::extra_mounts(&settings.sandbox),
                shut: AtomicUsize::new(0),
            });
            built.lock().unwrap().push(fake.clone());
            Box::pin(async move { Ok(fake as Arc<dyn SandboxProvider>) })
        }))
    }

    fn with_mount(path: &str) -> Arc<AppConfig> {
        let mut config = AppConfig::default();
        config.sandbox.mounts.push(SandboxMountConfig {
            host_path: "/srv".into(),
            container_path: path.into(),
            read_only: true,
        });
        Arc::new(config)
    }

    #[tokio::test]
    async fn per_call_keys_keep_the_provider_and_mount_changes_replace_it() {
        let built = Arc::default();
        let slot = slot(false, Arc::clone(&built));
        let first = with_mount("/mnt/a");
        let (a, _lease) = slot.lease(&first).await.unwrap();
        let mut tweaked = AppConfig::clone(&first);
        tweaked.sandbox.bash_output_max_chars = 5;
        tweaked.sandbox.eager = true;
        let (same, _) = slot.lease(&Arc::new(tweaked)).await.unwrap();
        assert!(Arc::ptr_eq(&a, &same));
        let (again, _) = slot.lease(&first).await.unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        let (b, _) = slot.lease(&with_mount("/mnt/b")).await.unwrap();
        assert_eq!(b.info().mounts, [("/mnt/b".to_string(), true)]);
        assert_eq!(a.info().mounts, [("/mnt/a".to_string(), true)]);
        assert_eq!(slot.info().unwrap().mounts, b.info().mounts);
        let built = built.lock().unwrap();
        assert_eq!(built.len(), 2);
        assert_eq!(
            built[0].shut.load(Ordering::SeqCst),
            0,
            "a host provider is dropped, not shut down, so runs holding it keep working"
        );
    }

    #[tokio::test]
    async fn a_provider_holding_containers_is_swapped_only_when_no_run_uses_it() {
        let built: Arc<Mutex<Vec<Arc<Fake>>>> = Arc::default();
        let slot = slot(true, Arc::clone(&built));
        let (old, lease) = slot.lease(&with_mount("/mnt/a")).await.unwrap();
        let (still_old, second_lease) = slot.lease(&with_mount("/mnt/b")).await.unwrap();
        assert!(
            Arc::ptr_eq(&old, &still_old),
            "a run in flight keeps the containers"
        );
        assert_eq!(built.lock().unwrap().len(), 1);
        drop((lease, second_lease));
        let (new, _) = slot.lease(&with_mount("/mnt/b")).await.unwrap();
        assert!(!Arc::ptr_eq(&old, &new));
        assert_eq!(new.info().mounts[0].0, "/mnt/b");
        assert_eq!(built.lock().unwrap()[0].shut.load(Ordering::SeqCst), 1);
        slot.shutdown().await;
        assert_eq!(built.lock().unwrap()[1].shut.load(Ordering::SeqCst), 1);
    }
}
