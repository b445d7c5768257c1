//! One converter child from the daemon's side: started in its own process group with its
//! rlimits set before exec, fed on stdin, its stdout read up to the cap, killed (the whole
//! group) at the wall-clock timeout or past the cap, and its end told apart by exit status.

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStdin, Command};

use crate::child::{EXIT_CRASHED, EXIT_NO_MEMORY, EXIT_NO_TEXT, EXIT_UNREADABLE};
use crate::{ConvertError, Input, Kind, Limits, Program};
use antler_process::{Rlimit, kill_process_group, set_rlimits};

/// Bytes of the child's stderr kept: enough for a panic message or an allocation failure.
const STDERR_BYTES: usize = 8 * 1024;
/// What the Rust runtime prints before aborting on a failed allocation.
const ALLOCATION_FAILED: &str = "memory allocation of";
/// What the Rust runtime prints before aborting on a stack overflow.
const STACK_OVERFLOW: &str = "has overflowed its stack";

pub(super) async fn run(
    program: &Program,
    kind: Kind,
    input: Input,
    limits: &Limits,
) -> Result<String, ConvertError> {
    let mut command = Command::new(&program.path);
    command
        .arg0("antler")
        .args(&program.leading_args)
        .args(["--kind", kind.arg()])
        // Nothing of the daemon's environment (keys, tokens) reaches the parser; one malloc
        // arena keeps the address space the limit counts to what the conversion uses.
        .env_clear()
        .env("MALLOC_ARENA_MAX", "1")
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    set_rlimits(
        &mut command,
        vec![
            Rlimit::AddressSpace(limits.memory_mb.saturating_mul(1024 * 1024)),
            Rlimit::Cpu(limits.timeout.as_secs().saturating_add(1)),
            // It writes nothing but its pipes, and a crash leaves no core file behind.
            Rlimit::FileSize(0),
            Rlimit::CoreSize(0),
        ],
    );
    let mut child = command.spawn().map_err(|e| {
        tracing::error!(program = %program.path.display(), error = %e, "Could not start the document converter");
        ConvertError::Unavailable {
            detail: e.to_string(),
        }
    })?;
    let pid = child.id();
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let cap = limits.max_output_bytes();
    let exchange = async {
        let (_, stdout, stderr) = tokio::join!(
            feed(stdin, input),
            read_output(stdout, cap, pid),
            read_capped(stderr, STDERR_BYTES),
        );
        (stdout, stderr, child.wait().await)
    };
    let ended = tokio::time::timeout(limits.timeout, exchange).await;
    let (stdout, stderr, status) = match ended {
        Ok(ended) => ended,
        Err(_) => {
            kill(pid);
            let _ = child.wait().await;
            return Err(ConvertError::TimedOut {
                seconds: limits.timeout.as_secs(),
            });
        }
    };
    let Some(stdout) = stdout else {
        return Err(ConvertError::OutputTooLarge {
            limit_mb: limits.max_output_mb,
        });
    };
    let status = status.map_err(|e| ConvertError::Unavailable {
        detail: format!("waiting for the converter failed: {e}"),
    })?;
    let stderr = String::from_utf8_lossy(&stderr);
    classify(status, &stderr, kind, limits)?;
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

/// `Ok` for a clean exit; otherwise why the child stopped.
fn classify(
    status: ExitStatus,
    stderr: &str,
    kind: Kind,
    limits: &Limits,
) -> Result<(), ConvertError> {
    let too_much_memory = ConvertError::TooMuchMemory {
        limit_mb: limits.memory_mb,
    };
    match status.code() {
        Some(0) => return Ok(()),
        Some(EXIT_UNREADABLE) => {
            return Err(ConvertError::Unreadable {
                kind: kind.label(),
                detail: last_line(stderr),
            });
        }
        Some(EXIT_NO_TEXT) => return Err(ConvertError::NoText),
        Some(EXIT_NO_MEMORY) => return Err(too_much_memory),
        _ => {}
    }
    if stderr.contains(ALLOCATION_FAILED) {
        return Err(too_much_memory);
    }
    if stderr.contains(STACK_OVERFLOW) {
        return Err(ConvertError::TooDeep);
    }
    let detail = match (status.code(), status.signal()) {
        (_, Some(libc::SIGXCPU)) => {
            return Err(ConvertError::TimedOut {
                seconds: limits.timeout.as_secs(),
            });
        }
        (Some(EXIT_CRASHED), _) => "its parser panicked".to_string(),
        (_, Some(signal)) => format!("killed by signal {signal}"),
        (Some(code), _) => format!("exit status {code}"),
        (None, None) => "no exit status".to_string(),
    };
    tracing::warn!(kind = kind.arg(), %detail, stderr = %last_line(stderr), "The document converter crashed");
    Err(ConvertError::Crashed { detail })
}

/// The last non-empty line of the child's stderr: the message it left.
fn last_line(stderr: &str) -> String {
    stderr
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("no detail")
        .to_string()
}

/// Writes the input, then closes stdin. A child that stopped early breaks the pipe: its exit
/// status says why, so write errors are not.
async fn feed(stdin: Option<ChildStdin>, input: Input) {
    let Some(mut stdin) = stdin else {
        return;
    };
    let _ = match input {
        Input::Bytes(bytes) => stdin.write_all(&bytes).await,
        Input::File(path) => match tokio::fs::File::open(&path).await {
            Ok(mut file) => tokio::io::copy(&mut file, &mut stdin).await.map(|_| ()),
            Err(error) => Err(error),
        },
    };
}

/// The child's stdout, or `None` once it passed `cap` bytes (the child is killed right away so
/// it stops producing).
async fn read_output(
    stream: Option<impl AsyncRead + Unpin>,
    cap: usize,
    pid: Option<u32>,
) -> Option<Vec<u8>> {
    let Some(mut stream) = stream else {
        return Some(Vec::new());
    };
    let mut kept = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return Some(kept),
            Ok(n) if kept.len() + n > cap => {
                kill(pid);
                return None;
            }
            Ok(n) => kept.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn read_capped(stream: Option<impl AsyncRead + Unpin>, cap: usize) -> Vec<u8> {
    let Some(mut stream) = stream else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut chunk = vec![0u8; 4096];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

fn kill(pid: Option<u32>) {
    if let Some(pid) = pid {
        kill_process_group(pid);
    }
}
