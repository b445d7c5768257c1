//! `antler chat`: a console REPL, streaming answers as they arrive, on the embedded client or
//! on a running daemon (over its local socket) when one owns the data dir.
//!
//! It reads lines from any `AsyncBufRead` and writes to any `Write`, so tests drive it through
//! pipes exactly as a person would through a terminal. Chat commands (`/plan on`, `/memory`,
//! …) run through the implementation every surface shares ([`crate::commands`]); the
//! conversation's settings live in the session, as the web chat keeps them in the browser.

mod backend;
mod events;
pub mod log;

use std::collections::HashSet;
use std::io::Write;

use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::agent_api::RunOptions;
use crate::cli::chat::log::ChatLog;
use crate::cli::daemon_client::DaemonClientError;
use crate::cli::locate::Target;
use crate::client::ClientError;
use crate::commands::{Command, CommandAnswer, Conversation, parse_command};
use crate::paths::PathError;
use anyhow::Context;
use std::process::ExitCode;

pub use backend::{ChatBackend, ThreadOpened};
pub use events::ChatEvent;

/// What `/help` adds to the commands every surface has.
const CONSOLE_HELP: &str = "/quit — Leave the chat (Ctrl-D works too)";

/// Options of one REPL session.
#[derive(Clone, Debug, Default)]
pub struct ChatOptions {
    /// Resume this thread instead of starting a new one (one that does not exist yet is
    /// started under this id, with a notice).
    pub thread_id: Option<String>,
    /// Print prompts (only when a person is typing).
    pub interactive: bool,
    /// What every turn runs with; `/model`, `/agent` and `/plan` change it for the session.
    pub run_options: RunOptions,
}

#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error(transparent)]
    InvalidThreadId(#[from] PathError),
    #[error(
        "thread {thread_id} belongs to another user; leave out --thread to start a new conversation"
    )]
    ThreadTaken { thread_id: String },
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Daemon(#[from] DaemonClientError),
    #[error(transparent)]
    Command(#[from] crate::commands::CommandError),
    #[error("cannot use the console: {0}")]
    Io(#[from] std::io::Error),
}

/// The daemon's web address for links to files, from `gateway.listen`: a wildcard address
/// is reached on loopback; `None` for port 0 (the port is only known to the daemon).
pub fn web_address(listen: &str) -> Option<String> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    let listen = listen.trim();
    match listen.parse::<SocketAddr>() {
        Ok(addr) if addr.port() == 0 => None,
        Ok(mut addr) => {
            if addr.ip().is_unspecified() {
                addr.set_ip(match addr.ip() {
                    IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
                });
            }
            Some(format!("http://{addr}"))
        }
        // A host name (`localhost:8787`).
        Err(_) => match listen.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {
                Some(format!("http://{listen}"))
            }
            _ => None,
        },
    }
}

/// One REPL session: the conversation (its thread and settings) and the files already shown.
struct Session {
    thread_id: String,
    conversation: Conversation,
    base_options: RunOptions,
    shown_files: HashSet<String>,
}

impl Session {
    fn new(thread_id: String, base_options: RunOptions) -> Self {
        let conversation = Conversation {
            thread_id: Some(thread_id.clone()),
            model: base_options.model_name.clone(),
            agent: base_options.agent_name.clone(),
            plan_mode: base_options.is_plan_mode,
            bootstrap: None,
        };
        Self {
            thread_id,
            conversation,
            base_options,
            shown_files: HashSet::new(),
        }
    }

    /// The options of the next turn: the session's, with the conversation's settings (a
    /// bootstrap in progress runs for the agent it sets up).
    fn run_options(&self) -> RunOptions {
        let mut options = self.base_options.clone();
        options.model_name = self.conversation.model.clone();
        options.agent_name = self.conversation.run_agent();
        options.is_plan_mode = self.conversation.plan_mode;
        options.is_bootstrap = self.conversation.bootstrap.is_some();
        options
    }
}

/// Runs the REPL until end of input or `/quit`. Errors of a turn are printed, not returned:
/// one failed turn must not end the session.
pub async fn run_repl<R, W>(
    backend: &ChatBackend,
    input: R,
    out: &mut W,
    options: ChatOptions,
) -> Result<(), ChatError>
where
    R: AsyncBufRead + Unpin,
    W: Write,
{
    let thread_id = match options.thread_id {
        Some(id) => {
            if backend.open_thread(&id).await? == ThreadOpened::Started {
                writeln!(
                    out,
                    "No conversation has the id {id} yet: starting a new one under that id."
                )?;
            }
            id
        }
        None => backend.new_thread().await?,
    };
    let mut session = Session::new(thread_id, options.run_options);
    // Files a resumed conversation presented before are not announced again.
    session.shown_files = backend
        .files(&session.thread_id)
        .await
        .unwrap_or_default()
        .into_iter()
        .collect();
    if let ChatBackend::Daemon(daemon, _) = backend {
        writeln!(
            out,
            "Talking to the running daemon through {}.",
            daemon.socket().display()
        )?;
    }
    let thread_id = &session.thread_id;
    writeln!(
        out,
        "antler chat: thread {thread_id} (resume with --thread {thread_id}); /help for commands"
    )?;
    let mut lines = input.lines();
    loop {
        if options.interactive {
            write!(out, "> ")?;
        }
        out.flush()?;
        let Some(line) = lines.next_line().await? else {
            break;
        };
        let line = line.trim();
        match line {
            "" => continue,
            "/quit" | "/exit" => break,
            text if text.starts_with('/') => command(backend, &mut session, text, out).await?,
            text => turn(backend, &mut session, text, out).await?,
        }
    }
    Ok(())
}

/// A line starting with `/`: a chat command, else (a skill's `/name task`) a message.
async fn command<W: Write>(
    backend: &ChatBackend,
    session: &mut Session,
    text: &str,
    out: &mut W,
) -> std::io::Result<()> {
    let (answer, resumed) = match backend.command(&session.conversation, text).await {
        Ok(Some(reply)) => (reply.answer, reply.resumed),
        Ok(None) => return turn(backend, session, text, out).await,
        Err(e) => return writeln!(out, "error: {e}"),
    };
    let CommandAnswer {
        reply,
        conversation,
        turn: next,
        ..
    } = answer;
    if !reply.is_empty() {
        writeln!(out, "{reply}")?;
    }
    if parse_command(text, None) == Some(Command::Help) {
        writeln!(out, "{CONSOLE_HELP}")?;
    }
    if let Some(thread_id) = conversation.thread_id.clone()
        && thread_id != session.thread_id
    {
        writeln!(
            out,
            "Now in thread {thread_id} (resume with --thread {thread_id})."
        )?;
        session.thread_id = thread_id;
        session.shown_files.clear();
    }
    session.conversation = conversation;
    // `/approve`'s run: the parked call settled, the agent goes on.
    if let Some(events) = resumed {
        show_run(backend, session, events, out).await?;
    }
    // `/bootstrap`'s turn: the conversation it returned carries the bootstrap.
    if let Some(next) = next {
        turn(backend, session, &next.text, out).await?;
    }
    Ok(())
}

async fn turn<W: Write>(
    backend: &ChatBackend,
    session: &mut Session,
    text: &str,
    out: &mut W,
) -> std::io::Result<()> {
    let thread_id = session.thread_id.clone();
    let options = session.run_options();
    let events = match backend.turn(&thread_id, text, &options).await {
        Ok(events) => events,
        Err(e) => {
            writeln!(out, "error: {e}")?;
            return Ok(());
        }
    };
    show_run(backend, session, events, out).await
}

/// Shows a run's events as they come, then what it presented.
async fn show_run<W: Write>(
    backend: &ChatBackend,
    session: &mut Session,
    mut events: BoxStream<'static, ChatEvent>,
    out: &mut W,
) -> std::io::Result<()> {
    let thread_id = session.thread_id.clone();
    let mut wrote_text = false;
    let mut finished = false;
    let mut presented = false;
    while let Some(event) = events.next().await {
        if wrote_text && !matches!(event, ChatEvent::Text(_)) {
            writeln!(out)?;
            wrote_text = false;
        }
        match event {
            ChatEvent::Text(delta) => {
                write!(out, "{delta}")?;
                out.flush()?;
                wrote_text = true;
            }
            ChatEvent::ToolStarted(name) => writeln!(out, "[tool] {name}")?,
            ChatEvent::ToolFinished(name) => presented |= name == "present_files",
            ChatEvent::Question(question) => writeln!(out, "{question}")?,
            ChatEvent::Approval(prompt) => writeln!(out, "{prompt}")?,
            ChatEvent::Error(message) => writeln!(out, "error: {message}")?,
            ChatEvent::Finished => {
                finished = true;
                break;
            }
        }
    }
    if wrote_text {
        writeln!(out)?;
    }
    if !finished {
        writeln!(
            out,
            "error: the answer stopped before the run finished; resume with --thread {thread_id} to see where it got"
        )?;
    }
    if presented {
        show_files(backend, session, out).await?;
    }
    if session.conversation.bootstrap.is_some() {
        settle_bootstrap(backend, session, out).await?;
    }
    Ok(())
}

/// Once the bootstrap created its agent, the conversation goes on with it.
async fn settle_bootstrap<W: Write>(
    backend: &ChatBackend,
    session: &mut Session,
    out: &mut W,
) -> std::io::Result<()> {
    let created = match backend.created_agent(&session.thread_id).await {
        Ok(created) => created,
        Err(e) => return writeln!(out, "error: cannot tell whether the agent was created: {e}"),
    };
    if session.conversation.settle_bootstrap(created.as_deref()) {
        let agent = session
            .conversation
            .agent
            .as_deref()
            .unwrap_or("the default agent");
        writeln!(
            out,
            "[agent] {agent} is set up; this conversation now talks to it."
        )?;
    }
    Ok(())
}

/// Says where to get each file the thread presented since the last time.
async fn show_files<W: Write>(
    backend: &ChatBackend,
    session: &mut Session,
    out: &mut W,
) -> std::io::Result<()> {
    let files = match backend.files(&session.thread_id).await {
        Ok(files) => files,
        Err(e) => return writeln!(out, "error: cannot list the presented files: {e}"),
    };
    for file in files {
        if session.shown_files.insert(file.clone()) {
            let location = backend.file_location(&session.thread_id, &file);
            writeln!(out, "[file] {file}: {location}")?;
        }
    }
    Ok(())
}

/// `antler chat`: the console chat against `target` until end of input; an embedded harness is
/// shut down within the configured grace period.
pub async fn execute(
    target: Target,
    thread: Option<String>,
    log: ChatLog,
) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let grace = std::time::Duration::from_secs(target.loaded.config.gateway.shutdown_grace_seconds);
    let backend =
        ChatBackend::for_target(target, &log).context("cannot open the data directory")?;
    let options = ChatOptions {
        thread_id: thread,
        interactive: std::io::stdin().is_terminal(),
        run_options: Default::default(),
    };
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut stdout = std::io::stdout();
    let result = run_repl(&backend, stdin, &mut stdout, options).await;
    if let ChatBackend::Embedded(client) = &backend {
        client.shutdown(grace).await?;
    }
    result?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Client;

    #[test]
    fn the_web_address_comes_from_the_listen_address() {
        let cases = [
            ("127.0.0.1:8787", Some("http://127.0.0.1:8787")),
            ("0.0.0.0:8787", Some("http://127.0.0.1:8787")),
            ("[::]:8787", Some("http://[::1]:8787")),
            ("localhost:9000", Some("http://localhost:9000")),
            ("127.0.0.1:0", None),
            ("nonsense", None),
        ];
        for (listen, expected) in cases {
            assert_eq!(web_address(listen).as_deref(), expected, "{listen}");
        }
    }

    #[tokio::test]
    async fn a_malformed_or_foreign_thread_id_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let config = crate::config::AppConfig {
            data_dir: Some(tmp.path().to_path_buf()),
            ..Default::default()
        };
        let client = Client::new(config).unwrap();
        let backend = ChatBackend::Embedded(client.clone());
        let err = backend.open_thread("../../etc").await.unwrap_err();
        assert!(matches!(err, ChatError::InvalidThreadId(_)), "{err}");
        assert_eq!(
            backend.open_thread("fresh-1").await.unwrap(),
            ThreadOpened::Started
        );
        assert_eq!(
            backend.open_thread("fresh-1").await.unwrap(),
            ThreadOpened::Resumed
        );
        client
            .harness()
            .create_thread("alice", Some("hers".into()), Default::default())
            .unwrap();
        let err = backend.open_thread("hers").await.unwrap_err();
        assert!(matches!(err, ChatError::ThreadTaken { .. }), "{err}");
        client
            .shutdown(std::time::Duration::from_secs(1))
            .await
            .unwrap();
    }
}
