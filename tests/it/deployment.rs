//! The deployment files agree with each other and with the daemon: the systemd unit's header
//! installs into directories it created, skills come from the binary (nobody copies them), one
//! stop timeout everywhere, the README's `sudo -u antler` commands that open the data dir load
//! the service's secrets, and the container is usable with one variable (compose passes
//! `ANTLER_API_TOKEN` from `.env`, whose example names it; `.env` never enters the image), and
//! the cluster's compose file runs two instances on PostgreSQL behind a balancer.

use std::path::Path;
use std::process::Command;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The number after `key` in `text` (`TimeoutStopSec=70` → 70).
fn number_after(text: &str, key: &str) -> u64 {
    let start = text
        .find(key)
        .unwrap_or_else(|| panic!("no {key:?} in the file"))
        + key.len();
    let digits: String = text[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {key:?}"))
}

#[test]
fn the_units_install_commands_create_what_they_install_into_and_copy_no_skills() {
    let unit = read("systemd/antler.service");
    let header: Vec<&str> = unit.lines().take_while(|l| l.starts_with('#')).collect();
    let created = header
        .iter()
        .position(|l| l.contains("install -d") && l.trim_end().ends_with("/etc/antler"))
        .expect("the header creates /etc/antler");
    for (index, line) in header.iter().enumerate() {
        if line.contains("install ") && line.contains("/etc/antler/") {
            assert!(
                index > created,
                "{line} comes before /etc/antler is created"
            );
        }
    }
    let readme = read("systemd/README.md");
    for (name, text) in [
        ("antler.service", unit.as_str()),
        ("systemd/README.md", readme.as_str()),
        ("Dockerfile", read("Dockerfile").as_str()),
        ("README.md", read("README.md").as_str()),
    ] {
        for stale in ["/usr/local/share/antler", "cp -r skills", "COPY skills"] {
            assert!(!text.contains(stale), "{name} still says {stale:?}");
        }
    }
}

#[test]
fn one_stop_timeout_everywhere() {
    let unit = number_after(&read("systemd/antler.service"), "TimeoutStopSec=");
    assert_eq!(
        number_after(&read("systemd/README.md"), "TimeoutStopSec="),
        unit
    );
    assert_eq!(
        number_after(&read("docker-compose.yml"), "stop_grace_period: "),
        unit
    );
    assert_eq!(number_after(&read("README.md"), "docker stop -t "), unit);
}

#[test]
fn readme_commands_that_open_the_data_dir_load_the_services_environment() {
    let readme = read("systemd/README.md");
    let commands: Vec<String> = readme
        .split("sudo -u antler ")
        .skip(1)
        .map(|rest| {
            // A command runs to the end of its line, or of its quoted `sh -c` script.
            match rest.strip_prefix("sh -c '") {
                Some(script) => script.split('\'').next().unwrap_or_default().to_string(),
                None => {
                    let line = rest.lines().next().unwrap_or_default();
                    line.split(" #").next().unwrap_or_default().to_string()
                }
            }
        })
        .collect();
    assert!(!commands.is_empty());
    for command in &commands {
        let opens_data_dir = command.contains(" store ");
        if opens_data_dir {
            assert!(
                command.contains(". /etc/antler/antler.env"),
                "does not load antler.env: {command}"
            );
        } else {
            // Commands that talk to the daemon need no secrets (only data_dir and listen).
            let verb = command.split_whitespace().last().unwrap_or_default();
            assert!(
                ["status", "chat", "list"].contains(&verb),
                "unexpected command: {command}"
            );
        }
    }
}

#[test]
fn the_container_is_usable_with_one_variable() {
    let compose = read("docker-compose.yml");
    assert!(
        compose.contains("ANTLER_API_TOKEN: ${ANTLER_API_TOKEN:?"),
        "compose requires the token from .env"
    );
    assert!(compose.contains("127.0.0.1:8787:8787"));
    let example = read(".env.example");
    assert!(
        example.lines().any(|l| l.starts_with("ANTLER_API_TOKEN=")),
        "{example}"
    );
    assert!(read(".dockerignore").lines().any(|l| l == ".env"));
    assert!(read(".gitignore").lines().any(|l| l == ".env"));
    let dockerfile = read("Dockerfile");
    let health = dockerfile
        .lines()
        .skip_while(|l| !l.starts_with("HEALTHCHECK"))
        .nth(1)
        .unwrap_or_default();
    assert!(health.contains("\"status\""), "{health}");
    assert!(dockerfile.contains("ANTLER_LISTEN=0.0.0.0:8787"));
}

#[test]
fn the_quick_start_says_how_long_the_first_build_takes() {
    let readme = read("README.md");
    let quick_start = readme
        .split("## Quick start")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or_default();
    assert!(quick_start.contains("minutes on 2 cores"), "{quick_start}");
}

/// hadolint when it is installed (`.ci/run` installs it and lints the Dockerfile itself).
#[test]
fn the_dockerfile_lints_clean_where_hadolint_is_installed() {
    let Ok(output) = Command::new("hadolint")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile"))
        .output()
    else {
        eprintln!("SKIPPED: hadolint is not installed (.ci/run lints the Dockerfile)");
        return;
    };
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

/// The cluster's compose file: PostgreSQL, two instances on one shared data volume, each with
/// its own name and a runtime dir of its own (so its health check asks itself), and a
/// balancer that checks `/readyz` in front of both; its config selects PostgreSQL.
#[test]
fn the_cluster_compose_file_runs_two_instances_on_postgres_behind_a_balancer() {
    let compose: serde_json::Value =
        serde_saphyr::from_str(&read("deploy/cluster/docker-compose.yml")).expect("yaml");
    let services = &compose["services"];
    assert!(
        services["postgres"]["image"]
            .as_str()
            .is_some_and(|image| image.starts_with("postgres:")),
        "{services}"
    );
    let mut names = Vec::new();
    for instance in ["antler-a", "antler-b"] {
        let service = &services[instance];
        let volumes = service["volumes"].to_string();
        assert!(
            volumes.contains("antler-data:/data"),
            "{instance}: {volumes}"
        );
        let env = &service["environment"];
        assert_eq!(env["ANTLER_INSTANCE_ID"], instance);
        assert!(
            env["ANTLER_DATABASE_URL"]
                .as_str()
                .is_some_and(|url| url.starts_with("postgres://"))
        );
        assert_eq!(env["XDG_RUNTIME_DIR"], "/run/antler");
        assert!(service["tmpfs"].to_string().contains("/run/antler"));
        assert_eq!(
            service["stop_grace_period"],
            services["antler-a"]["stop_grace_period"]
        );
        names.push(instance);
    }
    let balancer = &services["balancer"];
    assert!(
        balancer["ports"]
            .to_string()
            .contains("127.0.0.1:8787:8787")
    );
    let caddy = read("deploy/cluster/Caddyfile");
    for name in &names {
        assert!(caddy.contains(&format!("{name}:8787")), "{caddy}");
    }
    assert!(caddy.contains("health_uri /readyz"), "{caddy}");

    let config: serde_json::Value =
        serde_saphyr::from_str(&read("deploy/cluster/config.yaml")).expect("yaml");
    assert_eq!(config["store"]["backend"], "postgres");
    assert_eq!(config["store"]["postgres"]["url"], "$ANTLER_DATABASE_URL");
    assert_eq!(config["cluster"]["instance_id"], "${ANTLER_INSTANCE_ID:-}");
    let home = tempfile::tempdir().expect("tempdir");
    let check = Command::new(env!("CARGO_BIN_EXE_antler"))
        .arg("--config")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/cluster/config.yaml"))
        .args(["config", "check"])
        .env("ANTLER_HOME", home.path())
        .env(
            "ANTLER_DATABASE_URL",
            "postgres://antler@postgres:5432/antler",
        )
        .env("ANTLER_INSTANCE_ID", "antler-a")
        .output()
        .expect("antler config check");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let readme = read("README.md");
    assert!(readme.contains("## Running several instances"));
    assert!(readme.contains("antler store copy --to"));
}
