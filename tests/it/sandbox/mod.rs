//! Sandbox providers and the built-in file/shell tools, end to end on real directories.

mod bwrap;
mod edits;
mod harness;
mod tools;

use std::sync::Arc;

use antler::agent_api::RunContext;
use antler::agent_api::{Tool, ToolContext, ToolOutput};
use antler::config::{AppConfig, SandboxConfig};
use antler::paths::ThreadPaths;
use antler::sandbox::{
    ExecMode, HostSandboxProvider, ProviderSettings, Sandbox, SandboxProvider, bwrap_available,
};
use antler::tools::builtin::{
    BashTool, GlobTool, GrepTool, LsTool, PresentFilesTool, ReadFileTool, SandboxAccess,
    StrReplaceTool, ToolMeta, WriteFileTool,
};
use antler_store::state::ThreadState;
use serde_json::Value;

const USER: &str = "alice";
const THREAD: &str = "thread-1";
/// The workspace as the model sees it.
const WS: &str = "/mnt/user-data/workspace";

/// Set (to `1`) by CI: a host where bubblewrap cannot run fails the bwrap tests instead of
/// letting them skip, so a broken CI machine cannot pass them silently.
pub(crate) const REQUIRE_BWRAP_VAR: &str = "ANTLER_REQUIRE_BWRAP";

/// Whether the bwrap tests can run here. Without bubblewrap they print why and skip, unless
/// [`REQUIRE_BWRAP_VAR`] is set, where that is a failure.
pub(crate) async fn bwrap_usable() -> bool {
    let Err(reason) = bwrap_available().await else {
        return true;
    };
    let required = std::env::var(REQUIRE_BWRAP_VAR).is_ok_and(|v| v == "1" || v == "true");
    assert!(
        !required,
        "{REQUIRE_BWRAP_VAR} is set but bwrap cannot run here: {reason}"
    );
    println!("skipping: bwrap cannot run here: {reason}");
    false
}

/// One of each built-in tool over the fixture's provider, built with its config (as the
/// registry builds them).
struct Tools {
    bash: BashTool,
    ls: LsTool,
    read: ReadFileTool,
    write: WriteFileTool,
    replace: StrReplaceTool,
    glob: GlobTool,
    grep: GrepTool,
    present: PresentFilesTool,
}

fn tools(fx: &Fixture) -> Tools {
    let access = SandboxAccess::new(fx.provider_ref());
    let meta = |name: &str| ToolMeta::new(name, None);
    let sandbox = &fx.config.sandbox;
    let timeout = std::time::Duration::from_secs(sandbox.bash_command_timeout);
    Tools {
        bash: BashTool::new(
            meta("bash"),
            access.clone(),
            sandbox.bash_output_max_chars,
            timeout,
        ),
        ls: LsTool::new(meta("ls"), access.clone(), sandbox.ls_output_max_chars),
        read: ReadFileTool::new(
            meta("read_file"),
            access.clone(),
            sandbox.read_file_output_max_chars,
        ),
        write: WriteFileTool::new(
            meta("write_file"),
            access.clone(),
            sandbox.write_file_max_bytes,
        ),
        replace: StrReplaceTool::new(meta("str_replace"), access.clone()),
        glob: GlobTool::new(meta("glob"), access.clone()),
        grep: GrepTool::new(meta("grep"), access),
        present: PresentFilesTool::new(fx.config.data_dir()),
    }
}

/// A data dir in a temp dir, a provider over it and a config pointing at it.
struct Fixture {
    tmp: tempfile::TempDir,
    config: Arc<AppConfig>,
    provider: Arc<HostSandboxProvider>,
}

impl Fixture {
    fn new(mode: ExecMode) -> Self {
        Self::with(mode, SandboxConfig::default(), Vec::new())
    }

    fn with(mode: ExecMode, sandbox: SandboxConfig, host_env: Vec<(String, String)>) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let data_dir = tmp.path().join("data");
        let skills = tmp.path().join("skills");
        std::fs::create_dir_all(skills.join("demo")).unwrap();
        std::fs::write(skills.join("demo/SKILL.md"), "# demo skill\n").unwrap();
        let config = AppConfig {
            data_dir: Some(data_dir.clone()),
            sandbox: sandbox.clone(),
            ..Default::default()
        };
        let host_env = if host_env.is_empty() {
            vec![(
                "PATH".to_string(),
                "/usr/local/bin:/usr/bin:/bin".to_string(),
            )]
        } else {
            host_env
        };
        let provider = Arc::new(HostSandboxProvider::new(
            ProviderSettings {
                data_dir,
                skills_dir: Some(skills),
                skill_mounts: None,
                sandbox,
                host_env,
                instance: None,
            },
            mode,
        ));
        Self {
            tmp,
            config: Arc::new(config),
            provider,
        }
    }

    fn paths(&self) -> ThreadPaths {
        ThreadPaths::new(&self.tmp.path().join("data"), USER, THREAD).unwrap()
    }

    fn provider_ref(&self) -> Arc<dyn SandboxProvider> {
        self.provider.clone()
    }

    async fn sandbox(&self) -> Arc<dyn Sandbox> {
        let id = self.provider.acquire(USER, THREAD).await.unwrap();
        self.provider.get(&id).unwrap()
    }

    /// Calls a tool as the loop would and applies its state update.
    async fn call(&self, tool: &dyn Tool, args: Value, state: &mut ThreadState) -> ToolOutput {
        let run = RunContext::new(THREAD, USER, self.config.clone());
        let ctx = ToolContext {
            run: &run,
            state,
            tool_call_id: "call-1",
        };
        let output = tool.call(args, &ctx).await.unwrap();
        state.apply(output.update.clone()).unwrap();
        output
    }

    /// Every spelling of the temp dir a leak could use.
    fn host_markers(&self) -> Vec<String> {
        let mut markers = vec![self.tmp.path().to_string_lossy().into_owned()];
        if let Ok(canonical) = self.tmp.path().canonicalize() {
            markers.push(canonical.to_string_lossy().into_owned());
        }
        markers
    }
}
