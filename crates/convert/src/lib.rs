//! Untrusted bytes (uploaded documents, fetched web pages) to Markdown in a child process, so a
//! hostile document costs at most that child: its address space, CPU and wall-clock time and
//! output are capped (`conversion:` in the config), and a conversion that passes one of them
//! ends with the reason instead of the daemon.
//!
//! The child is this same binary, `antler convert --kind …` (hidden), started through
//! `/proc/self/exe`: always the daemon's own build, even after the file on disk was replaced
//! by an upgrade. The parsers (`documents`, `sheets`, `ooxml`, `html`) run only there
//! ([`child`]); the daemon side ([`Converter`]) feeds the input on stdin, reads the Markdown
//! from stdout and tells why a child stopped from its exit status. [`html::parse`] is also what `web_search`
//! reads its result page with, in-process: its nesting is bounded, so it is linear.

// Tests own their tasks through the test runtime, which ends them with the test.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod child;
mod config;
mod documents;
pub mod html;
mod ooxml;
mod run;
mod sheets;
#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::Semaphore;

pub use config::{ConversionConfig, MIN_CONVERSION_MEMORY_MB};

/// Stack of the child's parsing thread: the Markdown walk recurses once per element level, at
/// most `html::PRUNE_DEPTH` deep (~3 KiB a level in a debug build, less in release).
pub(crate) const PARSER_STACK_BYTES: usize = 16 * 1024 * 1024;

/// What a converter child parses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Pdf,
    Docx,
    Xlsx,
    Pptx,
    Html,
}

impl Kind {
    /// Every kind, in the order `--kind` lists them.
    pub const ALL: [Kind; 5] = [Self::Pdf, Self::Docx, Self::Xlsx, Self::Pptx, Self::Html];

    /// The document kind of a file name by its extension (case-insensitive); web pages are
    /// never uploads, so `.html` is not one.
    pub fn of_document(name: &str) -> Option<Self> {
        let (_, extension) = name.rsplit_once('.')?;
        match extension.to_ascii_lowercase().as_str() {
            "pdf" => Some(Self::Pdf),
            "docx" => Some(Self::Docx),
            "xlsx" => Some(Self::Xlsx),
            "pptx" => Some(Self::Pptx),
            _ => None,
        }
    }

    /// The value of `--kind`.
    pub fn arg(self) -> &'static str {
        match self {
            Self::Pdf => "pdf",
            Self::Docx => "docx",
            Self::Xlsx => "xlsx",
            Self::Pptx => "pptx",
            Self::Html => "html",
        }
    }

    pub fn from_arg(arg: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.arg() == arg)
    }

    /// How users name the format.
    pub fn label(self) -> &'static str {
        match self {
            Self::Pdf => "PDF",
            Self::Docx => "Word",
            Self::Xlsx => "Excel",
            Self::Pptx => "PowerPoint",
            Self::Html => "HTML",
        }
    }
}

/// The caps of one conversion, from `conversion:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The child's address space (`RLIMIT_AS`).
    pub memory_mb: u64,
    /// Wall clock, and CPU time (`RLIMIT_CPU`, one second later so the wall clock speaks
    /// first); also the longest wait for a free slot.
    pub timeout: Duration,
    pub max_output_mb: u64,
}

impl Limits {
    pub fn from_config(config: &ConversionConfig) -> Self {
        Self {
            memory_mb: config.memory_mb,
            timeout: Duration::from_secs(config.timeout_seconds.max(1)),
            max_output_mb: config.max_output_mb,
        }
    }

    fn max_output_bytes(&self) -> usize {
        usize::try_from(self.max_output_mb.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::from_config(&ConversionConfig::default())
    }
}

/// What the child reads on its stdin.
#[derive(Debug)]
pub enum Input {
    /// A stored file, streamed from disk.
    File(PathBuf),
    Bytes(Vec<u8>),
}

/// Why a conversion produced no Markdown; the text is what users and the agent read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error(
        "the conversion stopped: it needed more than {limit_mb} MiB of memory (conversion.memory_mb)"
    )]
    TooMuchMemory { limit_mb: u64 },
    #[error("the conversion stopped: it took longer than {seconds} s (conversion.timeout_seconds)")]
    TimedOut { seconds: u64 },
    #[error(
        "the conversion stopped: its Markdown grew past {limit_mb} MiB (conversion.max_output_mb)"
    )]
    OutputTooLarge { limit_mb: u64 },
    #[error(
        "the conversion stopped: it nests too deeply to convert; re-save it with a simpler structure"
    )]
    TooDeep,
    #[error(
        "the converter stayed busy with other documents for {seconds} s (conversion.max_concurrent); try again in a moment"
    )]
    Busy { seconds: u64 },
    #[error("it is not a readable {kind} document ({detail}); re-save it and try again")]
    Unreadable { kind: &'static str, detail: String },
    #[error("it contains no extractable text (a scanned PDF needs OCR first)")]
    NoText,
    #[error("the converter crashed on it ({detail})")]
    Crashed { detail: String },
    #[error("the converter could not be started ({detail}); the daemon's log says more")]
    Unavailable { detail: String },
}

/// The program a conversion runs: normally this binary's `convert` subcommand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    path: PathBuf,
    leading_args: Vec<OsString>,
}

impl Program {
    /// This very binary (`/proc/self/exe`, else `current_exe`) with `convert`.
    pub fn this_binary() -> Self {
        let self_exe = PathBuf::from("/proc/self/exe");
        let path = if self_exe.exists() {
            self_exe
        } else {
            std::env::current_exe().unwrap_or_else(|_| PathBuf::from("antler"))
        };
        Self::antler(path)
    }

    /// The `antler` binary at `path` (tests: `env!("CARGO_BIN_EXE_antler")`).
    pub fn antler(path: impl Into<PathBuf>) -> Self {
        Self::custom(path, ["convert"])
    }

    /// Any program; `--kind <kind>` follows `leading_args`.
    pub fn custom(
        path: impl Into<PathBuf>,
        leading_args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        Self {
            path: path.into(),
            leading_args: leading_args.into_iter().map(Into::into).collect(),
        }
    }
}

/// Runs conversions in bounded children, at most `max_concurrent` at once. Cheap to clone;
/// clones share the slots and the program.
#[derive(Clone)]
pub struct Converter {
    shared: Arc<Shared>,
}

struct Shared {
    program: RwLock<Program>,
    slots: Semaphore,
}

impl Converter {
    pub fn new(program: Program, max_concurrent: usize) -> Self {
        Self {
            shared: Arc::new(Shared {
                program: RwLock::new(program),
                slots: Semaphore::new(max_concurrent.max(1)),
            }),
        }
    }

    /// This binary as the converter, with `conversion.max_concurrent` slots.
    pub fn for_config(config: &ConversionConfig) -> Self {
        Self::new(Program::this_binary(), config.max_concurrent)
    }

    /// Replaces the program every later conversion runs: the seam for processes that are
    /// not the `antler` binary (an in-process harness in a test binary).
    pub fn set_program(&self, program: Program) {
        match self.shared.program.write() {
            Ok(mut guard) => *guard = program,
            Err(poisoned) => *poisoned.into_inner() = program,
        }
    }

    fn program(&self) -> Program {
        match self.shared.program.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The Markdown of `input` read as `kind`, from a child within `limits`. Waits for a free
    /// slot at most `limits.timeout`.
    pub async fn convert(
        &self,
        kind: Kind,
        input: Input,
        limits: &Limits,
    ) -> Result<String, ConvertError> {
        let busy = ConvertError::Busy {
            seconds: limits.timeout.as_secs(),
        };
        let _slot = match tokio::time::timeout(limits.timeout, self.shared.slots.acquire()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(_)) | Err(_) => return Err(busy),
        };
        let result = run::run(&self.program(), kind, input, limits).await;
        match &result {
            // The document's own fault: its owner is told, nothing for an operator.
            Err(error @ (ConvertError::Unreadable { .. } | ConvertError::NoText)) => {
                tracing::info!(kind = kind.arg(), %error, "A document could not be converted");
            }
            // Logged where its stderr is known (`run::classify`).
            Err(ConvertError::Crashed { .. }) | Ok(_) => {}
            Err(error) => {
                tracing::warn!(kind = kind.arg(), %error, "A conversion to Markdown was stopped");
            }
        }
        result
    }

    /// A fetched page as Markdown, from a child within `limits`.
    pub async fn convert_page(
        &self,
        html: Vec<u8>,
        limits: &Limits,
    ) -> Result<html::Page, ConvertError> {
        let output = self.convert(Kind::Html, Input::Bytes(html), limits).await?;
        Ok(html::Page::decode(&output))
    }
}
