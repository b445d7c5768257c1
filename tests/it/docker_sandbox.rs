//! The docker sandbox provider against a fake Docker Engine API: container lifecycle, exec,
//! warm pool, idle eviction and orphan adoption.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use antler::config::{DockerSandboxConfig, SandboxConfig, SandboxProviderKind};
use antler::sandbox::docker::{container_name, container_name_in};
use antler::sandbox::{
    DockerSandboxProvider, PoolTiming, ProviderSettings, SandboxProvider, select_provider,
};
use antler_test_support::{ExecReply, FakeDocker};

const IMAGE: &str = "debian:bookworm-slim";

fn settings(fake_url: &str, tmp: &Path, replicas: usize) -> ProviderSettings {
    let skills = tmp.join("skills");
    std::fs::create_dir_all(&skills).unwrap();
    ProviderSettings {
        data_dir: tmp.join("data"),
        skills_dir: Some(skills),
        skill_mounts: None,
        sandbox: SandboxConfig {
            provider: SandboxProviderKind::Docker,
            docker: DockerSandboxConfig {
                host: Some(fake_url.to_string()),
                replicas,
                ..Default::default()
            },
            ..Default::default()
        },
        host_env: Vec::new(),
        instance: None,
    }
}

async fn provider(fake: &FakeDocker, tmp: &Path, replicas: usize) -> DockerSandboxProvider {
    DockerSandboxProvider::connect(settings(&fake.url(), tmp, replicas))
        .await
        .unwrap()
}

fn outputs_dir(tmp: &Path, user: &str, thread: &str) -> PathBuf {
    tmp.join(format!(
        "data/users/{user}/threads/{thread}/user-data/outputs"
    ))
}

#[tokio::test]
async fn creates_starts_execs_and_stops_a_deterministically_named_container() {
    let fake = FakeDocker::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let outputs = outputs_dir(tmp.path(), "alice", "t1");
    let host_outputs = std::path::absolute(&outputs).unwrap();
    let leak = format!("{}/report.txt\n", host_outputs.display());
    fake.on_exec(move |cmd| match cmd.last().map(String::as_str) {
        Some("echo hi; echo oops >&2; exit 3") => {
            ExecReply::stdout("hi\n").stderr("oops\n").exit_code(3)
        }
        Some("cat /proc/self/mountinfo") => ExecReply::stdout(leak.clone()),
        _ => ExecReply::default(),
    });
    let provider = provider(&fake, tmp.path(), 3).await;
    let name = container_name("alice", "t1");

    let id = provider.acquire("alice", "t1").await.unwrap();
    assert_eq!(id, "docker:alice:t1");
    assert_eq!(
        provider.acquire("alice", "t1").await.unwrap(),
        id,
        "idempotent"
    );
    assert_eq!(
        fake.call_lines(),
        [
            "GET /containers/json".to_string(),
            "POST /containers/create".to_string(),
            format!("POST /containers/{name}/start"),
        ]
    );
    let create = fake
        .calls()
        .into_iter()
        .find(|c| c.path == "/containers/create")
        .unwrap();
    assert_eq!(create.query["name"], name);
    assert_eq!(create.body["Image"], IMAGE);
    assert_eq!(create.body["Labels"]["antler.managed"], "true");
    assert_eq!(create.body["Labels"]["antler.thread"], "t1");
    assert_eq!(create.body["HostConfig"]["NetworkMode"], "none");
    let mounts = create.body["HostConfig"]["Mounts"].as_array().unwrap();
    let mount = |target: &str| {
        mounts
            .iter()
            .find(|m| m["Target"] == target)
            .unwrap_or_else(|| panic!("no mount at {target}: {mounts:?}"))
    };
    assert_eq!(
        mount("/mnt/user-data/outputs")["Source"],
        host_outputs.to_str().unwrap()
    );
    assert_eq!(mount("/mnt/user-data/outputs")["ReadOnly"], false);
    assert_eq!(mount("/mnt/skills")["ReadOnly"], true);
    assert_eq!(mount("/mnt/skills")["Type"], "bind");

    let sandbox = provider.get(&id).unwrap();
    fake.clear_calls();
    let out = sandbox
        .execute_command("echo hi; echo oops >&2; exit 3", &[], None)
        .await
        .unwrap();
    assert_eq!(out.stdout, "hi\n");
    assert_eq!(out.stderr, "oops\n");
    assert_eq!(out.exit_code, Some(3));
    assert!(!out.timed_out);
    let lines = fake.call_lines();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], format!("POST /containers/{name}/exec"));
    assert!(lines[1].starts_with("POST /exec/") && lines[1].ends_with("/start"));
    assert!(lines[2].starts_with("GET /exec/") && lines[2].ends_with("/json"));
    let exec = &fake.calls()[0];
    assert_eq!(exec.body["WorkingDir"], "/mnt/user-data/workspace");
    assert_eq!(
        fake.exec_commands()[0],
        [
            "timeout",
            "-s",
            "KILL",
            "600",
            "sh",
            "-c",
            "echo hi; echo oops >&2; exit 3"
        ]
    );

    // Host paths printed inside the container (mount tables) come back virtual.
    let leaked = sandbox
        .execute_command("cat /proc/self/mountinfo", &[], None)
        .await
        .unwrap();
    assert_eq!(leaked.stdout, "/mnt/user-data/outputs/report.txt\n");

    // File operations go through the bind-mounted host directories.
    sandbox
        .write_file("/mnt/user-data/outputs/a.txt", "hello", false)
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(outputs.join("a.txt")).unwrap(),
        "hello"
    );
    assert_eq!(
        sandbox
            .read_file("/mnt/user-data/outputs/a.txt", None, None)
            .await
            .unwrap(),
        "hello"
    );

    fake.clear_calls();
    provider.shutdown().await;
    assert_eq!(
        fake.call_lines(),
        [
            format!("POST /containers/{name}/stop"),
            format!("DELETE /containers/{name}"),
        ]
    );
    assert!(fake.containers().is_empty());
    assert!(provider.get(&id).is_none());
}

#[tokio::test]
async fn a_command_past_its_timeout_is_reported_as_timed_out() {
    let fake = FakeDocker::start().await;
    fake.on_exec(|_| ExecReply::hang());
    let tmp = tempfile::tempdir().unwrap();
    let provider = provider(&fake, tmp.path(), 1).await;
    let id = provider.acquire("alice", "t1").await.unwrap();
    // The exec hangs for an hour: an answer within a minute, however loaded the machine, is
    // the timeout's.
    let sandbox = provider.get(&id).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        sandbox.execute_command(
            "sleep 100",
            &[("SECRET_TOKEN".into(), "x".into())],
            Some(Duration::from_millis(200)),
        ),
    )
    .await
    .expect("the command ended at its timeout")
    .unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    // The in-container `timeout` kills the process group at the deadline (whole seconds).
    assert_eq!(fake.exec_commands()[0][..4], ["timeout", "-s", "KILL", "1"]);
    let exec = fake
        .calls()
        .into_iter()
        .find(|c| c.path.ends_with("/exec"))
        .unwrap();
    let env: Vec<&str> = exec.body["Env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(
        env[0], "HOME=/mnt/user-data/workspace",
        "secret-looking env is dropped"
    );
    assert!(
        env[1].starts_with("ANTLER_EXEC_ID=") && env.len() == 2,
        "only the marker a quota kill finds the command by is added: {env:?}"
    );
    provider.shutdown().await;
}

#[tokio::test]
async fn a_command_whose_files_pass_the_thread_quota_is_killed_inside_the_container() {
    let fake = FakeDocker::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let workspace = antler::paths::ThreadPaths::new(&tmp.path().join("data"), "alice", "t1")
        .unwrap()
        .workspace();
    // The "command" fills the bind-mounted workspace on the host, then never ends.
    let fill = workspace.join("fill");
    fake.on_exec(move |cmd| {
        if cmd.iter().any(|part| part.contains("fill the disk")) {
            std::fs::write(&fill, vec![0u8; 2 * 1024 * 1024]).unwrap();
            ExecReply::hang()
        } else {
            ExecReply::stdout("")
        }
    });
    let mut settings = settings(&fake.url(), tmp.path(), 1);
    settings.sandbox.thread_quota_mb = 1;
    let provider = DockerSandboxProvider::connect(settings).await.unwrap();
    let id = provider.acquire("alice", "t1").await.unwrap();
    // An hour's timeout: an answer within a minute, however loaded the machine, is the
    // watchdog's.
    let sandbox = provider.get(&id).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        sandbox.execute_command("echo fill the disk", &[], Some(Duration::from_secs(3600))),
    )
    .await
    .expect("the watchdog stopped the command")
    .unwrap();
    let breach = out.quota_exceeded.expect("the watchdog stops the command");
    assert_eq!(breach.scope, antler::sandbox::QuotaScope::Thread);
    assert!(!out.timed_out);
    let kill = fake
        .exec_commands()
        .into_iter()
        .find(|cmd| {
            cmd.len() == 3 && cmd[0] == "sh" && cmd[2].contains("ANTLER_EXEC_ID=$ANTLER_KILL")
        })
        .expect("a kill exec finds the command's processes by their marker");
    assert!(kill[2].contains("kill -s KILL -- \"-$p\""), "{kill:?}");
    // The kill names the very command that ran: its marker is the kill's target.
    let envs: Vec<Vec<String>> = fake
        .calls()
        .into_iter()
        .filter(|c| c.path.ends_with("/exec"))
        .map(|c| serde_json::from_value(c.body["Env"].clone()).unwrap())
        .collect();
    let marker = envs[0]
        .iter()
        .find_map(|e| e.strip_prefix("ANTLER_EXEC_ID="))
        .unwrap();
    assert_eq!(envs[1], [format!("ANTLER_KILL={marker}")]);
    provider.shutdown().await;
}

#[tokio::test]
async fn released_containers_are_reused_and_evicted_least_recently_used_first() {
    let fake = FakeDocker::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let provider = provider(&fake, tmp.path(), 2).await;
    let (c1, c2, c3) = (
        container_name("alice", "t1"),
        container_name("alice", "t2"),
        container_name("bob", "t3"),
    );

    let id1 = provider.acquire("alice", "t1").await.unwrap();
    provider.release(&id1).await.unwrap();
    assert!(
        provider.get(&id1).is_none(),
        "a released sandbox is not handed out"
    );
    assert_eq!(provider.warm_containers(), std::slice::from_ref(&c1));
    fake.clear_calls();
    assert_eq!(provider.acquire("alice", "t1").await.unwrap(), id1);
    assert_eq!(
        fake.call_lines(),
        [format!("GET /containers/{c1}/json")],
        "a warm container is checked and reused without a create"
    );
    assert_eq!(provider.active_count(), 1);
    provider.release(&id1).await.unwrap();

    let id2 = provider.acquire("alice", "t2").await.unwrap();
    provider.release(&id2).await.unwrap();
    assert_eq!(provider.warm_containers(), [c1.clone(), c2.clone()]);

    // A third thread needs room: the least recently released (t1) goes.
    fake.clear_calls();
    let id3 = provider.acquire("bob", "t3").await.unwrap();
    assert_eq!(
        fake.call_lines(),
        [
            format!("POST /containers/{c1}/stop"),
            format!("DELETE /containers/{c1}"),
            "POST /containers/create".to_string(),
            format!("POST /containers/{c3}/start"),
        ]
    );
    assert_eq!(provider.warm_containers(), std::slice::from_ref(&c2));
    let mut names: Vec<String> = fake.containers().into_iter().map(|c| c.name).collect();
    names.sort();
    let mut expected = vec![c2.clone(), c3.clone()];
    expected.sort();
    assert_eq!(names, expected);

    // With every container in use a new one still starts (past the cap).
    let id1_again = provider.acquire("alice", "t1").await.unwrap();
    provider.acquire("alice", "t2").await.unwrap();
    assert_eq!(provider.active_count(), 3);
    // Releasing brings the total back under the cap by evicting the released one.
    provider.release(&id1_again).await.unwrap();
    assert!(provider.warm_containers().is_empty());
    assert!(fake.container(&c1).is_none());
    provider.release(&id3).await.unwrap();
    assert_eq!(provider.warm_containers(), [c3]);
    provider.shutdown().await;
    assert!(fake.containers().is_empty());
}

#[tokio::test]
async fn a_warm_container_that_vanished_is_recreated() {
    let fake = FakeDocker::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let provider = provider(&fake, tmp.path(), 3).await;
    let name = container_name("alice", "t1");
    let id = provider.acquire("alice", "t1").await.unwrap();
    provider.release(&id).await.unwrap();
    let first = fake.container(&name).unwrap().id;
    // Someone removed it while it was warm (`docker rm -f`, an engine reset).
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    client
        .delete(format!("{}/containers/{name}?force=true", fake.url()))
        .send()
        .await
        .unwrap();
    fake.clear_calls();
    provider.acquire("alice", "t1").await.unwrap();
    assert_eq!(
        fake.call_lines(),
        [
            format!("GET /containers/{name}/json"),
            "POST /containers/create".to_string(),
            format!("POST /containers/{name}/start"),
        ]
    );
    assert_ne!(fake.container(&name).unwrap().id, first);
    provider.shutdown().await;
}

#[tokio::test]
async fn warm_containers_idle_past_the_timeout_are_stopped_and_removed() {
    let fake = FakeDocker::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let timing = PoolTiming {
        idle_timeout: Duration::from_millis(150),
        sweep_interval: Duration::from_millis(20),
    };
    let provider =
        DockerSandboxProvider::connect_with_timing(settings(&fake.url(), tmp.path(), 3), timing)
            .await
            .unwrap();
    let name = container_name("alice", "t1");
    let id = provider.acquire("alice", "t1").await.unwrap();
    // In use: never reaped, however long it idles. A container acquired after it and released
    // is reaped first: a sweep that would have taken the one in use has run by then.
    let witness = container_name("bob", "t2");
    let witness_id = provider.acquire("bob", "t2").await.unwrap();
    provider.release(&witness_id).await.unwrap();
    let gone = async |name: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while fake.container(name).is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "idle container {name} not removed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    gone(&witness).await;
    assert!(
        fake.container(&name).is_some(),
        "the container in use stays"
    );
    provider.release(&id).await.unwrap();
    gone(&name).await;
    let lines = fake.call_lines();
    assert!(
        lines.contains(&format!("POST /containers/{name}/stop")),
        "{lines:?}"
    );
    assert!(provider.warm_containers().is_empty());
    provider.shutdown().await;
}

#[tokio::test]
async fn leftover_containers_are_adopted_or_removed_at_start() {
    let fake = FakeDocker::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let mine = container_name("alice", "t1");
    let labels = |user, thread| {
        vec![
            ("antler.managed", "true"),
            ("antler.user", user),
            ("antler.thread", thread),
        ]
    };
    fake.add_container(&mine, IMAGE, &labels("alice", "t1"), false);
    fake.add_container("antler-renamed", IMAGE, &labels("alice", "t2"), true);
    let other_image = container_name("bob", "t9");
    fake.add_container(&other_image, "alpine:3", &labels("bob", "t9"), true);
    fake.add_container("postgres", "postgres:16", &[], true);

    let provider = provider(&fake, tmp.path(), 3).await;
    let mut left: Vec<String> = fake.containers().into_iter().map(|c| c.name).collect();
    left.sort();
    assert_eq!(left, [mine.clone(), "postgres".to_string()]);
    assert_eq!(provider.warm_containers(), std::slice::from_ref(&mine));
    let list = &fake.calls()[2];
    assert_eq!(list.path, "/containers/json");
    assert_eq!(list.query["all"], "true");
    assert!(
        list.query["filters"].contains("antler.managed=true"),
        "{:?}",
        list.query
    );

    fake.clear_calls();
    let id = provider.acquire("alice", "t1").await.unwrap();
    assert_eq!(
        fake.call_lines(),
        [
            format!("GET /containers/{mine}/json"),
            format!("POST /containers/{mine}/start"),
        ],
        "the stopped orphan is started, not recreated"
    );
    assert!(provider.get(&id).is_some());
    provider.shutdown().await;
    assert!(
        fake.container("postgres").is_some(),
        "unmanaged containers are left alone"
    );
}

#[tokio::test]
async fn a_missing_image_is_pulled_once_then_created() {
    let fake = FakeDocker::start().await;
    fake.remove_image(IMAGE);
    let tmp = tempfile::tempdir().unwrap();
    let provider = provider(&fake, tmp.path(), 3).await;
    provider.acquire("alice", "t1").await.unwrap();
    let lines = fake.call_lines();
    assert_eq!(
        lines[1..4],
        [
            "POST /containers/create".to_string(),
            "POST /images/create".to_string(),
            "POST /containers/create".to_string(),
        ]
    );
    provider.shutdown().await;
}

#[tokio::test]
async fn select_provider_builds_docker_and_reports_an_unreachable_engine() {
    let fake = FakeDocker::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let provider: Arc<dyn SandboxProvider> = select_provider(settings(&fake.url(), tmp.path(), 3))
        .await
        .unwrap();
    let id = provider.acquire("alice", "t1").await.unwrap();
    assert_eq!(id, "docker:alice:t1");
    assert!(fake.calls().iter().any(|c| c.path == "/_ping"));
    provider.shutdown().await;

    let Err(error) = select_provider(settings("http://127.0.0.1:1", tmp.path(), 3)).await else {
        panic!("an unreachable engine must fail");
    };
    let message = error.to_string();
    assert!(message.contains("did not answer"), "{message}");
    assert!(
        message.contains("choose another sandbox.provider"),
        "{message}"
    );
}

#[tokio::test]
async fn instances_sharing_a_docker_host_leave_each_others_containers_alone() {
    let fake = FakeDocker::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let as_instance = |name: &str| {
        let mut settings = settings(&fake.url(), tmp.path(), 3);
        settings.instance = Some(name.to_string());
        settings
    };
    let a = DockerSandboxProvider::connect(as_instance("web-1"))
        .await
        .unwrap();
    let id = a.acquire("alice", "t1").await.unwrap();
    a.release(&id).await.unwrap();
    let a_name = container_name_in(Some("web-1"), "alice", "t1");
    assert_eq!(a.warm_containers(), std::slice::from_ref(&a_name));

    // web-2 starts on the same Docker host: web-1's warm container is neither adopted nor
    // removed, and the same thread gets a container of web-2's own.
    let b = DockerSandboxProvider::connect(as_instance("web-2"))
        .await
        .unwrap();
    assert!(b.warm_containers().is_empty());
    assert!(fake.container(&a_name).is_some(), "web-1's container stays");
    b.acquire("alice", "t1").await.unwrap();
    let b_name = container_name_in(Some("web-2"), "alice", "t1");
    assert_ne!(a_name, b_name);
    assert!(fake.container(&b_name).is_some());
    assert_eq!(a.warm_containers(), std::slice::from_ref(&a_name));

    // web-1 restarted under its name finds its own container again.
    let again = DockerSandboxProvider::connect(as_instance("web-1"))
        .await
        .unwrap();
    assert_eq!(again.warm_containers(), std::slice::from_ref(&a_name));
    assert!(fake.container(&b_name).is_some(), "web-2's container stays");
    b.shutdown().await;
    again.shutdown().await;
}
