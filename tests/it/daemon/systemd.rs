//! systemd integration: the daemon speaks the `sd_notify` protocol to a datagram socket standing
//! in for systemd (READY, watchdog pings, RELOADING on SIGHUP, STOPPING at the drain), and the
//! shipped unit file passes `systemd-analyze verify`.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use antler_test_support::FakeOpenAi;

use super::{Daemon, Setup};

/// A stand-in for systemd's notification socket.
pub(super) struct NotifySocket {
    socket: UnixDatagram,
    seen: Vec<String>,
}

impl NotifySocket {
    pub(super) fn bind(path: &Path) -> Self {
        let socket = UnixDatagram::bind(path).expect("bind notify socket");
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        Self {
            socket,
            seen: Vec::new(),
        }
    }

    /// Waits until a datagram containing `line` arrives (earlier ones are kept in `seen`).
    pub(super) fn wait_for(&mut self, line: &str) -> String {
        self.wait_until(line, |l| l == line)
    }

    /// Waits until a datagram has a line `matches` accepts (`what` names it in the failure).
    pub(super) fn wait_until(&mut self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            if let Ok(n) = self.socket.recv(&mut buf) {
                let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                self.seen.push(message.clone());
                if message.lines().any(&matches) {
                    return message;
                }
            }
        }
        panic!("no {what:?} from the daemon; got {:?}", self.seen);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tells_systemd_it_is_ready_pings_the_watchdog_and_reports_reloads_and_stops() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let socket_path = setup.dir.path().join("notify.sock");
    let mut notify = NotifySocket::bind(&socket_path);
    let socket = socket_path.to_str().unwrap();
    // 400 ms watchdog ⇒ a ping every 200 ms while the store answers.
    let mut daemon = Daemon::spawn(
        &setup.config_path,
        &[("NOTIFY_SOCKET", socket), ("WATCHDOG_USEC", "400000")],
        None,
    );

    let ready = notify.wait_for("READY=1");
    assert!(ready.contains("STATUS=serving on 127.0.0.1:"), "{ready}");
    // The API answers by the time READY was sent.
    let health = daemon
        .http
        .get(daemon.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    notify.wait_for("WATCHDOG=1");
    notify.wait_for("WATCHDOG=1");

    daemon.signal("HUP");
    let reloading = notify.wait_for("RELOADING=1");
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading}");
    let after = notify.wait_for("READY=1");
    assert!(after.contains("STATUS=config "), "{after}");

    daemon.signal("TERM");
    notify.wait_for("STOPPING=1");
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_an_edited_config_and_keeps_the_old_one_when_the_edit_is_invalid() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let socket_path = setup.dir.path().join("notify.sock");
    let mut notify = NotifySocket::bind(&socket_path);
    let mut daemon = Daemon::spawn(
        &setup.config_path,
        &[("NOTIFY_SOCKET", socket_path.to_str().unwrap())],
        None,
    );
    notify.wait_for("READY=1");

    let original = std::fs::read_to_string(&setup.config_path).unwrap();
    std::fs::write(&setup.config_path, format!("{original}no_such_key: 1\n")).unwrap();
    daemon.signal("HUP");
    notify.wait_for("RELOADING=1");
    let rejected = notify.wait_for("READY=1");
    assert!(
        rejected.contains("STATUS=config change rejected; the previous config stays"),
        "{rejected}"
    );
    let health = daemon.http.get(daemon.url("/readyz")).send().await.unwrap();
    assert_eq!(health.status(), 200, "the daemon kept serving");

    std::fs::write(&setup.config_path, &original).unwrap();
    daemon.signal("HUP");
    notify.wait_for("RELOADING=1");
    let reloaded = notify.wait_for("READY=1");
    assert!(reloaded.contains("STATUS=config reloaded"), "{reloaded}");
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)), Some(0));
}

/// `systemd-analyze verify` on the shipped unit, with the binary path pointed at this build.
/// `.ci/run` installs systemd and sets `ANTLER_REQUIRE_SYSTEMD=1`, so there it cannot skip.
#[test]
fn the_shipped_unit_file_verifies() {
    let analyze = Command::new("systemd-analyze").arg("--version").output();
    if analyze.is_err() {
        assert!(
            std::env::var_os("ANTLER_REQUIRE_SYSTEMD").is_none(),
            "systemd-analyze is required (ANTLER_REQUIRE_SYSTEMD is set) but missing"
        );
        eprintln!("SKIPPED: systemd-analyze is not installed");
        return;
    }
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/systemd/antler.service"
    ))
    .unwrap();
    for key in [
        "Type=notify",
        "WatchdogSec=",
        "Restart=on-failure",
        "StateDirectory=antler",
        "ConfigurationDirectory=antler",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "SystemCallFilter=@system-service",
    ] {
        assert!(unit.contains(key), "the unit lacks {key}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("antler.service");
    std::fs::write(
        &path,
        unit.replace("/usr/local/bin/antler", env!("CARGO_BIN_EXE_antler")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("antler.service"),
        "warnings about the unit: {stderr}"
    );
}
