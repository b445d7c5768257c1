//! Running one shell command: scrubbed environment, rlimits, no stdin, capped output, and a
//! wall-clock timeout and a disk-quota watchdog that kill the whole process group.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use antler_process::{Rlimit, kill_process_group, set_rlimits};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use crate::sandbox::{MountPoint, QuotaBreach, SandboxError};

/// Bytes of stdout (and, separately, stderr) kept per command; the rest is drained and dropped.
pub(crate) const OUTPUT_CAPTURE_BYTES: usize = 10 * 1024 * 1024;
/// Host variables a command may inherit; everything else is dropped.
const ENV_ALLOWLIST: &[&str] = &["PATH", "LANG", "LC_ALL", "TERM", "TZ"];
/// Name fragments that mark a variable as secret (matched case-insensitively).
const SECRET_MARKERS: &[&str] = &[
    "KEY",
    "SECRET",
    "TOKEN",
    "PASS",
    "CREDENTIAL",
    "DSN",
    "AUTH",
];
/// Exact names that hold secrets without saying so.
const SECRET_NAMES: &[&str] = &["DATABASE_URL", "REDIS_URL", "MONGODB_URI"];
/// Uid/gid the bwrap command runs as (when user namespaces allow it).
const SANDBOX_UID: &str = "1000";

/// Resource limits applied to the command's process (and inherited by its children).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) cpu_seconds: u64,
    pub(crate) address_space_bytes: u64,
    pub(crate) processes: u64,
    pub(crate) file_size_bytes: u64,
}

/// One prepared command: the program, its arguments, its environment and its directory.
pub(crate) struct Invocation {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) cwd: PathBuf,
}

pub(crate) struct RawOutput {
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
    pub(crate) exit_code: Option<i32>,
    pub(crate) timed_out: bool,
    pub(crate) quota_exceeded: Option<QuotaBreach>,
}

/// The environment a command gets: allowlisted host variables plus the caller's, minus anything
/// that looks secret or belongs to antler (`ANTLER_*`), minus invalid names.
pub fn scrub_env(host: &[(String, String)], extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = host
        .iter()
        .filter(|(name, _)| ENV_ALLOWLIST.contains(&name.as_str()))
        .cloned()
        .collect();
    for (name, value) in extra {
        if !is_valid_env_name(name) || looks_secret(name) {
            continue;
        }
        env.retain(|(existing, _)| existing != name);
        env.push((name.clone(), value.clone()));
    }
    env
}

fn is_valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("ANTLER_")
        || SECRET_NAMES.contains(&upper.as_str())
        || SECRET_MARKERS.iter().any(|marker| upper.contains(marker))
}

/// The shell to run commands with on the host.
pub(crate) fn host_shell() -> PathBuf {
    ["/bin/bash", "/bin/sh"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// bwrap arguments for a command: system dirs read-only, the mounts at their virtual paths,
/// everything else of the host invisible.
pub(crate) fn bwrap_args(
    mounts: &[MountPoint],
    network: bool,
    drop_to_uid: bool,
    env: &[(String, String)],
    command: &str,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
    ]
    .map(String::from)
    .to_vec();
    if network {
        args.push("--share-net".into());
    }
    if drop_to_uid {
        args.extend(
            ["--unshare-user", "--uid", SANDBOX_UID, "--gid", SANDBOX_UID].map(String::from),
        );
    }
    for dir in [
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    ] {
        let path = Path::new(dir);
        match std::fs::read_link(path) {
            Ok(target) => args.extend([
                "--symlink".into(),
                target.to_string_lossy().into_owned(),
                dir.into(),
            ]),
            Err(_) if path.is_dir() => args.extend(["--ro-bind".into(), dir.into(), dir.into()]),
            Err(_) => {}
        }
    }
    // Only the parts of /etc programs need, so host secrets kept there stay invisible.
    for file in [
        "/etc/passwd",
        "/etc/group",
        "/etc/hosts",
        "/etc/resolv.conf",
        "/etc/nsswitch.conf",
        "/etc/ld.so.cache",
        "/etc/localtime",
        "/etc/alternatives",
        "/etc/ssl",
        "/etc/ca-certificates",
    ] {
        args.extend(["--ro-bind-try".into(), file.into(), file.into()]);
    }
    args.extend(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"].map(String::from));
    // Shortest virtual path first so nested mounts land on top of their parents.
    let mut ordered: Vec<&MountPoint> = mounts.iter().collect();
    ordered.sort_by_key(|m| m.virtual_path.len());
    for m in ordered {
        let flag = if m.read_only { "--ro-bind" } else { "--bind" };
        args.extend([
            flag.into(),
            m.host_path.to_string_lossy().into_owned(),
            m.virtual_path.clone(),
        ]);
    }
    args.extend(["--chdir".into(), crate::paths::VIRTUAL_WORKSPACE.into()]);
    for (name, value) in env {
        args.extend(["--setenv".into(), name.clone(), value.clone()]);
    }
    args.extend(["--".into(), "/bin/sh".into(), "-c".into(), command.into()]);
    args
}

/// Spawns the invocation in its own process group and waits for it, killing the group at the
/// timeout or when `watchdog` reports a disk quota breach.
pub(crate) async fn run(
    invocation: Invocation,
    limits: Limits,
    timeout: Duration,
    watchdog: impl Future<Output = QuotaBreach>,
) -> Result<RawOutput, SandboxError> {
    let mut command = Command::new(&invocation.program);
    command
        .args(&invocation.args)
        .env_clear()
        .envs(invocation.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&invocation.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    apply_rlimits(&mut command, limits);
    let mut child = command.spawn().map_err(|e| {
        SandboxError::Unavailable(format!(
            "could not start {}: {e}",
            invocation.program.display()
        ))
    })?;
    let pid = child.id();
    // Owned here: both readers are awaited below once the child has ended or been killed.
    #[allow(clippy::disallowed_methods)]
    let stdout = tokio::spawn(read_capped(child.stdout.take()));
    #[allow(clippy::disallowed_methods)]
    let stderr = tokio::spawn(read_capped(child.stderr.take()));
    let ended = tokio::select! {
        status = child.wait() => Ended::Exited(status),
        () = tokio::time::sleep(timeout) => Ended::TimedOut,
        breach = watchdog => Ended::OverQuota(breach),
    };
    let (exit_code, timed_out, quota_exceeded) = match ended {
        Ended::Exited(Ok(status)) => (status.code(), false, None),
        Ended::Exited(Err(e)) => {
            return Err(SandboxError::Unavailable(format!(
                "waiting for the command failed: {e}"
            )));
        }
        Ended::TimedOut | Ended::OverQuota(_) => {
            if let Some(pid) = pid {
                kill_process_group(pid);
            }
            let _ = child.wait().await;
            match ended {
                Ended::OverQuota(breach) => (None, false, Some(breach)),
                _ => (None, true, None),
            }
        }
    };
    // Background children still holding the pipes must not keep the call open forever.
    if let Some(pid) = pid {
        kill_process_group(pid);
    }
    let grace = Duration::from_secs(2);
    let stdout = tokio::time::timeout(grace, stdout)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let stderr = tokio::time::timeout(grace, stderr)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    Ok(RawOutput {
        stdout,
        stderr,
        exit_code,
        timed_out,
        quota_exceeded,
    })
}

/// How the wait for a command ended.
enum Ended {
    Exited(std::io::Result<std::process::ExitStatus>),
    TimedOut,
    OverQuota(QuotaBreach),
}

async fn read_capped(stream: Option<impl AsyncRead + Unpin>) -> Vec<u8> {
    let Some(mut stream) = stream else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_CAPTURE_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
    kept
}

/// Sets the rlimits in the child between fork and exec (a limit of 0 is not set).
fn apply_rlimits(command: &mut Command, limits: Limits) {
    let settings = [
        Rlimit::Cpu(limits.cpu_seconds),
        Rlimit::AddressSpace(limits.address_space_bytes),
        Rlimit::Processes(limits.processes),
        Rlimit::FileSize(limits.file_size_bytes),
    ];
    set_rlimits(
        command,
        settings.into_iter().filter(|s| s.value() != 0).collect(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn scrubs_secret_looking_and_unknown_variables() {
        let host = vars(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("ANTLER_MODEL_API_KEY", "x"),
            ("GITHUB_TOKEN", "t"),
        ]);
        let extra = vars(&[
            ("FOO", "1"),
            ("MY_SECRET", "s"),
            ("db_password", "p"),
            ("DATABASE_URL", "postgres://"),
            ("ANTLER_X", "a"),
            ("AWS_CREDENTIALS", "c"),
            ("1BAD", "b"),
            ("PATH", "/bin"),
        ]);
        assert_eq!(
            scrub_env(&host, &extra),
            vars(&[("FOO", "1"), ("PATH", "/bin")])
        );
    }

    #[tokio::test]
    async fn kills_the_group_at_the_timeout_and_caps_nothing_small() {
        let invocation = Invocation {
            program: host_shell(),
            args: vec![
                "-c".into(),
                "echo start; sleep 120 & sleep 120; echo never".into(),
            ],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: std::env::temp_dir(),
        };
        let limits = Limits {
            cpu_seconds: 10,
            address_space_bytes: 0,
            processes: 0,
            file_size_bytes: 0,
        };
        // The background sleep holds the output open for two minutes unless the whole group
        // is killed: an answer within one, however loaded the machine, is the kill's.
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            run(
                invocation,
                limits,
                Duration::from_millis(300),
                std::future::pending(),
            ),
        )
        .await
        .expect("the group was killed at the timeout")
        .unwrap();
        assert!(out.timed_out);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "start\n");
    }

    #[tokio::test]
    async fn a_watchdog_breach_kills_the_group_and_is_reported() {
        let marker = tempfile::tempdir().unwrap();
        let late = marker.path().join("late");
        let pid_file = marker.path().join("background.pid");
        let invocation = Invocation {
            program: host_shell(),
            args: vec![
                "-c".into(),
                format!(
                    "echo start; (sleep 2; touch {}) & echo $! > {}; sleep 30",
                    late.display(),
                    pid_file.display()
                ),
            ],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: std::env::temp_dir(),
        };
        let limits = Limits {
            cpu_seconds: 10,
            address_space_bytes: 0,
            processes: 0,
            file_size_bytes: 0,
        };
        let breach = QuotaBreach {
            scope: crate::sandbox::QuotaScope::Thread,
            used: 2,
            limit: 1,
            writing: 0,
        };
        // The breach comes once the background job runs (its pid is written).
        let started = pid_file.clone();
        let watchdog = async move {
            while !std::fs::read_to_string(&started).is_ok_and(|pid| pid.ends_with('\n')) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            breach
        };
        let out = run(invocation, limits, Duration::from_secs(60), watchdog)
            .await
            .unwrap();
        assert_eq!(out.quota_exceeded, Some(breach));
        assert!(!out.timed_out);
        assert_eq!(out.exit_code, None);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "start\n");
        // Once the background job is gone (or a zombie), it can no longer touch the file.
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let stat = format!("/proc/{}/stat", pid.trim());
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::fs::read_to_string(&stat).is_ok_and(|stat| !stat.contains(") Z ")) {
            assert!(
                std::time::Instant::now() < deadline,
                "the background job outlived the group: {stat}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!late.exists(), "the background job died with the group");
    }
}
