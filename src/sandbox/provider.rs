//! The `local` and `bwrap` providers: one [`HostSandbox`] per (user, thread), file operations
//! on the host through the path mapper, commands run on the host or inside bubblewrap.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;

use crate::config::SandboxProviderKind;
use crate::paths::ThreadPaths;
use crate::sandbox::docker::DockerSandboxProvider;
use crate::sandbox::exec::{self, Invocation, Limits};
use crate::sandbox::host_files::HostFiles;
use crate::sandbox::quota::DiskQuota;
use crate::sandbox::settings::ProviderSettings;
use crate::sandbox::{
    CommandOutput, GrepMatch, GrepOptions, MountPoint, PathMapper, Sandbox, SandboxError,
    SandboxInfo, SandboxProvider, scrub_env,
};

/// Why host bash is off, with what to do about it.
const HOST_BASH_DISABLED: &str = "shell commands are disabled: no isolating sandbox is available \
    and the local provider runs commands directly on the host. Install bubblewrap (`apt-get install \
    bubblewrap`) and set `sandbox.provider: bwrap` (recommended), or set `sandbox.allow_host_bash: \
    true` to accept running commands on the host";

/// How commands run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecMode {
    /// On the host, with path mapping; `allow_bash: false` refuses every command.
    Local { allow_bash: bool },
    /// Inside bubblewrap; `drop_to_uid` runs as uid 1000 in a user namespace.
    Bwrap { network: bool, drop_to_uid: bool },
}

/// Checks that bubblewrap can create its namespaces here (`bwrap --ro-bind / / true`).
pub async fn bwrap_available() -> Result<(), String> {
    probe(&["--ro-bind", "/", "/", "true"]).await
}

async fn probe(args: &[&str]) -> Result<(), String> {
    let output = tokio::process::Command::new("bwrap")
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(10), output).await {
        Err(_) => Err("bwrap did not finish within 10 s".into()),
        Ok(Err(e)) => Err(format!(
            "bwrap could not be started ({e}); install bubblewrap"
        )),
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => Err(format!(
            "bwrap failed ({}): {}; user namespaces may be disabled on this host",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// Whether bwrap can also switch to an unprivileged uid (probed once per process).
async fn uid_switch_works() -> bool {
    static RESULT: OnceLock<bool> = OnceLock::new();
    if let Some(result) = RESULT.get() {
        return *result;
    }
    let works = probe(&[
        "--unshare-user",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--ro-bind",
        "/",
        "/",
        "true",
    ])
    .await
    .is_ok();
    *RESULT.get_or_init(|| works)
}

/// Picks the provider from `sandbox.provider`: `auto` = bwrap if it works, else local with the
/// shell off (logged); `docker` connects to the engine (and fails when it does not answer).
/// An explicit `bwrap` that cannot run is an error.
pub async fn select_provider(
    settings: ProviderSettings,
) -> Result<Arc<dyn SandboxProvider>, SandboxError> {
    if settings.sandbox.provider == SandboxProviderKind::Docker {
        let provider = DockerSandboxProvider::connect(settings).await?;
        return Ok(Arc::new(provider));
    }
    Ok(select_host_provider(settings).await?)
}

/// [`select_provider`] for the providers that run on this host (`auto`, `bwrap`, `local`);
/// `docker` is refused here because it is not a host provider.
pub async fn select_host_provider(
    settings: ProviderSettings,
) -> Result<Arc<HostSandboxProvider>, SandboxError> {
    let (mode, reason) = match settings.sandbox.provider {
        SandboxProviderKind::Local => {
            let allow_bash = settings.sandbox.allow_host_bash;
            let reason = if allow_bash {
                "configured: local, shell commands run on the host (sandbox.allow_host_bash)"
            } else {
                "configured: local, bash disabled (set sandbox.allow_host_bash or use bwrap)"
            };
            (ExecMode::Local { allow_bash }, reason.to_string())
        }
        SandboxProviderKind::Bwrap => {
            bwrap_available().await.map_err(|reason| {
                SandboxError::Unavailable(format!(
                    "sandbox.provider is bwrap but {reason}; fix that or set sandbox.provider: local"
                ))
            })?;
            (
                bwrap_mode(&settings).await,
                "configured: bwrap, bubblewrap works".to_string(),
            )
        }
        SandboxProviderKind::Auto => match bwrap_available().await {
            Ok(()) => (
                bwrap_mode(&settings).await,
                "auto: bubblewrap works".to_string(),
            ),
            Err(reason) => (
                ExecMode::Local { allow_bash: false },
                format!("auto: bwrap failed ({reason}), using local with bash disabled"),
            ),
        },
        SandboxProviderKind::Docker => {
            return Err(SandboxError::Unavailable(
                "sandbox.provider docker is not a host provider; use select_provider".into(),
            ));
        }
    };
    let mut provider = HostSandboxProvider::new(settings, mode);
    provider.reason = reason;
    Ok(Arc::new(provider))
}

async fn bwrap_mode(settings: &ProviderSettings) -> ExecMode {
    ExecMode::Bwrap {
        network: settings.sandbox.network,
        drop_to_uid: uid_switch_works().await,
    }
}

/// Hands out one [`HostSandbox`] per (user, thread); ids are deterministic (`{kind}:{user}:{thread}`).
pub struct HostSandboxProvider {
    settings: ProviderSettings,
    mode: ExecMode,
    /// Why this mode was chosen, for the start-up log and `/readyz`.
    reason: String,
    quota: Arc<DiskQuota>,
    sandboxes: Mutex<HashMap<String, Arc<HostSandbox>>>,
}

impl HostSandboxProvider {
    pub fn new(mut settings: ProviderSettings, mode: ExecMode) -> Self {
        settings.data_dir =
            std::path::absolute(&settings.data_dir).unwrap_or(settings.data_dir.clone());
        let quota = DiskQuota::new(&settings.data_dir, &settings.sandbox);
        Self {
            reason: format!("{mode:?} chosen by the caller"),
            settings,
            mode,
            quota,
            sandboxes: Mutex::new(HashMap::new()),
        }
    }

    pub fn mode(&self) -> ExecMode {
        self.mode
    }

    fn kind(&self) -> &'static str {
        match self.mode {
            ExecMode::Local { .. } => "local",
            ExecMode::Bwrap { .. } => "bwrap",
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<HostSandbox>>> {
        self.sandboxes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn build(
        &self,
        user_id: &str,
        thread_id: &str,
        skills: Option<Vec<MountPoint>>,
    ) -> Result<HostSandbox, SandboxError> {
        let paths = ThreadPaths::new(&self.settings.data_dir, user_id, thread_id)
            .map_err(|e| SandboxError::Unavailable(e.to_string()))?;
        paths.ensure_dirs().map_err(|e| {
            SandboxError::Unavailable(format!("could not create the thread directories: {e}"))
        })?;
        let mapper = self.settings.mapper(&paths, skills.clone());
        let config = &self.settings.sandbox;
        Ok(HostSandbox {
            id: format!("{}:{user_id}:{thread_id}", self.kind()),
            skills,
            files: HostFiles::new(mapper, self.quota.thread(paths.user_data())),
            workspace: paths.workspace(),
            mode: self.mode,
            host_env: self.settings.host_env.clone(),
            default_timeout: Duration::from_secs(config.bash_command_timeout.max(1)),
            limits: Limits {
                cpu_seconds: config.cpu_seconds,
                address_space_bytes: config.memory_mb.saturating_mul(1024 * 1024),
                processes: config.max_processes,
                file_size_bytes: config.max_file_size_mb.saturating_mul(1024 * 1024),
            },
        })
    }
}

#[async_trait]
impl SandboxProvider for HostSandboxProvider {
    async fn acquire(&self, user_id: &str, thread_id: &str) -> Result<String, SandboxError> {
        let id = format!("{}:{user_id}:{thread_id}", self.kind());
        // Skills enabled, disabled or installed since the sandbox was built change its mounts.
        let skills = self.settings.skill_mounts_for(user_id);
        if self
            .lock()
            .get(&id)
            .is_some_and(|existing| existing.skills == skills)
        {
            return Ok(id);
        }
        let sandbox = Arc::new(self.build(user_id, thread_id, skills)?);
        self.lock().insert(id.clone(), sandbox);
        Ok(id)
    }

    fn get(&self, sandbox_id: &str) -> Option<Arc<dyn Sandbox>> {
        if let Some(sandbox) = self.lock().get(sandbox_id) {
            return Some(sandbox.clone());
        }
        // Ids are deterministic, so a thread bound before a restart finds its sandbox again.
        let mut parts = sandbox_id.splitn(3, ':');
        let (Some(kind), Some(user), Some(thread)) = (parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        if kind != self.kind() {
            return None;
        }
        let skills = self.settings.skill_mounts_for(user);
        let sandbox = Arc::new(self.build(user, thread, skills).ok()?);
        let entry = self
            .lock()
            .entry(sandbox_id.to_string())
            .or_insert(sandbox)
            .clone();
        Some(entry)
    }

    async fn release(&self, sandbox_id: &str) -> Result<(), SandboxError> {
        // Host sandboxes hold no processes between calls; forgetting the entry is enough.
        self.lock().remove(sandbox_id);
        Ok(())
    }

    async fn shutdown(&self) {
        self.lock().clear();
    }

    fn info(&self) -> SandboxInfo {
        SandboxInfo {
            provider: self.kind().to_string(),
            bash: !matches!(self.mode, ExecMode::Local { allow_bash: false }),
            // Host commands share the host's network; bwrap's follow `sandbox.network`.
            network: Some(match self.mode {
                ExecMode::Local { allow_bash } => allow_bash,
                ExecMode::Bwrap { network, .. } => network,
            }),
            reason: self.reason.clone(),
            mounts: SandboxInfo::extra_mounts(&self.settings.sandbox),
            holds_resources: false,
        }
    }
}

/// A thread's sandbox on this host.
pub struct HostSandbox {
    id: String,
    /// The skill mounts it was built with (`None`: the whole skills dir).
    skills: Option<Vec<MountPoint>>,
    files: HostFiles,
    workspace: PathBuf,
    mode: ExecMode,
    host_env: Vec<(String, String)>,
    default_timeout: Duration,
    limits: Limits,
}

impl HostSandbox {
    pub fn mapper(&self) -> &PathMapper {
        self.files.mapper()
    }
}

#[async_trait]
impl Sandbox for HostSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    async fn execute_command(
        &self,
        command: &str,
        env: &[(String, String)],
        timeout: Option<Duration>,
    ) -> Result<CommandOutput, SandboxError> {
        let mut env = scrub_env(&self.host_env, env);
        if !env.iter().any(|(k, _)| k == "PATH") {
            env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
        }
        let invocation = match self.mode {
            ExecMode::Local { allow_bash: false } => {
                return Err(SandboxError::ShellDisabled(HOST_BASH_DISABLED.into()));
            }
            ExecMode::Local { allow_bash: true } => {
                let mapped = self.files.mapper().map_command(command)?;
                env.push(("HOME".into(), self.workspace.to_string_lossy().into_owned()));
                Invocation {
                    program: exec::host_shell(),
                    args: vec!["-c".into(), mapped],
                    env,
                    cwd: self.workspace.clone(),
                }
            }
            ExecMode::Bwrap {
                network,
                drop_to_uid,
            } => {
                env.push(("HOME".into(), crate::paths::VIRTUAL_WORKSPACE.into()));
                let args = exec::bwrap_args(
                    self.files.mapper().mounts(),
                    network,
                    drop_to_uid,
                    &env,
                    command,
                );
                Invocation {
                    program: PathBuf::from("bwrap"),
                    args,
                    // bwrap itself only needs PATH; the command's env is passed with --setenv.
                    env: vec![(
                        "PATH".into(),
                        "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into(),
                    )],
                    cwd: self.workspace.clone(),
                }
            }
        };
        let quota = self.files.quota().clone();
        let budget = quota.budget_off_thread().await?;
        let mut limits = self.limits;
        if let Some(room) = budget.file_room {
            // No single file may outgrow what is left of the quota, whatever the watchdog sees.
            limits.file_size_bytes = match limits.file_size_bytes {
                0 => room,
                configured => configured.min(room),
            };
        }
        let raw = exec::run(
            invocation,
            limits,
            timeout.unwrap_or(self.default_timeout),
            quota.clone().watch(budget),
        )
        .await;
        // The command may have written anything: the next check walks the thread again.
        quota.mark_stale();
        let raw = raw?;
        Ok(CommandOutput {
            stdout: self
                .files
                .mapper()
                .unmap_text(&String::from_utf8_lossy(&raw.stdout)),
            stderr: self
                .files
                .mapper()
                .unmap_text(&String::from_utf8_lossy(&raw.stderr)),
            exit_code: raw.exit_code,
            timed_out: raw.timed_out,
            quota_exceeded: raw.quota_exceeded,
        })
    }

    async fn read_file(
        &self,
        path: &str,
        start_line: Option<usize>,
        end_line: Option<usize>,
    ) -> Result<String, SandboxError> {
        self.files.read_file(path, start_line, end_line).await
    }

    async fn download_file(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        self.files.download_file(path).await
    }

    async fn write_file(
        &self,
        path: &str,
        content: &str,
        append: bool,
    ) -> Result<(), SandboxError> {
        self.files.write_file(path, content, append).await
    }

    async fn update_file(&self, path: &str, content: &[u8]) -> Result<(), SandboxError> {
        self.files.update_file(path, content).await
    }

    async fn list_dir(&self, path: &str, max_depth: usize) -> Result<Vec<String>, SandboxError> {
        self.files.list_dir(path, max_depth).await
    }

    async fn glob(
        &self,
        path: &str,
        pattern: &str,
        include_dirs: bool,
        max_results: usize,
    ) -> Result<(Vec<String>, bool), SandboxError> {
        self.files
            .glob(path, pattern, include_dirs, max_results)
            .await
    }

    async fn grep(
        &self,
        path: &str,
        pattern: &str,
        options: &GrepOptions,
    ) -> Result<(Vec<GrepMatch>, bool), SandboxError> {
        self.files.grep(path, pattern, options).await
    }
}
