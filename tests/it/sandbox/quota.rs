//! Disk quotas: the file tools refuse writes past `sandbox.thread_quota_mb`, and a bash command
//! whose files pass it is killed with its process group, on the host and inside bubblewrap.

use std::time::Duration;

use antler::config::SandboxConfig;
use antler::sandbox::{ExecMode, QuotaScope};
use antler_store::state::ThreadState;
use serde_json::json;

use super::{Fixture, WS, bwrap_usable, tools};

/// A 1 MiB thread quota (8 MiB for bash, whose files come in 1 MiB steps), no per-call cap.
fn quota_config(thread_quota_mb: u64, allow_host_bash: bool) -> SandboxConfig {
    SandboxConfig {
        thread_quota_mb,
        write_file_max_bytes: 0,
        allow_host_bash,
        ..Default::default()
    }
}

#[tokio::test]
async fn file_tools_refuse_writes_past_the_thread_quota_and_allow_shrinking() {
    let fx = Fixture::with(
        ExecMode::Local { allow_bash: false },
        quota_config(1, false),
        Vec::new(),
    );
    let t = tools(&fx);
    let mut state = ThreadState::default();
    let big = "x".repeat(700 * 1024);
    let out = fx
        .call(
            &t.write,
            json!({"path": format!("{WS}/big.txt"), "content": big}),
            &mut state,
        )
        .await;
    assert_eq!(out.content, "OK");

    let refused = fx
        .call(
            &t.write,
            json!({"path": "/mnt/user-data/outputs/more.txt", "content": "y".repeat(400 * 1024)}),
            &mut state,
        )
        .await;
    let text = refused.content;
    assert!(text.starts_with("Error: disk quota exceeded: "), "{text}");
    assert!(text.contains("writing 400.0 KiB more would pass the 1.0 MiB quota (sandbox.thread_quota_mb)"), "{text}");
    assert!(text.contains("Delete files you no longer need"), "{text}");
    for marker in fx.host_markers() {
        assert!(!text.contains(&marker), "{text}");
    }
    assert!(!fx.paths().outputs().join("more.txt").exists(), "nothing was written");

    // An edit that grows past the quota is refused too; one that shrinks always works.
    fx.call(&t.read, json!({"path": format!("{WS}/big.txt")}), &mut state)
        .await;
    let grow = fx
        .call(
            &t.replace,
            json!({"path": format!("{WS}/big.txt"), "old_str": "xxxx", "new_str": "z".repeat(400 * 1024)}),
            &mut state,
        )
        .await;
    assert!(grow.content.contains("disk quota exceeded"), "{}", grow.content);
    let shrink = fx
        .call(
            &t.write,
            json!({"path": format!("{WS}/big.txt"), "content": "small"}),
            &mut state,
        )
        .await;
    assert_eq!(shrink.content, "OK");
    let now_fits = fx
        .call(
            &t.write,
            json!({"path": "/mnt/user-data/outputs/more.txt", "content": "y".repeat(400 * 1024)}),
            &mut state,
        )
        .await;
    assert_eq!(now_fits.content, "OK");
}

/// Writes 1 MiB files, one every 50 ms, up to 40 MiB, far past an 8 MiB quota, then waits an
/// hour: it never ends on its own within the test, however slow the watchdog's checks on a
/// loaded machine (their interval grows with the cost of a check).
const FILL: &str = "i=0; while [ $i -lt 40 ]; do i=$((i+1)); \
    head -c 1048576 /dev/zero > /mnt/user-data/workspace/fill-$i; sleep 0.05; done; \
    sleep 3600; echo finished";

/// The shared story for one provider mode: the command is killed soon after passing the quota,
/// the model is told what happened and what to do, further growth is refused, and deleting
/// files (a command started while over quota) still works.
async fn bash_is_stopped_at_the_quota(fx: Fixture) {
    let t = tools(&fx);
    let mut state = ThreadState::default();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        fx.call(&t.bash, json!({"command": FILL}), &mut state),
    )
    .await
    .expect("the watchdog killed the command");
    let text = out.content;
    assert!(!text.contains("finished"), "{text}");
    assert!(
        text.contains("Error: Command was killed because this thread's files in /mnt/user-data take"),
        "{text}"
    );
    assert!(text.contains("over the 8.0 MiB quota (sandbox.thread_quota_mb)"), "{text}");
    assert!(text.contains("Delete files you no longer need"), "{text}");
    let written = std::fs::read_dir(fx.paths().workspace()).unwrap().count();
    assert!(written > 8, "killed after passing the quota: {written} files");

    let refused = fx
        .call(
            &t.write,
            json!({"path": format!("{WS}/note.txt"), "content": "y".repeat(64 * 1024)}),
            &mut state,
        )
        .await;
    assert!(refused.content.contains("disk quota exceeded"), "{}", refused.content);

    let cleaned = fx
        .call(
            &t.bash,
            json!({"command": "rm -f /mnt/user-data/workspace/fill-* && echo cleaned"}),
            &mut state,
        )
        .await;
    assert_eq!(cleaned.content, "cleaned\n");
    let fits = fx
        .call(
            &t.write,
            json!({"path": format!("{WS}/note.txt"), "content": "y".repeat(64 * 1024)}),
            &mut state,
        )
        .await;
    assert_eq!(fits.content, "OK");
}

#[tokio::test]
async fn host_bash_is_killed_when_its_files_pass_the_thread_quota() {
    let fx = Fixture::with(
        ExecMode::Local { allow_bash: true },
        quota_config(8, true),
        Vec::new(),
    );
    bash_is_stopped_at_the_quota(fx).await;
}

#[tokio::test]
async fn bwrap_bash_is_killed_when_its_files_pass_the_thread_quota() {
    if !bwrap_usable().await {
        return;
    }
    let mode = ExecMode::Bwrap {
        network: false,
        drop_to_uid: true,
    };
    bash_is_stopped_at_the_quota(Fixture::with(mode, quota_config(8, false), Vec::new())).await;
}

#[tokio::test]
async fn one_file_cannot_outgrow_the_room_left() {
    let fx = Fixture::with(
        ExecMode::Local { allow_bash: true },
        quota_config(8, true),
        Vec::new(),
    );
    let sandbox = fx.sandbox().await;
    // RLIMIT_FSIZE is clamped to the room left, so the file stops at 8 MiB whatever the
    // watchdog's timing, and the writer gets SIGXFSZ.
    let out = sandbox
        .execute_command(
            "head -c 33554432 /dev/zero > /mnt/user-data/workspace/huge; echo after",
            &[],
            None,
        )
        .await
        .unwrap();
    let size = std::fs::metadata(fx.paths().workspace().join("huge"))
        .unwrap()
        .len();
    assert!(size <= 8 * 1024 * 1024, "{size}");
    if let Some(breach) = out.quota_exceeded {
        assert_eq!(breach.scope, QuotaScope::Thread);
    } else {
        assert!(out.stdout.contains("after"), "{out:?}");
    }
}
