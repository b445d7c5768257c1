//! The `antler` binary: the composition root. Parses the command line, loads and validates the
//! configuration (exit 64 listing every problem), sets up logging and signals, and hands over
//! to the library. No behaviour lives here.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};

use antler::cli::chat::log::ChatLog;
use antler::cli::locate::{Target, TargetError};
use antler::config::{
    ConfigHandle, EXIT_CONFIG_INVALID, LoadedConfig, LogFormat, ProcessEnv, RuntimeConfig,
    load_config, run_check,
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
        command: antler::cli::agents::AgentsCommand,
    },
    /// Manage skills: list, enable, disable, install archives, remove (through the daemon when
    /// one owns the data dir).
    Skills {
        /// Whose skills to work on; required when gateway.api_tokens is set (else: local).
        #[arg(long, global = true, value_name = "ID", value_parser = parse_user_id)]
        user: Option<String>,
        #[command(subcommand)]
        command: antler::cli::skills::SkillsCommand,
    },
    /// MCP servers of extensions_config.json (through the daemon when one owns the data dir).
    Mcp {
        #[command(subcommand)]
        command: antler::cli::mcp::McpCommand,
    },
    /// Token usage by user, day and model (admins: through the daemon, or on the data dir).
    Usage(antler::cli::usage::UsageArgs),
    /// Inspect or compact the store on the data dir (the daemon must be stopped).
    Store {
        #[command(subcommand)]
        command: antler::cli::store::StoreCommand,
    },
    /// Measure the harness (figures are printed, nothing is asserted).
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// Hidden: the children this binary starts itself as (`antler::cli::internal`).
    #[command(flatten)]
    Internal(antler::cli::internal::InternalCommand),
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
    let mut cli = Cli::parse();
    if let Some(Command::Internal(command)) = cli.command {
        return command.run();
    }
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
    if let Some(command) = cli.command.take_if(|command| is_client_command(command)) {
        // These find their daemon first and read the whole config only if there is none.
        let work = client_command(command, cli.config.as_deref(), cwd);
        return block_on(RuntimeConfig::default().build(), work);
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
    block_on(runtime, dispatch(cli, loaded, cwd))
}

/// Commands that talk to a running daemon when there is one (see `antler::cli::locate`).
fn is_client_command(command: &Command) -> bool {
    use Command::*;
    match command {
        Status | Chat { .. } | Agents { .. } | Skills { .. } | Mcp { .. } | Usage(_) => true,
        Run | Config { .. } | Store { .. } | Bench { .. } | Internal(_) => false,
    }
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
                // The chain, but a cause a message already quotes is not said twice.
                let mut text = e.to_string();
                for cause in e.chain().skip(1).map(ToString::to_string) {
                    if !text.contains(&cause) {
                        text = format!("{text}: {cause}");
                    }
                }
                eprintln!("error: {text}");
                ExitCode::FAILURE
            }
        }
    })
}

async fn dispatch(cli: Cli, loaded: LoadedConfig, cwd: PathBuf) -> anyhow::Result<ExitCode> {
    let quiet = !matches!(cli.command, None | Some(Command::Run));
    init_tracing(&loaded, quiet);
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    match cli.command {
        None | Some(Command::Run) => run_daemon(loaded, &cwd).await,
        Some(Command::Bench {
            command: BenchCommand::Turn { iterations },
        }) => {
            let report = antler::cli::bench::turn(iterations).await?;
            println!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench {
            command: BenchCommand::Agent { iterations },
        }) => {
            let report = antler::cli::bench::factory(iterations).await?;
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
            let report =
                antler::cli::bench::daemon::store::run(&binary, turns, message_bytes).await?;
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
            let options = antler::cli::bench::daemon::soak::SoakOptions {
                turns,
                threads,
                clients,
                burst_runs: burst,
                bursts,
                model_delay: std::time::Duration::from_millis(model_delay_ms),
                settle: std::time::Duration::from_secs(settle_seconds),
            };
            let report = antler::cli::bench::daemon::soak::run(&binary, options).await?;
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
            let report = antler::cli::bench::daemon::run(
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
        Some(Command::Store { command }) => {
            let config = loaded.config.clone();
            eprintln!("antler: using the data dir {}", config.data_dir().display());
            tokio::task::spawn_blocking(move || {
                antler::cli::store::run(&config, &command, &mut std::io::stdout())
            })
            .await
            .context("the store command did not finish")??;
            Ok(ExitCode::SUCCESS)
        }
        Some(_) => Ok(ExitCode::SUCCESS), // handled in `main` or by `client_command`
    }
}

/// Runs a command of [`is_client_command`]: locate the daemon, say which (stderr), then work
/// through it, or load the whole config and work on the data dir.
async fn client_command(
    command: Command,
    flag: Option<&std::path::Path>,
    cwd: PathBuf,
) -> anyhow::Result<ExitCode> {
    // The chat logs apart from the conversation (a file in the data dir, errors on stderr).
    let chat_log = matches!(command, Command::Chat { .. }).then(|| ChatLog::install("info"));
    if chat_log.is_none() {
        init_tracing_to(LogFormat::Text, "warn");
    }
    let locator = antler::config::read_locator(flag, &ProcessEnv, &cwd);
    if let Command::Status = command {
        let ready = antler::cli::status::run(&locator, &ProcessEnv, &mut std::io::stdout()).await?;
        return Ok(ExitCode::from(if ready { 0 } else { 1 }));
    }
    let target = match antler::cli::locate::target(&locator, flag, &ProcessEnv, &cwd).await {
        Ok(target) => target,
        Err(e @ TargetError::Config(_)) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_CONFIG_INVALID as u8));
        }
        Err(e) => return Err(e.into()),
    };
    eprintln!("{}", target.description);
    for warning in &target.loaded.warnings {
        tracing::warn!("{warning}");
    }
    let (config, daemon) = (&target.loaded.config, target.daemon.as_ref());
    let mut stdout = std::io::stdout();
    match command {
        Command::Chat { thread } => chat(target, thread, chat_log.unwrap_or_default()).await,
        Command::Agents { user, command } => agents(&target, user, command).await,
        Command::Skills { user, command } => skills(&target, user, command).await,
        Command::Mcp { command } => {
            let file = target.loaded.origin.file();
            antler::cli::mcp::run(config, file, daemon, command, &mut stdout).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Usage(args) => {
            antler::cli::usage::run(config, daemon, &args, &mut stdout).await?;
            Ok(ExitCode::SUCCESS)
        }
        _ => Ok(ExitCode::SUCCESS),
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
    let level = if quiet {
        "warn"
    } else {
        &loaded.config.log_level
    };
    init_tracing_to(loaded.config.log_format, level);
}

fn init_tracing_to(format: LogFormat, default: &str) {
    let filter = antler::mcp::log_filter(default);
    use std::io::IsTerminal;
    // Colours only for a person at a terminal; journald and log files get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    if let Err(e) = result {
        eprintln!("warning: logging is not available: {e}");
    }
}

async fn run_daemon(loaded: LoadedConfig, cwd: &std::path::Path) -> anyhow::Result<ExitCode> {
    let config_path = loaded.origin.file().map(std::path::Path::to_path_buf);
    let config_candidates = match config_path {
        Some(_) => Vec::new(),
        None => antler::config::config_candidates(&ProcessEnv, cwd),
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
        config_candidates,
        env: Arc::new(ProcessEnv),
        on_ready: Some(Box::new(|addr| {
            // Scripts and tests read the bound address (the port may be 0 in the config).
            println!("antler listening on http://{addr}");
        })),
        reload_signal: Some(reload),
        converter: None,
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

async fn chat(target: Target, thread: Option<String>, log: ChatLog) -> anyhow::Result<ExitCode> {
    use antler::cli::chat::ChatBackend;
    use std::io::IsTerminal;
    let grace = std::time::Duration::from_secs(target.loaded.config.gateway.shutdown_grace_seconds);
    let backend =
        ChatBackend::for_target(target, &log).context("cannot open the data directory")?;
    let options = antler::cli::chat::ChatOptions {
        thread_id: thread,
        interactive: std::io::stdin().is_terminal(),
        run_options: Default::default(),
    };
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut stdout = std::io::stdout();
    let result = antler::cli::chat::run_repl(&backend, stdin, &mut stdout, options).await;
    if let ChatBackend::Embedded(client) = &backend {
        client.shutdown(grace).await?;
    }
    result?;
    Ok(ExitCode::SUCCESS)
}

async fn skills(
    target: &Target,
    user: Option<String>,
    command: antler::cli::skills::SkillsCommand,
) -> anyhow::Result<ExitCode> {
    let config = &target.loaded.config;
    let user = match antler::cli::agents::resolve_user(config, user.as_deref()) {
        Ok(user) => user,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut stdout = std::io::stdout();
    antler::cli::skills::run(config, target.daemon.as_ref(), &user, command, &mut stdout).await?;
    Ok(ExitCode::SUCCESS)
}

async fn agents(
    target: &Target,
    user: Option<String>,
    command: antler::cli::agents::AgentsCommand,
) -> anyhow::Result<ExitCode> {
    let config = &target.loaded.config;
    let result = async {
        let user = antler::cli::agents::resolve_user(config, user.as_deref())?;
        let mut stdout = std::io::stdout();
        antler::cli::agents::run(config, target.daemon.as_ref(), &user, command, &mut stdout).await
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
