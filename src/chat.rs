//! `antler chat`: a console REPL on the embedded client, streaming answers as they arrive.
//!
//! It reads lines from any `AsyncBufRead` and writes to any `Write`, so tests drive it through
//! pipes exactly as a person would through a terminal.

use std::io::Write;

use futures::StreamExt;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::agent_api::{RunEvent, RunOptions};
use crate::client::Client;

const HELP: &str = "Commands:\n  /new   start a new conversation\n  /help  show this help\n  /quit  leave (Ctrl-D works too)\nAnything else is sent to the agent.";

/// Options of one REPL session.
#[derive(Clone, Debug, Default)]
pub struct ChatOptions {
    /// Resume this thread instead of starting a new one.
    pub thread_id: Option<String>,
    /// Print prompts (only when a person is typing).
    pub interactive: bool,
    pub run_options: RunOptions,
}

/// Runs the REPL until end of input or `/quit`. Errors of a turn are printed, not returned:
/// one failed turn must not end the session.
pub async fn run_repl<R, W>(
    client: &Client,
    input: R,
    out: &mut W,
    options: ChatOptions,
) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: Write,
{
    let mut thread_id = match options.thread_id {
        Some(id) => id,
        None => client.new_thread().map_err(std::io::Error::other)?,
    };
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
            "/help" => writeln!(out, "{HELP}")?,
            "/new" => {
                thread_id = client.new_thread().map_err(std::io::Error::other)?;
                writeln!(out, "New conversation started: thread {thread_id}")?;
            }
            text => turn(client, &thread_id, text, &options.run_options, out).await?,
        }
    }
    Ok(())
}

async fn turn<W: Write>(
    client: &Client,
    thread_id: &str,
    text: &str,
    run_options: &RunOptions,
    out: &mut W,
) -> std::io::Result<()> {
    let mut events = match client.stream(thread_id, text, run_options.clone()).await {
        Ok(events) => events,
        Err(e) => {
            writeln!(out, "error: {e}")?;
            return Ok(());
        }
    };
    let mut wrote_text = false;
    while let Some(event) = events.next().await {
        match event {
            RunEvent::TextDelta { delta, .. } => {
                write!(out, "{delta}")?;
                out.flush()?;
                wrote_text = true;
            }
            RunEvent::ToolStarted { call } => {
                if wrote_text {
                    writeln!(out)?;
                    wrote_text = false;
                }
                writeln!(out, "[tool] {}", call.name)?;
            }
            RunEvent::Message { message } => {
                // A clarification question ends the run with a tool message, not a text delta.
                if let Some(tool) = message.as_tool()
                    && tool.name == "ask_clarification"
                {
                    writeln!(out, "{}", tool.content)?;
                }
            }
            RunEvent::Error { message, .. } => {
                if wrote_text {
                    writeln!(out)?;
                    wrote_text = false;
                }
                writeln!(out, "error: {message}")?;
            }
            RunEvent::Finished { .. } => break,
            _ => {}
        }
    }
    if wrote_text {
        writeln!(out)?;
    }
    Ok(())
}
