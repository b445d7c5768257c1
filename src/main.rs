//! The `antler` binary: the composition root. Parses the command line, loads and validates the
//! configuration (exit 64 listing every problem), sets up logging and signals, and hands over
//! to the library. No behaviour lives here.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};

use antler::config::{
    ConfigHandle, ConfigOrigin, EXIT_CONFIG_INVALID, LoadedConfig, LogFormat, ProcessEnv,
    RuntimeConfig, load_config, run_check,
};

#[derive(Parser)]
#[command(
    name = "antler",
    version,
    about = "Self-hosted AI agent daemon for team chats"
)]
struct Cli {
    /// Config file (else $ANTLER_CONFIG, ./config.yaml, $ANTLER_HOME/config.yaml, embedded default).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon (the default when no command is given).
    Run,
    /// Ask the running daemon (its socket in the data dir, else gateway.listen) whether it is
    /// ready, and how its model, sandbox and channels are.
    Status,
    /// Chat with the agent on the console (through the daemon when one owns the data dir).
    Chat {
        /// Resume this thread (an id that does not exist yet starts a new thread under it).
        #[arg(long, value_name = "ID", value_parser = parse_thread_id)]
        thread: Option<String>,
    },
    /// Inspect the configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Manage custom agents (through the daemon when one owns the data dir).
    Agents {
        /// Whose agents to work on; required when gateway.api_tokens is set (else: local).
        #[arg(long, global = true, value_name = "ID", value_parser = parse_user_id)]
        user: Option<String>,
        #[command(subcommand)]
        command: antler::agents_cli::AgentsCommand,
    },
    /// Manage skills: list, enable, disable, install archives, remove (through the daemon when
    /// one owns the data dir).
    Skills {
        /// Whose skills to work on; required when gateway.api_tokens is set (else: local).
        #[arg(long, global = true, value_name = "ID", value_parser = parse_user_id)]
        user: Option<String>,
        #[command(subcommand)]
        command: antler::skills_cli::SkillsCommand,
    },
    /// MCP servers of extensions_config.json (through the daemon when one owns the data dir).
    Mcp {
        #[command(subcommand)]
        command: antler::mcp_cli::McpCommand,
    },
    /// Token usage by user, day and model (admins: through the daemon, or on the data dir).
    Usage(antler::usage::cli::UsageArgs),
    /// Inspect or compact the store on the data dir (the daemon must be stopped).
    Store {
        #[command(subcommand)]
        command: antler::store_cli::StoreCommand,
    },
    /// Measure the harness (figures are printed, nothing is asserted).
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// Test support: runs a turn against a slow scripted model and waits to be killed.
    #[command(name = "__crash-child", hide = true)]
    CrashChild { data_dir: PathBuf },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config file: exit 0, or print every problem and exit 64.
    Check { path: Option<PathBuf> },
    /// Print the configuration reference (every key, its type, default and meaning) as
    /// Markdown; docs/configuration.md is this output.
    Reference,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// One turn (1 message → 2 tool calls → answer) with a checkpoint per step; prints p50/p99.
    Turn {
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
    },
    /// Building the lead agent (factory call, no model call) for the default, custom and
    /// bootstrap branches; prints p50/p99.
    Agent {
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
    },
    /// The daemon binary: start-to-ready, idle RSS, and `/runs/wait` throughput with an instant
    /// model and concurrent clients.
    Daemon {
        #[arg(long, default_value_t = 50)]
        clients: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// A new thread per message (else one growing conversation per client).
        #[arg(long)]
        fresh_threads: bool,
        /// The daemon binary to measure (default: this one).
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
    },
    /// Write bytes and daemon CPU per turn on fresh threads and at a history of 10, 100 and
    /// 1,000 messages.
    Store {
        /// Measured turns per row.
        #[arg(long, default_value_t = 20)]
        turns: usize,
        /// Size of each message and answer.
        #[arg(long, default_value_t = 512)]
        message_bytes: usize,
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
    },
    /// RSS over a soak (sampled every 1,000 turns), then bursts of runs in flight against a
    /// slow model: peak RSS, RSS after, p50/p99, errors.
    Soak {
        #[arg(long, default_value_t = 10_000)]
        turns: u64,
        #[arg(long, default_value_t = 200)]
        threads: u64,
        #[arg(long, default_value_t = 8)]
        clients: u64,
        /// Runs in flight at once per burst (0: no burst).
        #[arg(long, default_value_t = 1000)]
        burst: usize,
        #[arg(long, default_value_t = 3)]
        bursts: usize,
        #[arg(long, default_value_t = 300)]
        model_delay_ms: u64,
        /// Seconds after a burst before RSS is read again.
        #[arg(long, default_value_t = 10)]
        settle_seconds: u64,
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
    },
    /// Overhead of a trivial `bash` call (`true`) per sandbox provider, against `sh -c true`.
    Sandbox {
        #[arg(long, default_value_t = 200)]
        iterations: usize,
    },
}

/// With the `mimalloc` feature, the binary allocates with mimalloc (see ARCHITECTURE.md,
/// "Memory", for why and the figures).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(e) => {
            eprintln!("error: cannot read the current directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(Command::Config {
        command: ConfigCommand::Check { path },
    }) = &cli.command
    {
        let path = path.as_deref().or(cli.config.as_deref());
        let code = run_check(path, &ProcessEnv, &cwd, &mut std::io::stdout());
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if let Some(Command::Config {
        command: ConfigCommand::Reference,
    }) = &cli.command
    {
        print!("{}", antler::config::reference::render());
        return ExitCode::SUCCESS;
    }
    if let Some(Command::CrashChild { data_dir }) = &cli.command {
        let data_dir = data_dir.clone();
        return block_on(RuntimeConfig::default().build(), async move {
            antler::harness::testing::crash_child(&data_dir).await?;
            Ok(ExitCode::SUCCESS)
        });
    }
    // Loaded before the runtime exists: the config says how many workers it gets.
    let loaded = match load_config(cli.config.as_deref(), &ProcessEnv, &cwd) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("error: the configuration is invalid:\n{e}");
            return ExitCode::from(EXIT_CONFIG_INVALID as u8);
        }
    };
    let runtime = loaded.config.runtime.build();
    block_on(runtime, dispatch(cli, loaded))
}

/// Runs `work` to completion on `runtime`, printing an error at the edge.
fn block_on(
    runtime: std::io::Result<tokio::runtime::Runtime>,
    work: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> ExitCode {
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match work.await {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}

async fn dispatch(cli: Cli, loaded: LoadedConfig) -> anyhow::Result<ExitCode> {
    let quiet = !matches!(cli.command, None | Some(Command::Run));
    // The chat logs apart from the conversation (a file in the data dir, errors on stderr).
    let chat_log = if matches!(cli.command, Some(Command::Chat { .. })) {
        Some(antler::chat::log::ChatLog::install(
            &loaded.config.log_level,
        ))
    } else {
        init_tracing(&loaded, quiet);
        None
    };
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    match cli.command {
        None | Some(Command::Run) => run_daemon(loaded).await,
        Some(Command::Chat { thread }) => chat(loaded, thread, chat_log.unwrap_or_default()).await,
        Some(Command::Status) => {
            let ready = antler::status::run(&loaded.config, &mut std::io::stdout()).await?;
            Ok(if ready {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Some(Command::Bench {
            command: BenchCommand::Turn { iterations },
        }) => {
            let report = antler::bench::turn(iterations).await?;
            println!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench {
            command: BenchCommand::Agent { iterations },
        }) => {
            let report = antler::bench::factory(iterations).await?;
            println!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench {
            command:
                BenchCommand::Store {
                    turns,
                    message_bytes,
                    binary,
                },
        }) => {
            let binary = bench_binary(binary)?;
            let report = antler::bench_daemon::store::run(&binary, turns, message_bytes).await?;
            println!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench {
            command:
                BenchCommand::Soak {
                    turns,
                    threads,
                    clients,
                    burst,
                    bursts,
                    model_delay_ms,
                    settle_seconds,
                    binary,
                },
        }) => {
            let binary = bench_binary(binary)?;
            let options = antler::bench_daemon::soak::SoakOptions {
                turns,
                threads,
                clients,
                burst_runs: burst,
                bursts,
                model_delay: std::time::Duration::from_millis(model_delay_ms),
                settle: std::time::Duration::from_secs(settle_seconds),
            };
            let report = antler::bench_daemon::soak::run(&binary, options).await?;
            println!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench {
            command:
                BenchCommand::Daemon {
                    clients,
                    seconds,
                    fresh_threads,
                    binary,
                },
        }) => {
            let binary = bench_binary(binary)?;
            let report = antler::bench_daemon::run(
                &binary,
                clients.max(1),
                std::time::Duration::from_secs(seconds.max(1)),
                fresh_threads,
            )
            .await?;
            println!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench {
            command: BenchCommand::Sandbox { iterations },
        }) => {
            let scratch =
                std::env::temp_dir().join(format!("antler-bench-sandbox-{}", std::process::id()));
            let result = antler::sandbox::bench_bash_overhead(&scratch, iterations.max(1)).await;
            let _ = std::fs::remove_dir_all(&scratch);
            result?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Agents { user, command }) => agents(&loaded, user, command).await,
        Some(Command::Skills { user, command }) => skills(&loaded, user, command).await,
        Some(Command::Mcp { command }) => {
            let config_file = match &loaded.origin {
                ConfigOrigin::File(path) => Some(path.clone()),
                ConfigOrigin::Embedded => None,
            };
            antler::mcp_cli::run(
                &loaded.config,
                config_file.as_deref(),
                command,
                &mut std::io::stdout(),
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Usage(args)) => {
            antler::usage::cli::run(&loaded.config, &args, &mut std::io::stdout()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Store { command }) => {
            let config = loaded.config.clone();
            tokio::task::spawn_blocking(move || {
                antler::store_cli::run(&config, &command, &mut std::io::stdout())
            })
            .await
            .context("the store command did not finish")??;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Config { .. }) | Some(Command::CrashChild { .. }) => Ok(ExitCode::SUCCESS),
    }
}

/// The daemon binary a benchmark measures: the given one, else this one.
fn bench_binary(binary: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match binary {
        Some(binary) => Ok(binary),
        None => std::env::current_exe().context("cannot find the antler binary"),
    }
}

/// Logs go to stderr; `quiet` (interactive commands) shows only warnings unless `RUST_LOG` says
/// otherwise, so the console stays readable.
fn init_tracing(loaded: &LoadedConfig, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let default = if quiet {
        "warn".to_string()
    } else {
        loaded.config.log_level.clone()
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    use std::io::IsTerminal;
    // Colours only for a person at a terminal; journald and log files get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = match loaded.config.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    if let Err(e) = result {
        eprintln!("warning: logging is not available: {e}");
    }
}

async fn run_daemon(loaded: LoadedConfig) -> anyhow::Result<ExitCode> {
    let config_path = match &loaded.origin {
        ConfigOrigin::File(path) => Some(path.clone()),
        ConfigOrigin::Embedded => None,
    };
    if let Err(e) = antler::daemon::listen_address(&loaded.config) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(EXIT_CONFIG_INVALID as u8));
    }
    let config = ConfigHandle::fixed(loaded.config);
    let shutdown = antler::daemon::Shutdown::default();
    let reload = Arc::new(tokio::sync::Notify::new());
    spawn_signal_handler(shutdown.clone(), reload.clone())?;
    let options = antler::daemon::DaemonOptions {
        config_path,
        env: Arc::new(ProcessEnv),
        on_ready: Some(Box::new(|addr| {
            // Scripts and tests read the bound address (the port may be 0 in the config).
            println!("antler listening on http://{addr}");
        })),
        reload_signal: Some(reload),
    };
    antler::daemon::run(config, options, shutdown)
        .await
        .context("the daemon stopped with an error")?;
    Ok(ExitCode::SUCCESS)
}

/// First SIGTERM/SIGINT starts the graceful drain; a second one cuts it short. SIGHUP re-reads
/// the config file (`systemctl reload antler`).
fn spawn_signal_handler(
    shutdown: antler::daemon::Shutdown,
    reload: Arc<tokio::sync::Notify>,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut hup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            reload.notify_one();
        }
    });
    tokio::spawn(async move {
        let mut seen = 0;
        loop {
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
            seen += 1;
            if seen == 1 {
                tracing::info!("Signal received: draining (send it again to stop now)");
                shutdown.graceful.cancel();
            } else {
                shutdown.force.cancel();
                break;
            }
        }
    });
    Ok(())
}

/// Ids are checked here so a bad one is a usage error (exit 2) before anything starts.
fn parse_thread_id(value: &str) -> Result<String, String> {
    antler::paths::validate_id("thread", value)
        .map(|()| value.to_string())
        .map_err(|e| e.to_string())
}

fn parse_user_id(value: &str) -> Result<String, String> {
    antler::paths::validate_id("user", value)
        .map(|()| value.to_string())
        .map_err(|e| e.to_string())
}

async fn chat(
    loaded: LoadedConfig,
    thread: Option<String>,
    log: antler::chat::log::ChatLog,
) -> anyhow::Result<ExitCode> {
    use antler::chat::ChatBackend;
    use antler::daemon_client::Located;
    use std::io::IsTerminal;
    let grace = std::time::Duration::from_secs(loaded.config.gateway.shutdown_grace_seconds);
    let backend = match antler::daemon_client::locate(&loaded.config.data_dir()).await? {
        Located::Daemon(daemon) => ChatBackend::Daemon(
            daemon,
            antler::chat::web_address(&loaded.config.gateway.listen),
        ),
        Located::DataDir => {
            match log.to_file(&loaded.config.data_dir()) {
                Ok(path) => eprintln!("antler chat: this process logs to {}", path.display()),
                Err(e) => eprintln!("warning: cannot write the chat's log: {e}"),
            }
            let config_file = match &loaded.origin {
                ConfigOrigin::File(path) => Some(path.clone()),
                ConfigOrigin::Embedded => None,
            };
            let data_dir = loaded.config.data_dir();
            let client = antler::client::Client::new(loaded.config)
                .context("cannot open the data directory")?;
            client
                .harness()
                .mcp()
                .set_path(antler::mcp::extensions_path(
                    &ProcessEnv,
                    config_file.as_deref(),
                    &data_dir,
                ));
            ChatBackend::Embedded(client)
        }
    };
    let options = antler::chat::ChatOptions {
        thread_id: thread,
        interactive: std::io::stdin().is_terminal(),
        run_options: Default::default(),
    };
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut stdout = std::io::stdout();
    let result = antler::chat::run_repl(&backend, stdin, &mut stdout, options).await;
    if let ChatBackend::Embedded(client) = &backend {
        client.shutdown(grace).await?;
    }
    result?;
    Ok(ExitCode::SUCCESS)
}

async fn skills(
    loaded: &LoadedConfig,
    user: Option<String>,
    command: antler::skills_cli::SkillsCommand,
) -> anyhow::Result<ExitCode> {
    use antler::daemon_client::Located;
    let user = match antler::agents_cli::resolve_user(&loaded.config, user.as_deref()) {
        Ok(user) => user,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let daemon = match antler::daemon_client::locate(&loaded.config.data_dir()).await? {
        Located::Daemon(daemon) => Some(daemon),
        Located::DataDir => None,
    };
    let mut stdout = std::io::stdout();
    antler::skills_cli::run(&loaded.config, daemon.as_ref(), &user, command, &mut stdout).await?;
    Ok(ExitCode::SUCCESS)
}

async fn agents(
    loaded: &LoadedConfig,
    user: Option<String>,
    command: antler::agents_cli::AgentsCommand,
) -> anyhow::Result<ExitCode> {
    use antler::daemon_client::Located;
    let result = async {
        let user = antler::agents_cli::resolve_user(&loaded.config, user.as_deref())?;
        let daemon = match antler::daemon_client::locate(&loaded.config.data_dir()).await? {
            Located::Daemon(daemon) => Some(daemon),
            Located::DataDir => None,
        };
        let mut stdout = std::io::stdout();
        antler::agents_cli::run(&loaded.config, daemon.as_ref(), &user, command, &mut stdout).await
    }
    .await;
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.is_usage() => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(2))
        }
        Err(e) => Err(e.into()),
    }
}
