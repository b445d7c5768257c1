//! Logging for `antler chat`: nothing the harness logs may land in the conversation. In
//! process, everything goes to a file in the data dir (`logs/chat.log`); through the daemon
//! nothing is logged (the daemon has its own log). Errors alone also go to stderr, marked
//! `ERROR`, apart from the answers on stdout.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// A log file past this size is moved aside (`chat.log.1`) when a session starts.
const ROTATE_BYTES: u64 = 8 * 1024 * 1024;

/// The chat's logging, installed once; [`ChatLog::to_file`] turns the file on.
#[derive(Clone, Default)]
pub struct ChatLog {
    file: Arc<Mutex<Option<File>>>,
}

impl ChatLog {
    /// Installs the process's subscriber: errors to stderr at once, and everything `RUST_LOG`
    /// (else `level`) lets through to the file once there is one.
    pub fn install(level: &str) -> Self {
        let log = Self::default();
        let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
        let to_file = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(log.clone())
            .with_filter(filter);
        let errors = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .with_writer(std::io::stderr)
            .with_filter(tracing_subscriber::filter::LevelFilter::ERROR);
        if let Err(e) = tracing_subscriber::registry()
            .with(to_file)
            .with(errors)
            .try_init()
        {
            eprintln!("warning: logging is not available: {e}");
        }
        log
    }

    /// Starts logging to `{data_dir}/logs/chat.log` and returns its path.
    pub fn to_file(&self, data_dir: &Path) -> std::io::Result<PathBuf> {
        let dir = data_dir.join("logs");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("chat.log");
        if std::fs::metadata(&path).is_ok_and(|meta| meta.len() > ROTATE_BYTES) {
            std::fs::rename(&path, dir.join("chat.log.1"))?;
        }
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        *self.lock() = Some(file);
        Ok(path)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<File>> {
        self.file.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One event's write: to the file when there is one, else nowhere.
pub struct LogWriter(ChatLog);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.lock().as_mut() {
            Some(file) => file.write(buf),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.0.lock().as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

impl<'a> MakeWriter<'a> for ChatLog {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> LogWriter {
        LogWriter(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_go_nowhere_until_the_file_is_named_then_to_it() {
        let log = ChatLog::default();
        let tmp = tempfile::tempdir().unwrap();
        log.make_writer().write_all(b"dropped\n").unwrap();
        let path = log.to_file(tmp.path()).unwrap();
        assert_eq!(path, tmp.path().join("logs").join("chat.log"));
        log.make_writer().write_all(b"kept\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "kept\n");
    }
}
