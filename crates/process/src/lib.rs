//! Limits and ends for the child processes Antler starts: the resource limits a child starts
//! with (set between fork and exec) and SIGKILL to its whole process group. Shared by the
//! sandbox's shell commands and the document converter, the two places that run untrusted work.

// Tests own their tasks through the test runtime, which ends them with the test.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

use tokio::process::Command;

/// One resource limit a child starts with (soft and hard alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rlimit {
    Cpu(u64),
    AddressSpace(u64),
    Processes(u64),
    FileSize(u64),
    CoreSize(u64),
}

impl Rlimit {
    pub fn value(self) -> u64 {
        match self {
            Self::Cpu(v)
            | Self::AddressSpace(v)
            | Self::Processes(v)
            | Self::FileSize(v)
            | Self::CoreSize(v) => v,
        }
    }
}

/// Sets `settings` in the child between fork and exec, each exactly (0 included); the spawn
/// fails if one cannot be set.
#[allow(unsafe_code)]
pub fn set_rlimits(command: &mut Command, settings: Vec<Rlimit>) {
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed; it calls nothing but setrlimit(2) (async-signal-safe) on values
    // computed before the fork, and allocates nothing (it only reads `settings`).
    unsafe {
        command.pre_exec(move || {
            for setting in &settings {
                let resource = match setting {
                    Rlimit::Cpu(_) => libc::RLIMIT_CPU,
                    Rlimit::AddressSpace(_) => libc::RLIMIT_AS,
                    Rlimit::Processes(_) => libc::RLIMIT_NPROC,
                    Rlimit::FileSize(_) => libc::RLIMIT_FSIZE,
                    Rlimit::CoreSize(_) => libc::RLIMIT_CORE,
                };
                let value = setting.value() as libc::rlim_t;
                let limit = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                if libc::setrlimit(resource, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Sends SIGKILL to the process group led by `pid` (the command ran with `process_group(0)`).
#[allow(unsafe_code)]
pub fn kill_process_group(pid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) with a negative pid only signals that process group; it touches no
    // memory of ours. The group id is our own child's, so no unrelated group is hit.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}
