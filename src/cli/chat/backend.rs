//! Where `antler chat` runs: in this process (the embedded client), or in the daemon that owns
//! the data dir (its HTTP API over the local socket). Both answer with the same types, so the
//! REPL does not care which.

use std::path::{Path, PathBuf};

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::Method;
use serde_json::{Value, json};

use crate::agent_api::RunOptions;
use crate::cli::chat::ChatError;
use crate::cli::chat::events::{ChatEvent, from_run_event, from_sse};
use crate::cli::chat::log::ChatLog;
use crate::cli::daemon_client::{DaemonClient, DaemonClientError, Streamed, segment};
use crate::cli::locate::Target;
use crate::client::{Client, ClientError, LOCAL_USER_ID};
use crate::commands::{CommandAnswer, Conversation, run_for_session};
use crate::config::ProcessEnv;
use crate::mcp::extensions_path;
use crate::paths::{ThreadPaths, VIRTUAL_ROOT, validate_id};

/// Where the conversation runs: in this process, or in the daemon that owns the data dir.
#[derive(Clone)]
pub enum ChatBackend {
    Embedded(Client),
    /// With the daemon's web address when known (`http://127.0.0.1:8787`), for file links.
    Daemon(DaemonClient, Option<String>),
}

/// A command's answer, and the run it resumed (`/approve`, `/deny`) to show like a turn.
pub struct CommandReply {
    pub answer: CommandAnswer,
    pub resumed: Option<BoxStream<'static, ChatEvent>>,
}

fn command_answer(value: Value) -> Result<CommandAnswer, ChatError> {
    serde_json::from_value(value).map_err(|e| DaemonClientError::Protocol(e.to_string()).into())
}

/// Whether `--thread` named a thread that exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadOpened {
    Resumed,
    Started,
}

impl ChatBackend {
    /// The backend `antler chat` uses for `target`: its daemon, else a client on the data dir
    /// (logging to `{data_dir}/logs/chat.log` through `log`, with the MCP servers the daemon
    /// would start). A client must be shut down after the chat.
    pub fn for_target(target: Target, log: &ChatLog) -> Result<ChatBackend, ClientError> {
        let loaded = target.loaded;
        if let Some(daemon) = target.daemon {
            return Ok(ChatBackend::Daemon(
                daemon,
                crate::cli::chat::web_address(&loaded.config.gateway.listen),
            ));
        }
        let data_dir = loaded.config.data_dir();
        match log.to_file(&data_dir) {
            Ok(path) => eprintln!("antler chat: this process logs to {}", path.display()),
            Err(e) => eprintln!("warning: cannot write the chat's log: {e}"),
        }
        let mcp_path = extensions_path(&ProcessEnv, loaded.origin.file(), &data_dir);
        let client = Client::new(loaded.config)?;
        client.harness().mcp().set_path(mcp_path);
        Ok(ChatBackend::Embedded(client))
    }

    /// Creates an empty thread and returns its id.
    pub async fn new_thread(&self) -> Result<String, ChatError> {
        match self {
            ChatBackend::Embedded(client) => Ok(client.new_thread()?),
            ChatBackend::Daemon(daemon, _) => {
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
            ChatBackend::Daemon(daemon, _) => {
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
            ChatBackend::Daemon(daemon, _) => {
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

    /// Runs `text` as a chat command on `conversation` (the implementation every surface
    /// shares); `Ok(None)` when it is not one, so it goes to the agent as a message. A command
    /// that decided an approval comes with the run it resumed.
    pub async fn command(
        &self,
        conversation: &Conversation,
        text: &str,
    ) -> Result<Option<CommandReply>, ChatError> {
        match self {
            ChatBackend::Embedded(client) => {
                let harness = client.harness();
                let config = harness.config().current();
                let Some(answer) = run_for_session(
                    harness,
                    &config,
                    client.user_id(),
                    None,
                    conversation.clone(),
                    text,
                )
                .await?
                else {
                    return Ok(None);
                };
                let resumed = match answer.approval.as_deref() {
                    Some(request) if answer.resume => Some(
                        client
                            .resume(request)
                            .await?
                            .filter_map(|e| async move { from_run_event(e) })
                            .boxed(),
                    ),
                    _ => None,
                };
                Ok(Some(CommandReply { answer, resumed }))
            }
            ChatBackend::Daemon(daemon, _) => {
                let body = json!({"command": text, "conversation": conversation});
                match daemon.post_streaming("/api/commands", &body).await {
                    Ok(Streamed::Json(answer)) => Ok(Some(CommandReply {
                        answer: command_answer(answer)?,
                        resumed: None,
                    })),
                    Ok(Streamed::Events(mut frames)) => {
                        // The first frame is the command's answer; the resumed run follows.
                        let first = match frames.next().await {
                            Some(Ok(frame)) => frame,
                            Some(Err(e)) => return Err(e.into()),
                            None => {
                                return Err(DaemonClientError::Protocol(
                                    "the command's event stream was empty".into(),
                                )
                                .into());
                            }
                        };
                        let answer = command_answer(first.data["data"].clone())?;
                        let resumed = frames
                            .filter_map(|frame| async move {
                                match frame {
                                    Ok(frame) => from_sse(&frame),
                                    Err(e) => Some(ChatEvent::Error(e.to_string())),
                                }
                            })
                            .boxed();
                        Ok(Some(CommandReply {
                            answer,
                            resumed: Some(resumed),
                        }))
                    }
                    Err(DaemonClientError::Api { code, .. }) if code == "not_a_command" => Ok(None),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// The agent the thread's bootstrap created (`setup_agent`'s `created_agent_name`).
    pub async fn created_agent(&self, thread_id: &str) -> Result<Option<String>, ChatError> {
        let key = crate::custom_agents::tools::CREATED_AGENT_NAME_KEY;
        match self {
            ChatBackend::Embedded(client) => Ok(client
                .state(thread_id)
                .await?
                .and_then(|state| state.extra.get(key)?.as_str().map(str::to_string))),
            ChatBackend::Daemon(daemon, _) => {
                let path = format!("/api/threads/{}/state", segment(thread_id));
                let state = daemon.send(Method::GET, &path, None).await?;
                Ok(state["values"]["extra"][key].as_str().map(str::to_string))
            }
        }
    }

    /// The files the thread presented so far (virtual paths, in order).
    pub async fn files(&self, thread_id: &str) -> Result<Vec<String>, ChatError> {
        match self {
            ChatBackend::Embedded(client) => Ok(client
                .state(thread_id)
                .await?
                .map(|state| state.artifacts)
                .unwrap_or_default()),
            ChatBackend::Daemon(daemon, _) => {
                let path = format!("/api/threads/{}/state", segment(thread_id));
                let state = daemon.send(Method::GET, &path, None).await?;
                Ok(state["values"]["artifacts"]
                    .as_array()
                    .map(|files| {
                        files
                            .iter()
                            .filter_map(|file| file.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default())
            }
        }
    }

    /// Where the person gets a presented file: its URL on the daemon, or its path on this
    /// machine (the console is the local operator's; the model never sees this).
    pub fn file_location(&self, thread_id: &str, virtual_path: &str) -> String {
        let host_path = |data_dir: &Path| -> String {
            let relative = virtual_path
                .strip_prefix(VIRTUAL_ROOT)
                .unwrap_or(virtual_path)
                .trim_start_matches('/');
            ThreadPaths::new(data_dir, LOCAL_USER_ID, thread_id)
                .map(|paths| paths.user_data().join(relative).display().to_string())
                .unwrap_or_else(|_| virtual_path.to_string())
        };
        match self {
            ChatBackend::Embedded(client) => {
                host_path(&client.harness().config().current().data_dir())
            }
            ChatBackend::Daemon(_, Some(web)) => format!(
                "{web}{}",
                crate::http::artifact_url(thread_id, virtual_path)
            ),
            ChatBackend::Daemon(daemon, None) => {
                let data_dir: PathBuf = daemon
                    .socket()
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default();
                host_path(&data_dir)
            }
        }
    }
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
