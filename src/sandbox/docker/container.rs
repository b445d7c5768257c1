//! One thread's container as a [`Sandbox`]: commands through `exec`, files through the
//! bind-mounted host directories.

use std::time::Duration;

use async_trait::async_trait;

use crate::paths::VIRTUAL_WORKSPACE;
use crate::sandbox::docker::engine::Engine;
use crate::sandbox::host_files::HostFiles;
use crate::sandbox::{
    CommandOutput, GrepMatch, GrepOptions, PathMapper, Sandbox, SandboxError, scrub_env,
};

/// Extra time the client waits for output after the in-container `timeout` should have fired,
/// at most; short timeouts get proportionally less so a hung engine cannot stall a call long.
const DEADLINE_GRACE: Duration = Duration::from_secs(5);
/// Variable marking every process of one command, so a quota kill can find them.
const EXEC_MARKER: &str = "ANTLER_EXEC_ID";
/// How long the output of a command killed over quota is awaited after the kill.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// Kills every process whose environment carries `ANTLER_EXEC_ID=$ANTLER_KILL`, with its
/// process group (the engine has no API to signal an exec). Written for dash and busybox `sh`
/// (`kill -s KILL -- -PGID`; redirections ordered so unreadable `/proc` entries stay quiet). `timeout`, the command's root,
/// leads the group, so a child that dropped its environment still goes with it.
const KILL_SCRIPT: &str = r#"for d in /proc/[0-9]*; do
  if tr '\0' '\n' 2>/dev/null < "$d/environ" | grep -qx "ANTLER_EXEC_ID=$ANTLER_KILL"; then
    p=${d#/proc/}; kill -s KILL -- "-$p" 2>/dev/null; kill -s KILL "$p" 2>/dev/null
  fi
done; true"#;

/// A running container bound to one (user, thread).
pub struct DockerSandbox {
    pub(crate) id: String,
    pub(crate) container: String,
    pub(crate) engine: Engine,
    pub(crate) files: HostFiles,
    pub(crate) default_timeout: Duration,
}

impl DockerSandbox {
    /// Kills the processes of the command marked `exec_id` (best effort: a failure is logged,
    /// and the in-container `timeout` still ends the command at its deadline).
    async fn kill_exec(&self, exec_id: &str) {
        let killed = self
            .engine
            .exec(
                &self.container,
                vec!["sh".into(), "-c".into(), KILL_SCRIPT.into()],
                vec![format!("ANTLER_KILL={exec_id}")],
                VIRTUAL_WORKSPACE,
                Duration::from_secs(10),
            )
            .await;
        if let Err(error) = killed {
            tracing::warn!(container = %self.container, %error, "Could not kill a command over its disk quota");
        }
    }

    /// The container's name on the engine.
    pub fn container(&self) -> &str {
        &self.container
    }

    pub fn mapper(&self) -> &PathMapper {
        self.files.mapper()
    }
}

/// The exec command: `timeout -s KILL` kills the command's whole process group inside the
/// container at the deadline (the engine has no API to kill an exec).
pub(crate) fn exec_command(command: &str, timeout: Duration) -> Vec<String> {
    let seconds = timeout.as_secs_f64().ceil().max(1.0) as u64;
    [
        "timeout",
        "-s",
        "KILL",
        &seconds.to_string(),
        "sh",
        "-c",
        command,
    ]
    .map(String::from)
    .to_vec()
}

#[async_trait]
impl Sandbox for DockerSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    async fn execute_command(
        &self,
        command: &str,
        env: &[(String, String)],
        timeout: Option<Duration>,
    ) -> Result<CommandOutput, SandboxError> {
        let timeout = timeout.unwrap_or(self.default_timeout);
        // The container has its own environment; only the caller's variables are added, and
        // secret-looking ones are dropped as for every provider.
        let mut env = scrub_env(&[], env);
        if !env.iter().any(|(name, _)| name == "HOME") {
            // The daemon's uid usually has no passwd entry in the image, so HOME would be `/`.
            env.push(("HOME".into(), VIRTUAL_WORKSPACE.into()));
        }
        let exec_id = uuid::Uuid::new_v4().to_string();
        env.push((EXEC_MARKER.into(), exec_id.clone()));
        let env = env
            .into_iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        let quota = self.files.quota().clone();
        let budget = quota.budget_off_thread().await?;
        let started = tokio::time::Instant::now();
        let exec = self.engine.exec(
            &self.container,
            exec_command(command, timeout),
            env,
            VIRTUAL_WORKSPACE,
            timeout + timeout.min(DEADLINE_GRACE),
        );
        tokio::pin!(exec);
        let watchdog = quota.clone().watch(budget);
        let (raw, quota_exceeded) = tokio::select! {
            raw = &mut exec => (raw, None),
            breach = watchdog => {
                self.kill_exec(&exec_id).await;
                let raw = tokio::time::timeout(KILL_GRACE, &mut exec).await.unwrap_or_else(|_| {
                    Err(SandboxError::Unavailable(
                        "the command killed over quota did not end".into(),
                    ))
                });
                (raw, Some(breach))
            }
        };
        quota.mark_stale();
        if let Some(breach) = quota_exceeded {
            let partial = raw.ok();
            let mapper = self.files.mapper();
            let text = |bytes: Option<&Vec<u8>>| {
                mapper.unmap_text(&String::from_utf8_lossy(bytes.map_or(&[][..], |b| b)))
            };
            return Ok(CommandOutput {
                stdout: text(partial.as_ref().map(|p| &p.stdout)),
                stderr: text(partial.as_ref().map(|p| &p.stderr)),
                exit_code: None,
                timed_out: false,
                quota_exceeded: Some(breach),
            });
        }
        let raw = raw?;
        // `timeout -s KILL` exits 137 (or 124) when it had to kill the command.
        let killed_at_deadline =
            matches!(raw.exit_code, Some(124 | 137)) && started.elapsed() >= timeout;
        let timed_out = raw.timed_out || killed_at_deadline;
        let mapper = self.files.mapper();
        // Container paths are virtual already, but /proc/self/mountinfo and friends print the
        // bind sources, which are host paths.
        Ok(CommandOutput {
            stdout: mapper.unmap_text(&String::from_utf8_lossy(&raw.stdout)),
            stderr: mapper.unmap_text(&String::from_utf8_lossy(&raw.stderr)),
            exit_code: if timed_out {
                None
            } else {
                raw.exit_code.map(|code| code as i32)
            },
            timed_out,
            quota_exceeded: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_command_rounds_the_timeout_up_to_whole_seconds() {
        assert_eq!(
            exec_command("echo hi", Duration::from_millis(1500)),
            ["timeout", "-s", "KILL", "2", "sh", "-c", "echo hi"]
        );
        assert_eq!(exec_command("x", Duration::ZERO)[3], "1");
    }

    #[test]
    fn the_kill_script_ends_the_marked_command_and_its_whole_group() {
        use std::os::unix::process::CommandExt;
        let marker = uuid::Uuid::new_v4().to_string();
        // The child that drops its environment is only reachable through the group.
        let mut command = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & env -i sleep 30"])
            .env(EXEC_MARKER, &marker)
            .process_group(0)
            .spawn()
            .unwrap();
        let group = command.id().to_string();
        std::thread::sleep(Duration::from_millis(300));
        let killed = std::process::Command::new("sh")
            .args(["-c", KILL_SCRIPT])
            .env("ANTLER_KILL", &marker)
            .output()
            .unwrap();
        assert!(killed.status.success(), "{killed:?}");
        assert!(killed.stderr.is_empty(), "quiet: {killed:?}");
        assert!(
            command.wait().unwrap().code().is_none(),
            "killed by a signal"
        );
        std::thread::sleep(Duration::from_millis(200));
        // Killed orphans may linger as zombies until init reaps them; only live ones count.
        let listing = std::process::Command::new("ps")
            .args(["-eo", "pgid=,stat="])
            .output()
            .unwrap();
        let alive = String::from_utf8_lossy(&listing.stdout)
            .lines()
            .filter_map(|line| {
                line.split_once(char::is_whitespace)
                    .map(|(g, s)| (g.trim(), s.trim()))
            })
            .any(|(pgid, stat)| pgid == group && !stat.starts_with('Z'));
        assert!(!alive, "nothing of the group is left");
    }
}
