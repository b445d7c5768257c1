//! The Docker Engine API calls the provider needs, through bollard, with errors turned into
//! [`SandboxError`]s that say what to do.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as BollardError;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, StopContainerOptionsBuilder,
};
use futures::StreamExt;

use crate::sandbox::SandboxError;
use crate::sandbox::docker::naming::MANAGED_LABEL;
use crate::sandbox::exec::OUTPUT_CAPTURE_BYTES;

/// Seconds bollard waits for any single engine request (exec output is bounded separately).
const REQUEST_TIMEOUT_SECS: u64 = 120;
/// Seconds a container gets to stop before the engine kills it.
const STOP_GRACE_SECS: i32 = 5;

/// A container this provider created, as the engine lists it.
#[derive(Clone, Debug)]
pub(crate) struct Listed {
    pub(crate) name: String,
    pub(crate) image: String,
    pub(crate) labels: HashMap<String, String>,
}

/// What an exec left behind.
pub(crate) struct ExecOutput {
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
    pub(crate) exit_code: Option<i64>,
    /// The output stream did not end in time.
    pub(crate) timed_out: bool,
}

/// A connection to one engine.
#[derive(Clone)]
pub(crate) struct Engine {
    docker: Docker,
    /// Where the engine is, for error messages.
    endpoint: String,
}

impl Engine {
    /// `host` unset = the local unix socket; `http://` and `tcp://` = plain HTTP.
    pub(crate) fn connect(host: Option<&str>) -> Result<Self, SandboxError> {
        let version = bollard::API_DEFAULT_VERSION;
        let (docker, endpoint) = match host {
            None => (
                Docker::connect_with_unix_defaults(),
                "the local Docker socket".to_string(),
            ),
            Some(h) if h.starts_with("unix://") => (
                Docker::connect_with_unix(h, REQUEST_TIMEOUT_SECS, version),
                h.to_string(),
            ),
            Some(h) if h.starts_with("http://") || h.starts_with("tcp://") => (
                Docker::connect_with_http(h, REQUEST_TIMEOUT_SECS, version),
                h.to_string(),
            ),
            Some(h) => {
                return Err(SandboxError::Unavailable(format!(
                    "sandbox.docker.host {h:?} is not supported; use unix:///path/to/docker.sock \
                     or http://HOST:PORT"
                )));
            }
        };
        let docker = docker.map_err(|e| {
            SandboxError::Unavailable(format!("cannot connect to Docker at {endpoint}: {e}"))
        })?;
        Ok(Self { docker, endpoint })
    }

    /// Checks the engine answers and agrees on an API version no newer than its own.
    pub(crate) async fn ping(self) -> Result<Self, SandboxError> {
        let unreachable = |e: BollardError| {
            SandboxError::Unavailable(format!(
                "sandbox.provider is docker but the Docker engine at {} did not answer ({e}); \
                 start Docker, set sandbox.docker.host, or choose another sandbox.provider",
                self.endpoint
            ))
        };
        self.docker.ping().await.map_err(unreachable)?;
        let docker = self
            .docker
            .clone()
            .negotiate_version()
            .await
            .map_err(unreachable)?;
        Ok(Self {
            docker,
            endpoint: self.endpoint,
        })
    }

    /// Every container carrying the managed label, running or not.
    pub(crate) async fn list_managed(&self) -> Result<Vec<Listed>, SandboxError> {
        let filters = HashMap::from([("label", vec![format!("{MANAGED_LABEL}=true")])]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let listed = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| self.failed("list containers", &e))?;
        Ok(listed
            .into_iter()
            .filter_map(|c| {
                Some(Listed {
                    name: c.names?.into_iter().next()?,
                    image: c.image.unwrap_or_default(),
                    labels: c.labels.unwrap_or_default(),
                })
            })
            .collect())
    }

    /// Creates `name`, pulling the image once when the engine does not have it and replacing a
    /// stale container of the same name.
    pub(crate) async fn create(
        &self,
        name: &str,
        body: ContainerCreateBody,
    ) -> Result<(), SandboxError> {
        let options = CreateContainerOptionsBuilder::default().name(name).build();
        match self
            .docker
            .create_container(Some(options.clone()), body.clone())
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if status(&e) == Some(404) => {
                self.pull(body.image.as_deref().unwrap_or_default()).await?;
            }
            Err(e) if status(&e) == Some(409) => {
                tracing::warn!(
                    container = name,
                    "replacing a stale container of the same name"
                );
                self.remove(name).await?;
            }
            Err(e) => return Err(self.failed("create a container", &e)),
        }
        self.docker
            .create_container(Some(options), body)
            .await
            .map(|_| ())
            .map_err(|e| self.failed("create a container", &e))
    }

    async fn pull(&self, image: &str) -> Result<(), SandboxError> {
        tracing::info!(image, "pulling the sandbox image");
        let options = CreateImageOptionsBuilder::default()
            .from_image(image)
            .build();
        let mut progress = self.docker.create_image(Some(options), None, None);
        while let Some(step) = progress.next().await {
            step.map_err(|e| {
                SandboxError::Unavailable(format!(
                    "could not pull the sandbox image {image:?} ({e}); check \
                     sandbox.docker.image and the engine's registry access"
                ))
            })?;
        }
        Ok(())
    }

    /// Whether `name` is running; `None` when the engine no longer has it.
    pub(crate) async fn is_running(&self, name: &str) -> Result<Option<bool>, SandboxError> {
        match self.docker.inspect_container(name, None).await {
            Ok(inspect) => Ok(Some(
                inspect
                    .state
                    .and_then(|state| state.running)
                    .unwrap_or(false),
            )),
            Err(e) if status(&e) == Some(404) => Ok(None),
            Err(e) => Err(self.failed("inspect the container", &e)),
        }
    }

    pub(crate) async fn start(&self, name: &str) -> Result<(), SandboxError> {
        match self.docker.start_container(name, None).await {
            // 304: already running.
            Err(e) if status(&e) != Some(304) => Err(self.failed("start the container", &e)),
            _ => Ok(()),
        }
    }

    /// Stops then removes `name`; a container that is already gone counts as removed.
    pub(crate) async fn stop_and_remove(&self, name: &str) -> Result<(), SandboxError> {
        let stop = StopContainerOptionsBuilder::default()
            .t(STOP_GRACE_SECS)
            .build();
        match self.docker.stop_container(name, Some(stop)).await {
            Err(e) if !matches!(status(&e), Some(304 | 404)) => {
                tracing::warn!(container = name, error = %e, "could not stop the container; removing it by force");
            }
            _ => {}
        }
        self.remove(name).await
    }

    async fn remove(&self, name: &str) -> Result<(), SandboxError> {
        let options = RemoveContainerOptionsBuilder::default().force(true).build();
        match self.docker.remove_container(name, Some(options)).await {
            Err(e) if status(&e) != Some(404) => Err(self.failed("remove the container", &e)),
            _ => Ok(()),
        }
    }

    /// Where the engine is, as error messages and logs name it.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Runs `cmd` in `container`, collecting at most [`OUTPUT_CAPTURE_BYTES`] per stream, until
    /// the output ends or `deadline` passes.
    pub(crate) async fn exec(
        &self,
        container: &str,
        cmd: Vec<String>,
        env: Vec<String>,
        working_dir: &str,
        deadline: Duration,
    ) -> Result<ExecOutput, SandboxError> {
        let created = self
            .docker
            .create_exec(
                container,
                CreateExecOptions {
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    attach_stdin: Some(false),
                    tty: Some(false),
                    cmd: Some(cmd),
                    env: Some(env),
                    working_dir: Some(working_dir.to_string()),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| self.failed("start a command", &e))?;
        let started = self
            .docker
            .start_exec(&created.id, None)
            .await
            .map_err(|e| self.failed("start a command", &e))?;
        let StartExecResults::Attached { mut output, .. } = started else {
            return Err(SandboxError::Unavailable(
                "the Docker engine detached the command instead of streaming its output".into(),
            ));
        };
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let collect = async {
            while let Some(chunk) = output.next().await {
                let chunk = chunk.map_err(|e| self.failed("read the command's output", &e))?;
                let (target, bytes) = match chunk {
                    LogOutput::StdErr { message } => (&mut stderr, message),
                    LogOutput::StdOut { message } | LogOutput::Console { message } => {
                        (&mut stdout, message)
                    }
                    LogOutput::StdIn { .. } => continue,
                };
                let room = OUTPUT_CAPTURE_BYTES.saturating_sub(target.len());
                target.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            Ok::<(), SandboxError>(())
        };
        let timed_out = match tokio::time::timeout(deadline, collect).await {
            Ok(result) => {
                result?;
                false
            }
            Err(_) => true,
        };
        let exit_code = if timed_out {
            None
        } else {
            self.docker
                .inspect_exec(&created.id)
                .await
                .map_err(|e| self.failed("read the command's exit code", &e))?
                .exit_code
        };
        Ok(ExecOutput {
            stdout,
            stderr,
            exit_code,
            timed_out,
        })
    }

    fn failed(&self, action: &str, error: &BollardError) -> SandboxError {
        SandboxError::Unavailable(format!(
            "the Docker engine at {} could not {action} ({error}); check that it is running",
            self.endpoint
        ))
    }
}

fn status(error: &BollardError) -> Option<u16> {
    match error {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}
