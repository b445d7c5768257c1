//! The bwrap provider's isolation: host files, secrets, network, timeout, outputs.
//!
//! Each test probes bubblewrap first and, where it cannot run, prints why and returns, unless
//! `ANTLER_REQUIRE_BWRAP=1` (CI), where it fails.

use std::net::TcpListener;
use std::time::Duration;

use antler::config::SandboxConfig;
use antler::sandbox::SandboxProvider;
use antler::sandbox::{ExecMode, ProviderSettings, select_host_provider};
use antler::tools::builtin::{BashTool, SandboxAccess, ToolMeta};
use antler_store::state::ThreadState;
use serde_json::json;

use super::{Fixture, THREAD, USER, bwrap_usable};

async fn bwrap_fixture(network: bool, host_env: Vec<(String, String)>) -> Option<Fixture> {
    if !bwrap_usable().await {
        return None;
    }
    let sandbox = SandboxConfig {
        network,
        ..Default::default()
    };
    let mode = ExecMode::Bwrap {
        network,
        drop_to_uid: true,
    };
    Some(Fixture::with(mode, sandbox, host_env))
}

#[tokio::test]
async fn cannot_read_host_files_outside_its_mounts() {
    let Some(fx) = bwrap_fixture(false, Vec::new()).await else {
        return;
    };
    let secret = fx.tmp.path().join("host-secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let sandbox = fx.sandbox().await;
    let out = sandbox
        .execute_command(
            &format!("cat {}; ls /root; cat /etc/shadow; ls /", secret.display()),
            &[],
            None,
        )
        .await
        .unwrap();
    let text = out.to_text();
    assert!(!text.contains("top secret"), "{text}");
    assert!(text.contains("No such file"), "{text}");
    assert!(
        !out.stdout.contains("root\n"),
        "/root is not mounted: {text}"
    );
    assert!(out.stdout.contains("mnt"), "{text}");
    let id = sandbox
        .execute_command("id -u; pwd; echo $HOME", &[], None)
        .await
        .unwrap();
    assert_eq!(
        id.stdout,
        "1000\n/mnt/user-data/workspace\n/mnt/user-data/workspace\n"
    );
    let skills = sandbox
        .execute_command(
            "cat /mnt/skills/demo/SKILL.md; touch /mnt/skills/x",
            &[],
            None,
        )
        .await
        .unwrap();
    assert!(skills.stdout.contains("# demo skill"));
    assert!(
        skills.stderr.contains("Read-only file system"),
        "{skills:?}"
    );
}

#[tokio::test]
async fn cannot_see_antler_or_secret_variables() {
    let host_env = vec![
        (
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        ),
        (
            "ANTLER_MODEL_API_KEY".to_string(),
            "sk-antler-leak".to_string(),
        ),
        ("ANTLER_HOME".to_string(), "/leak/home".to_string()),
        ("GITHUB_TOKEN".to_string(), "ghp-leak".to_string()),
        ("LANG".to_string(), "C.UTF-8".to_string()),
    ];
    let Some(fx) = bwrap_fixture(false, host_env).await else {
        return;
    };
    let sandbox = fx.sandbox().await;
    let extra = vec![
        ("SLACK_BOT_TOKEN".to_string(), "xoxb-leak".to_string()),
        ("ANTLER_X".to_string(), "antler-leak".to_string()),
        ("GREETING".to_string(), "hello".to_string()),
    ];
    let out = sandbox.execute_command("env", &extra, None).await.unwrap();
    assert!(!out.stdout.contains("leak"), "{}", out.stdout);
    assert!(!out.stdout.contains("ANTLER"), "{}", out.stdout);
    assert!(!out.stdout.contains("TOKEN"), "{}", out.stdout);
    assert!(out.stdout.contains("GREETING=hello"));
    assert!(out.stdout.contains("LANG=C.UTF-8"));
}

#[tokio::test]
async fn network_is_off_unless_enabled() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo CONNECTED");
    let Some(fx) = bwrap_fixture(false, Vec::new()).await else {
        return;
    };
    let out = fx
        .sandbox()
        .await
        .execute_command(&probe, &[], None)
        .await
        .unwrap();
    assert!(!out.stdout.contains("CONNECTED"), "{out:?}");
    assert!(out.stderr.contains("Connection refused"), "{out:?}");

    let Some(open) = bwrap_fixture(true, Vec::new()).await else {
        return;
    };
    let out = open
        .sandbox()
        .await
        .execute_command(&probe, &[], None)
        .await
        .unwrap();
    assert!(
        out.stdout.contains("CONNECTED"),
        "with network: true it connects: {out:?}"
    );
}

#[tokio::test]
async fn is_killed_at_its_timeout() {
    let Some(fx) = bwrap_fixture(false, Vec::new()).await else {
        return;
    };
    let sandbox = fx.sandbox().await;
    // The command would run two minutes: an answer within one, however loaded the machine,
    // is the timeout's.
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        sandbox.execute_command(
            "echo started; sleep 120",
            &[],
            Some(Duration::from_millis(500)),
        ),
    )
    .await
    .expect("the command was killed at its timeout")
    .unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_eq!(out.stdout, "started\n");
}

#[tokio::test]
async fn files_written_to_outputs_appear_on_the_host() {
    let Some(fx) = bwrap_fixture(false, Vec::new()).await else {
        return;
    };
    let bash = BashTool::new(
        ToolMeta::new("bash", None),
        SandboxAccess::new(fx.provider_ref()),
        20_000,
        std::time::Duration::from_secs(60),
    );
    let mut state = ThreadState::default();
    let out = fx
        .call(
            &bash,
            json!({"command": "echo report > /mnt/user-data/outputs/r.txt && cat /mnt/user-data/outputs/r.txt && realpath /mnt/user-data/outputs/r.txt"}),
            &mut state,
        )
        .await;
    assert_eq!(out.content, "report\n/mnt/user-data/outputs/r.txt\n");
    assert_eq!(
        std::fs::read_to_string(fx.paths().outputs().join("r.txt")).unwrap(),
        "report\n"
    );
    for marker in fx.host_markers() {
        assert!(!out.content.contains(&marker));
    }
    assert_eq!(
        state.sandbox.unwrap().sandbox_id,
        format!("bwrap:{USER}:{THREAD}")
    );
}

#[tokio::test]
async fn auto_selection_prefers_bwrap_and_local_keeps_bash_off() {
    let tmp = tempfile::tempdir().unwrap();
    let settings = |provider| ProviderSettings {
        data_dir: tmp.path().to_path_buf(),
        skills_dir: None,
        skill_mounts: None,
        sandbox: SandboxConfig {
            provider,
            ..Default::default()
        },
        host_env: Vec::new(),
        instance: None,
    };
    let local = select_host_provider(settings(antler::config::SandboxProviderKind::Local))
        .await
        .unwrap();
    assert_eq!(local.mode(), ExecMode::Local { allow_bash: false });
    let auto = select_host_provider(settings(antler::config::SandboxProviderKind::Auto))
        .await
        .unwrap();
    let info = auto.info();
    if bwrap_usable().await {
        assert!(matches!(
            auto.mode(),
            ExecMode::Bwrap { network: false, .. }
        ));
        assert_eq!(
            (info.provider.as_str(), info.bash, info.reason.as_str()),
            ("bwrap", true, "auto: bubblewrap works")
        );
    } else {
        assert_eq!(auto.mode(), ExecMode::Local { allow_bash: false });
        assert_eq!((info.provider.as_str(), info.bash), ("local", false));
        assert!(
            info.reason.starts_with("auto: bwrap failed ("),
            "{}",
            info.reason
        );
    }
    assert!(!local.info().bash && local.info().reason.contains("sandbox.allow_host_bash"));
    let id = auto.acquire(USER, THREAD).await.unwrap();
    assert!(auto.get(&id).is_some());
    auto.release(&id).await.unwrap();
    assert!(
        auto.get(&id).is_some(),
        "deterministic ids are rebuilt after release"
    );
}

#[tokio::test]
async fn bench_reports_the_overhead_of_each_provider() {
    let tmp = tempfile::tempdir().unwrap();
    let bench = antler::sandbox::bench_bash_overhead(tmp.path(), 3)
        .await
        .unwrap();
    let results = &bench.providers;
    let names: Vec<&str> = results.iter().map(|r| r.provider).collect();
    let expected: &[&str] = if bwrap_usable().await {
        &["local", "bwrap"]
    } else {
        &["local"]
    };
    assert_eq!(names, expected);
    for result in results {
        assert!(
            result.median > Duration::ZERO && result.ratio > 0.0,
            "{result:?}"
        );
    }
    // What `antler bench sandbox` prints: a line for the direct spawn and one per provider.
    let printed = bench.to_string();
    assert!(
        printed.starts_with("sh -c true (direct): median "),
        "{printed}"
    );
    for name in expected {
        assert!(printed.contains(&format!("\n{name}: median ")), "{printed}");
    }
}
