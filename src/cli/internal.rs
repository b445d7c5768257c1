//! The hidden subcommands the binary starts itself as: the converter child the daemon runs for
//! each document or fetched page, and the child the persistence test kills mid-turn. Both run
//! before any configuration is read.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::RuntimeConfig;

#[derive(clap::Subcommand)]
pub enum InternalCommand {
    /// The converter child the daemon starts for each document or fetched page: reads it on
    /// stdin, writes Markdown on stdout (see `antler_convert`).
    #[command(hide = true)]
    Convert {
        /// pdf, docx, xlsx, pptx or html.
        #[arg(long)]
        kind: String,
    },
    /// Test support: runs a turn against a slow scripted model and waits to be killed.
    #[command(name = "__crash-child", hide = true)]
    CrashChild { data_dir: PathBuf },
}

impl InternalCommand {
    pub fn run(self) -> ExitCode {
        match self {
            Self::Convert { kind } => antler_convert::child::main(&kind),
            Self::CrashChild { data_dir } => {
                let outcome = RuntimeConfig::default()
                    .build()
                    .map_err(|e| format!("cannot start the async runtime: {e}"))
                    .and_then(|runtime| {
                        runtime
                            .block_on(crate::harness::testing::crash_child(&data_dir))
                            .map_err(|e| e.to_string())
                    });
                match outcome {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(error) => {
                        eprintln!("error: {error}");
                        ExitCode::FAILURE
                    }
                }
            }
        }
    }
}
