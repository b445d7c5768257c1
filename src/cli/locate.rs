//! How every CLI command finds what it works on: a running daemon, or the data dir itself.
//!
//! One order for all (`status`, `chat`, `agents`, `skills`, `mcp`, `usage`): the socket in the
//! config's data dir; then this user's running daemons ([`crate::daemon::runtime_file`]): the one
//! started with this config file, or, when the data dir is only the implicit `./.antler` of the
//! working directory and holds no store, the one daemon that runs (several are listed, not
//! guessed between); else the data dir, unless a process holds its store without answering.
//! The config is read leniently for this ([`crate::config::locate`]): a daemon is found
//! whatever secrets the shell lacks or whatever edit it rejected.

use std::path::{Path, PathBuf};

use crate::cli::daemon_client::{DaemonClient, DaemonClientError};
use crate::config::{ConfigError, ConfigOrigin, EnvSource, LoadedConfig, Locator, load_config};
use crate::daemon::local_socket::{instance_sockets, socket_path};
use crate::daemon::runtime_file::{DaemonRecord, canonical, live_records, runtime_dir};
use antler_store::STORE_DIR;

/// What a command works on.
pub enum Located {
    /// A daemon answers on its socket.
    Daemon(FoundDaemon),
    /// No daemon: the command may open the data dir itself. `no_daemon` says why none was
    /// found on its socket.
    DataDir {
        data_dir: PathBuf,
        no_daemon: String,
    },
}

/// A daemon that answered.
pub struct FoundDaemon {
    pub client: DaemonClient,
    pub data_dir: PathBuf,
    /// Its runtime record, when it was found through it rather than the config's data dir.
    pub record: Option<DaemonRecord>,
}

#[derive(Debug, thiserror::Error)]
pub enum LocateError {
    #[error(transparent)]
    Daemon(#[from] DaemonClientError),
    #[error(
        "{count} antler daemons are running and none uses {origin}:\n{list}\npick one with \
         --config PATH (the config file it started with) or ANTLER_HOME=DIR (its data dir)"
    )]
    Ambiguous {
        count: usize,
        origin: String,
        list: String,
    },
    #[error(
        "cannot tell the data dir from {origin} ({problem}), and no running daemon was started \
         with it; fix the config, or name the data dir with ANTLER_HOME=DIR"
    )]
    NoDataDir { origin: String, problem: String },
}

impl Located {
    /// The one line a command prints (to stderr) saying what it uses.
    pub fn describe(&self) -> String {
        match self {
            Self::Daemon(found) => match &found.record {
                None => format!(
                    "antler: using the daemon on {}",
                    found.client.socket().display()
                ),
                Some(record) => format!(
                    "antler: using the daemon on {} (pid {}, {}), found among this user's \
                     running daemons",
                    found.client.socket().display(),
                    record.pid,
                    started_with(record)
                ),
            },
            Self::DataDir { data_dir, .. } => format!(
                "antler: no daemon is running for {}; working on that data dir directly",
                data_dir.display()
            ),
        }
    }
}

fn started_with(record: &DaemonRecord) -> String {
    match &record.config {
        Some(path) => format!("config {}", path.display()),
        None => "the embedded default config".to_string(),
    }
}

/// What a command works on once located.
pub struct Target {
    /// With a daemon: this config read leniently, with the daemon's data dir (for its path and
    /// user names only). Without: the whole config, validated, to open the data dir with.
    pub loaded: LoadedConfig,
    pub daemon: Option<DaemonClient>,
    /// The line saying what is used (the command prints it to stderr).
    pub description: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(transparent)]
    Locate(#[from] LocateError),
    /// No daemon runs and the config cannot be used to open the data dir.
    #[error("the configuration is invalid:\n{0}")]
    Config(#[from] ConfigError),
}

/// Locates with `locator`, then reads the whole config (`flag` as `--config`) only when no
/// daemon answers.
pub async fn target(
    locator: &Locator,
    flag: Option<&Path>,
    env: &dyn EnvSource,
    cwd: &Path,
) -> Result<Target, TargetError> {
    let located = locate(locator, env).await?;
    let description = located.describe();
    Ok(match located {
        Located::Daemon(found) => Target {
            loaded: LoadedConfig {
                config: locator.config_for_daemon(&found.data_dir),
                origin: locator.origin.clone(),
                warnings: Vec::new(),
            },
            daemon: Some(found.client),
            description,
        },
        Located::DataDir { .. } => Target {
            loaded: load_config(flag, env, cwd)?,
            daemon: None,
            description,
        },
    })
}

/// Finds the daemon (or data dir) `locator` leads to; `env` says where the runtime records are.
pub async fn locate(locator: &Locator, env: &dyn EnvSource) -> Result<Located, LocateError> {
    let mut no_daemon = "no data dir".to_string();
    if let Some(data_dir) = &locator.data_dir {
        match DaemonClient::connect(&socket_path(data_dir)).await {
            Ok(client) => {
                return Ok(Located::Daemon(FoundDaemon {
                    client,
                    data_dir: data_dir.clone(),
                    record: None,
                }));
            }
            Err(detail) => no_daemon = detail,
        }
    }
    let records = runtime_dir(env)
        .map(|dir| live_records(&dir))
        .unwrap_or_default();
    if let ConfigOrigin::File(path) = &locator.origin {
        let ours = canonical(path);
        for record in records
            .iter()
            .filter(|r| r.config.as_deref().map(canonical) == Some(ours.clone()))
        {
            if let Some(found) = answering(record).await {
                return Ok(Located::Daemon(found));
            }
        }
    }
    let unused_default = locator.implicit_data_dir
        && locator
            .data_dir
            .as_ref()
            .is_none_or(|dir| !dir.join(STORE_DIR).exists());
    if unused_default {
        let mut found = Vec::new();
        for record in &records {
            if let Some(daemon) = answering(record).await {
                found.push(daemon);
            }
        }
        if found.len() > 1 {
            let list: Vec<String> = found
                .iter()
                .filter_map(|daemon| daemon.record.as_ref())
                .map(|r| {
                    format!(
                        "  pid {}: data dir {}, {}",
                        r.pid,
                        r.data_dir.display(),
                        started_with(r)
                    )
                })
                .collect();
            return Err(LocateError::Ambiguous {
                count: found.len(),
                origin: locator.origin.to_string(),
                list: list.join("\n"),
            });
        }
        if let Some(daemon) = found.pop() {
            return Ok(Located::Daemon(daemon));
        }
    }
    // Several instances sharing the data dir, none recorded for this user: one that answers
    // (after the records, which name this host's own daemon).
    for socket in locator
        .data_dir
        .iter()
        .flat_map(|dir| instance_sockets(dir))
    {
        if let (Ok(client), Some(data_dir)) =
            (DaemonClient::connect(&socket).await, &locator.data_dir)
        {
            return Ok(Located::Daemon(FoundDaemon {
                client,
                data_dir: data_dir.clone(),
                record: None,
            }));
        }
    }
    let Some(data_dir) = &locator.data_dir else {
        return Err(LocateError::NoDataDir {
            origin: locator.origin.to_string(),
            problem: locator.problem.clone().unwrap_or_else(|| {
                "its data_dir has a problem; `antler config check` says which".into()
            }),
        });
    };
    if antler_store::sled_store::is_locked(&data_dir.join(STORE_DIR)) {
        return Err(DaemonClientError::NotAnswering {
            data_dir: data_dir.display().to_string(),
            socket: socket_path(data_dir).display().to_string(),
            detail: no_daemon,
        }
        .into());
    }
    Ok(Located::DataDir {
        data_dir: data_dir.clone(),
        no_daemon,
    })
}

async fn answering(record: &DaemonRecord) -> Option<FoundDaemon> {
    let client = DaemonClient::connect(&record.socket).await.ok()?;
    Some(FoundDaemon {
        client,
        data_dir: record.data_dir.clone(),
        record: Some(record.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{MapEnv, read_locator};
    use crate::daemon::runtime_file::publish;

    /// A daemon's socket answering `/healthz` as the daemon does, served until dropped.
    async fn fake_daemon(data_dir: &Path) -> tokio::task::JoinHandle<()> {
        std::fs::create_dir_all(data_dir).unwrap();
        let (listener, file) = crate::daemon::local_socket::bind(data_dir).unwrap();
        let app = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
        tokio::spawn(async move {
            let _file = file;
            let _ = axum::serve(listener, app).await;
        })
    }

    fn record_of(data_dir: &Path, config: Option<&Path>) -> DaemonRecord {
        DaemonRecord {
            pid: std::process::id(),
            socket: socket_path(data_dir),
            data_dir: data_dir.to_path_buf(),
            config: config.map(canonical),
            listen: "127.0.0.1:0".into(),
        }
    }

    #[tokio::test]
    async fn the_one_running_daemon_is_found_from_an_empty_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let env = MapEnv::new().with("XDG_RUNTIME_DIR", tmp.path().to_string_lossy());
        let elsewhere = tmp.path().join("empty");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let locator = read_locator(None, &MapEnv::new(), &elsewhere);
        let located = locate(&locator, &env).await.unwrap();
        assert!(matches!(located, Located::DataDir { .. }));
        assert!(
            located.describe().contains("no daemon is running for"),
            "{}",
            located.describe()
        );

        let data_dir = tmp.path().join("daemon-data");
        let server = fake_daemon(&data_dir).await;
        let _record = publish(&env, &record_of(&data_dir, None)).unwrap();
        let Located::Daemon(found) = locate(&locator, &env).await.unwrap() else {
            panic!("the running daemon was not found");
        };
        assert_eq!(found.data_dir, data_dir);
        let line = Located::Daemon(found).describe();
        assert!(
            line.contains(&socket_path(&data_dir).display().to_string()),
            "{line}"
        );
        assert!(line.contains("the embedded default config"), "{line}");

        // A second daemon: no guessing.
        let other = tmp.path().join("other-data");
        let _server2 = fake_daemon(&other).await;
        let _record2 = publish(&env, &record_of(&other, None)).unwrap();
        let Err(error) = locate(&locator, &env).await else {
            panic!("two daemons must not be guessed between");
        };
        let text = error.to_string();
        assert!(text.starts_with("2 antler daemons are running"), "{text}");
        assert!(text.contains(&other.display().to_string()), "{text}");
        server.abort();
    }

    #[tokio::test]
    async fn a_config_file_finds_the_daemon_it_started_even_with_another_data_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let env = MapEnv::new().with("XDG_RUNTIME_DIR", tmp.path().to_string_lossy());
        let config = tmp.path().join("config.yaml");
        // No data_dir in the file: the daemon had ANTLER_HOME, this shell has not.
        std::fs::write(&config, "log_level: info\n").unwrap();
        let data_dir = tmp.path().join("service-home");
        let _server = fake_daemon(&data_dir).await;
        let _record = publish(&env, &record_of(&data_dir, Some(&config))).unwrap();
        let shell = tmp.path().join("shell");
        std::fs::create_dir_all(&shell).unwrap();
        let locator = read_locator(Some(&config), &MapEnv::new(), &shell);
        let Located::Daemon(found) = locate(&locator, &env).await.unwrap() else {
            panic!("the daemon started with this config was not found");
        };
        assert_eq!(found.data_dir, data_dir);

        // A config whose YAML is broken still finds its daemon; without one, the error says why.
        std::fs::write(&config, "data_dir: [unclosed\n").unwrap();
        let locator = read_locator(Some(&config), &MapEnv::new(), &shell);
        assert!(matches!(
            locate(&locator, &env).await,
            Ok(Located::Daemon(_))
        ));
        let Err(error) = locate(&locator, &MapEnv::new()).await else {
            panic!("no data dir and no daemon");
        };
        assert!(error.to_string().contains("not valid yaml"), "{error}");
    }

    #[tokio::test]
    async fn an_explicit_data_dir_is_never_swapped_for_another_daemon() {
        let tmp = tempfile::tempdir().unwrap();
        let env = MapEnv::new().with("XDG_RUNTIME_DIR", tmp.path().to_string_lossy());
        let running = tmp.path().join("running");
        let _server = fake_daemon(&running).await;
        let _record = publish(&env, &record_of(&running, None)).unwrap();
        let mine = tmp.path().join("mine");
        let locator = read_locator(
            None,
            &MapEnv::new().with("ANTLER_HOME", mine.to_string_lossy()),
            tmp.path(),
        );
        let located = locate(&locator, &env).await.unwrap();
        assert!(
            matches!(&located, Located::DataDir { data_dir, .. } if *data_dir == mine),
            "{}",
            located.describe()
        );
    }

    fn locator_of(data_dir: &Path) -> Locator {
        read_locator(
            None,
            &MapEnv::new().with("ANTLER_HOME", data_dir.to_string_lossy()),
            Path::new("/"),
        )
    }

    #[tokio::test]
    async fn a_missing_or_dead_socket_is_no_daemon_and_an_unlocked_dir_is_usable() {
        let dir = tempfile::tempdir().unwrap();
        let locator = locator_of(dir.path());
        let located = locate(&locator, &MapEnv::new()).await.unwrap();
        assert!(
            matches!(located, Located::DataDir { ref no_daemon, .. } if no_daemon == "no socket file")
        );
        // A socket file left by a crash: nothing listens on it.
        drop(tokio::net::UnixListener::bind(socket_path(dir.path())).unwrap());
        let located = locate(&locator, &MapEnv::new()).await.unwrap();
        assert!(
            matches!(located, Located::DataDir { ref no_daemon, .. } if no_daemon.contains("refused")),
            "{}",
            located.describe()
        );
    }

    #[tokio::test]
    async fn a_locked_store_without_an_answering_daemon_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let _held = antler_store::SledStore::open(dir.path().join(STORE_DIR)).unwrap();
        let Err(err) = locate(&locator_of(dir.path()), &MapEnv::new()).await else {
            panic!("a locked data dir must not be opened");
        };
        let text = err.to_string();
        assert!(text.contains("is locked by another process"), "{text}");
        assert!(text.contains("no socket file"), "{text}");
    }
}
