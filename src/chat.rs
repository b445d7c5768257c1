//! `antler chat`: a console REPL, streaming answers as they arrive, on the embedded client or
//! on a running daemon (over its local socket) when one owns the data dir.
//!
//! It reads lines from any `AsyncBufRead` and writes to any `Write`, so tests drive it through
//! pipes exactly as a person would through a terminal.

use std::io::Write;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::agent_api::{RunEvent, RunOptions};
use crate::client::{Client, ClientError};
use crate::daemon_client::{DaemonClient, DaemonClientError, SseFrame, segment};
use crate::messages::Message;
use crate::paths::{PathError, validate_id};

const HELP: &str = "Commands:\n  /new   start a new conversation\n  /help  show this help\n  /quit  leave (Ctrl-D works too)\nAnything else is sent to the agent.";

/// Options of one REPL session.
#[derive(Clone, Debug, Default)]
pub struct ChatOptions {
    /// Resume this thread instead of starting a new one (one that does not exist yet is
    /// started under this id, with a notice).
    pub thread_id: Option<String>,
    /// Print prompts (only when a person is typing).
    pub interactive: bool,
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
    #[error("cannot use the console: {0}")]
    Io(#[from] std::io::Error),
}

/// Where the conversation runs: in this process, or in the daemon that owns the data dir.
#[derive(Clone)]
pub enum ChatBackend {
    Embedded(Client),
    Daemon(DaemonClient),
}

/// What the console shows of a run, whichever backend produced it.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatEvent {
    Text(String),
    ToolStarted(String),
    /// A clarification question: the run ends waiting for the person's answer.
    Question(String),
    Error(String),
    Finished,
}

/// Whether `--thread` named a thread that exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadOpened {
    Resumed,
    Started,
}

impl ChatBackend {
    /// Creates an empty thread and returns its id.
    pub async fn new_thread(&self) -> Result<String, ChatError> {
        match self {
            ChatBackend::Embedded(client) => Ok(client.new_thread()?),
            ChatBackend::Daemon(daemon) => {
                let record = daemon
                    .send(Method::POST, "/api/threads", Some(&json!({})))
                    .await?;
                thread_id_of(&record)
            }
        }
    }

    /// Resumes `thread_id`, or starts a thread under that id when there is none. A malformed
    /// id or another user's thread is refused.
    pub async fn open_thread(&self, thread_id: &str) -> Result<ThreadOpened, ChatError> {
        validate_id("thread", thread_id)?;
        let taken = || ChatError::ThreadTaken {
            thread_id: thread_id.to_string(),
        };
        match self {
            ChatBackend::Embedded(client) => {
                let harness = client.harness();
                match harness
                    .threads()
                    .get(thread_id)
                    .map_err(ClientError::from)?
                {
                    Some(record) if record.user_id == client.user_id() => Ok(ThreadOpened::Resumed),
                    Some(_) => Err(taken()),
                    None => {
                        harness
                            .create_thread(
                                client.user_id(),
                                Some(thread_id.to_string()),
                                Default::default(),
                            )
                            .map_err(ClientError::from)?;
                        Ok(ThreadOpened::Started)
                    }
                }
            }
            ChatBackend::Daemon(daemon) => {
                let path = format!("/api/threads/{}", segment(thread_id));
                match daemon.send(Method::GET, &path, None).await {
                    Ok(_) => return Ok(ThreadOpened::Resumed),
                    Err(DaemonClientError::Api { status: 404, .. }) => {}
                    Err(e) => return Err(e.into()),
                }
                let body = json!({"thread_id": thread_id});
                match daemon.send(Method::POST, "/api/threads", Some(&body)).await {
                    Ok(_) => Ok(ThreadOpened::Started),
                    Err(DaemonClientError::Api { status: 409, .. }) => Err(taken()),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Sends `text` on `thread_id` and streams what the console shows, ending with
    /// [`ChatEvent::Finished`]. Dropping the stream of the embedded backend cancels the run.
    pub async fn turn(
        &self,
        thread_id: &str,
        text: &str,
        options: &RunOptions,
    ) -> Result<BoxStream<'static, ChatEvent>, ChatError> {
        match self {
            ChatBackend::Embedded(client) => {
                let events = client.stream(thread_id, text, options.clone()).await?;
                Ok(events
                    .filter_map(|e| async move { from_run_event(e) })
                    .boxed())
            }
            ChatBackend::Daemon(daemon) => {
                let context = serde_json::to_value(options).unwrap_or_else(|_| json!({}));
                let body = json!({
                    "input": {"messages": [{"role": "user", "content": text}]},
                    "context": context,
                });
                let frames = daemon.run_stream(thread_id, &body).await?;
                Ok(frames
                    .filter_map(|frame| async move {
                        match frame {
                            Ok(frame) => from_sse(&frame),
                            Err(e) => Some(ChatEvent::Error(e.to_string())),
                        }
                    })
                    .boxed())
            }
        }
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
    let mut thread_id = match options.thread_id {
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
    if let ChatBackend::Daemon(daemon) = backend {
        writeln!(
            out,
            "Talking to the running daemon through {}.",
            daemon.socket().display()
        )?;
    }
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
                thread_id = backend.new_thread().await?;
                writeln!(out, "New conversation started: thread {thread_id}")?;
            }
            text => turn(backend, &thread_id, text, &options.run_options, out).await?,
        }
    }
    Ok(())
}

async fn turn<W: Write>(
    backend: &ChatBackend,
    thread_id: &str,
    text: &str,
    run_options: &RunOptions,
    out: &mut W,
) -> std::io::Result<()> {
    let mut events = match backend.turn(thread_id, text, run_options).await {
        Ok(events) => events,
        Err(e) => {
            writeln!(out, "error: {e}")?;
            return Ok(());
        }
    };
    let mut wrote_text = false;
    let mut finished = false;
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
            ChatEvent::Question(question) => writeln!(out, "{question}")?,
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
    Ok(())
}

fn thread_id_of(record: &Value) -> Result<String, ChatError> {
    record["thread_id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| {
            ChatError::Daemon(DaemonClientError::Protocol(format!(
                "a created thread without thread_id: {record}"
            )))
        })
}

/// The console's view of an in-process run event.
fn from_run_event(event: RunEvent) -> Option<ChatEvent> {
    match event {
        RunEvent::TextDelta { delta, .. } => Some(ChatEvent::Text(delta)),
        RunEvent::ToolStarted { call } => Some(ChatEvent::ToolStarted(call.name)),
        RunEvent::Message { message } => clarification(&message),
        RunEvent::Error { message, .. } => Some(ChatEvent::Error(message)),
        RunEvent::Finished { .. } => Some(ChatEvent::Finished),
        _ => None,
    }
}

/// The console's view of one `/runs/stream` frame (the same events, as the HTTP API sends
/// them: see `http::runs`).
fn from_sse(frame: &SseFrame) -> Option<ChatEvent> {
    let data = &frame.data;
    match frame.event.as_str() {
        // `[chunk, metadata]`; reasoning deltas have empty content and are not shown.
        "messages" => data[0]["content"]
            .as_str()
            .filter(|delta| !delta.is_empty())
            .map(|delta| ChatEvent::Text(delta.to_string())),
        "custom" => match data["type"].as_str() {
            Some("tool_started") => data["call"]["name"]
                .as_str()
                .map(|name| ChatEvent::ToolStarted(name.to_string())),
            Some("message") => serde_json::from_value::<Message>(data["message"].clone())
                .ok()
                .and_then(|message| clarification(&message)),
            _ => None,
        },
        "error" => Some(ChatEvent::Error(
            data["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| data.to_string()),
        )),
        "end" => Some(ChatEvent::Finished),
        _ => None,
    }
}

/// A clarification question ends the run with a tool message, not a text delta.
fn clarification(message: &Message) -> Option<ChatEvent> {
    message
        .as_tool()
        .filter(|tool| tool.name == "ask_clarification")
        .map(|tool| ChatEvent::Question(tool.content.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(event: &str, data: Value) -> SseFrame {
        SseFrame {
            event: event.into(),
            data,
        }
    }

    #[test]
    fn sse_frames_become_what_the_console_shows() {
        let question = json!({"type": "tool", "id": "t1", "tool_call_id": "c1",
            "name": "ask_clarification", "content": "Which city?"});
        let cases = [
            (
                frame("messages", json!([{"content": "Hi"}, {}])),
                Some(ChatEvent::Text("Hi".into())),
            ),
            (
                frame(
                    "messages",
                    json!([{"content": "", "additional_kwargs": {"reasoning_content": "hm"}}, {}]),
                ),
                None,
            ),
            (
                frame(
                    "custom",
                    json!({"type": "tool_started", "call": {"name": "bash"}}),
                ),
                Some(ChatEvent::ToolStarted("bash".into())),
            ),
            (
                frame("custom", json!({"type": "message", "message": question})),
                Some(ChatEvent::Question("Which city?".into())),
            ),
            (
                frame("error", json!({"code": "model", "message": "down"})),
                Some(ChatEvent::Error("down".into())),
            ),
            (
                frame("end", json!({"stop_reason": "completed"})),
                Some(ChatEvent::Finished),
            ),
            (frame("metadata", json!({"run_id": "r"})), None),
            (frame("values", json!({})), None),
        ];
        for (input, expected) in cases {
            assert_eq!(from_sse(&input), expected, "{input:?}");
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
