//! A chat message's files, received and converted once: the files of every platform's messages
//! go through [`receive_once`], which stores them in the thread's uploads (`files`), gives
//! documents their Markdown copy through the path HTTP uploads take
//! (`files::uploads::convert`, in the bounded converter child), and writes down what came of
//! it.
//!
//! That note is what makes a message handled again (the daemon restarted mid-turn) cost
//! nothing twice: the second time finds the note and takes the files, their Markdown copies
//! and the reasons for any without one from it, instead of downloading `report_1.pdf` and
//! converting it to `report_1.md`. Notes live in the thread's `received/` directory, outside
//! what the agent sees; a chat's messages are handled in order, so writing the note of a new
//! message drops the notes of the thread's earlier ones.

use std::path::{Path, PathBuf};

use antler_channel::InboundMessage;
use antler_convert::Converter;
use sha2::{Digest, Sha256};

use crate::channels::files::{Received, receive_files};
use crate::channels::runtime::ChannelRuntime;
use crate::config::AppConfig;
use crate::files::uploads::convert::convert_listed_uploads;
use crate::paths::ThreadPaths;

/// Extension of a note; anything else in `received/` is left alone.
const NOTE_EXTENSION: &str = "json";

/// The files of the message journalled as `journal_key`: from its note when it was received
/// before, else downloaded within `uploads.*`, converted with `uploads.auto_convert_documents`
/// and noted.
pub(crate) async fn receive_once(
    runtime: &ChannelRuntime,
    converter: &Converter,
    config: &AppConfig,
    message: &InboundMessage,
    journal_key: &str,
    paths: &ThreadPaths,
) -> Received {
    if message.files.is_empty() {
        return Received::default();
    }
    let note = note_path(&paths.received(), journal_key);
    once(&note, async {
        let mut received = receive_files(runtime, message, paths, &config.uploads).await;
        convert_listed_uploads(converter, config, &paths.uploads(), &mut received.files).await;
        received
    })
    .await
}

/// `receive` unless `note` says what it gave before; what it gives is noted (a note that
/// cannot be written only loses the saving on a re-run, so it is logged, not fatal).
async fn once(note: &Path, receive: impl Future<Output = Received>) -> Received {
    if let Some(noted) = read_note(note).await {
        return noted;
    }
    let received = receive.await;
    let (path, bytes) = (note.to_path_buf(), serde_json::to_vec(&received));
    let written = match bytes {
        Ok(bytes) => tokio::task::spawn_blocking(move || write_note(&path, &bytes))
            .await
            .map_err(std::io::Error::other)
            .and_then(|result| result),
        Err(error) => Err(std::io::Error::other(error)),
    };
    if let Err(error) = written {
        tracing::warn!(%error, note = %note.display(), "Could not note a chat message's files; a re-run would receive them again");
    }
    received
}

/// `received/{sha256(journal key)}.json`: journal keys hold separators no file name may.
fn note_path(dir: &Path, journal_key: &str) -> PathBuf {
    let digest = Sha256::digest(journal_key.as_bytes());
    dir.join(format!("{}.{NOTE_EXTENSION}", hex::encode(&digest[..16])))
}

async fn read_note(note: &Path) -> Option<Received> {
    let bytes = tokio::fs::read(note).await.ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(received) => Some(received),
        Err(error) => {
            tracing::warn!(%error, note = %note.display(), "Ignoring an unreadable note of a chat message's files");
            None
        }
    }
}

/// Writes the note whole (a temporary file renamed over it) after removing the thread's other
/// notes: their messages were handled before this one.
fn write_note(note: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let Some(dir) = note.parent() else {
        return Ok(());
    };
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        let is_note = path
            .extension()
            .is_some_and(|extension| extension == NOTE_EXTENSION);
        if is_note && path != note {
            let _ = std::fs::remove_file(&path);
        }
    }
    let staging = note.with_extension("tmp");
    std::fs::write(&staging, bytes)?;
    std::fs::rename(&staging, note)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;

    fn received(name: &str) -> Received {
        Received {
            files: vec![json!({
                "filename": name,
                "size": 3,
                "path": format!("/mnt/user-data/uploads/{name}"),
                "markdown_path": "/mnt/user-data/uploads/report.md",
            })],
            problems: vec!["big.bin: over the limit".into()],
            audio: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_message_handled_again_takes_its_files_from_the_note() {
        let dir = tempfile::tempdir().unwrap();
        let calls = AtomicUsize::new(0);
        let receive = |name: &'static str| {
            let calls = &calls;
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                received(name)
            }
        };
        let note = note_path(dir.path(), "telegram\u{1f}\u{1f}11\u{1f}5");
        let first = once(&note, receive("report.pdf")).await;
        let again = once(&note, receive("report_1.pdf")).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "received once");
        assert_eq!(again.files, first.files);
        assert_eq!(again.problems, ["big.bin: over the limit"]);
        assert_eq!(again.files[0]["filename"], "report.pdf");
    }

    #[tokio::test]
    async fn a_new_message_drops_the_notes_of_earlier_ones_and_other_files_stay() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "x").unwrap();
        let first = note_path(dir.path(), "m1");
        once(&first, async { received("a.pdf") }).await;
        let second = note_path(dir.path(), "m2");
        once(&second, async { received("b.pdf") }).await;
        assert!(!first.exists() && second.exists());
        assert!(dir.path().join("keep.txt").exists());
        assert_ne!(first, second);
    }

    #[tokio::test]
    async fn an_unreadable_note_is_received_again() {
        let dir = tempfile::tempdir().unwrap();
        let note = note_path(dir.path(), "m1");
        std::fs::write(&note, "{not json").unwrap();
        let got = once(&note, async { received("a.pdf") }).await;
        assert_eq!(got.files[0]["filename"], "a.pdf");
        let noted: Received = serde_json::from_slice(&std::fs::read(&note).unwrap()).unwrap();
        assert_eq!(noted.files, got.files);
    }
}
