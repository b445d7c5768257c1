//! Inbound files: a message's attachments into the thread's uploads (what an answer sends back
//! is `answer_files`'s).
//!
//! Attachments obey the limits HTTP uploads do (`uploads::limits`): the first
//! `uploads.max_files` files of a message are taken, each up to `uploads.max_file_size` (and
//! the platform's download limit), while the thread's uploads stay within
//! `uploads.max_total_size`; a file refused is not fetched when its size is known, never
//! stored, and named with the reason (for the agent and in the reply).

use antler_channel::{AudioInfo, ChannelError, InboundFile, InboundMessage};
use serde_json::{Value, json};

use crate::channels::runtime::ChannelRuntime;
use crate::config::UploadsConfig;
use crate::files::uploads::limits::{LimitError, UploadBudget};
use crate::files::uploads::{store_upload, total_size};
use crate::paths::ThreadPaths;

/// The result of fetching a message's files (noted by `received`, hence serde).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Received {
    /// `[{filename, size, path, is_image}]` for the human message's `meta.extra["files"]`.
    pub files: Vec<Value>,
    /// Files that could not be received, with the reason, for the agent and the user.
    pub problems: Vec<String>,
    /// The voice notes and audio among `files`: (index in `files`, what the platform said it
    /// is, its MIME type), for the turn's transcription.
    pub audio: Vec<(usize, AudioInfo, Option<String>)>,
}

/// Downloads the files of `message` into the thread's uploads directory, within `limits`.
pub async fn receive_files(
    runtime: &ChannelRuntime,
    message: &InboundMessage,
    paths: &ThreadPaths,
    limits: &UploadsConfig,
) -> Received {
    let mut received = Received::default();
    if message.files.is_empty() {
        return received;
    }
    let Some(download) = &runtime.parts.download else {
        received
            .problems
            .push("this channel cannot download files".into());
        return received;
    };
    let uploads = paths.uploads();
    let dir = uploads.clone();
    let thread_total = tokio::task::spawn_blocking(move || total_size(&dir))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let mut budget = UploadBudget::new(limits, thread_total);
    let platform_limit = runtime.profile.max_download_bytes;
    let limit = platform_limit.min(budget.max_file_size());
    let mut skipped = Vec::new();
    for (idx, file) in message.files.iter().enumerate() {
        let name = inbound_name(message, file, idx);
        if budget.take_slot().is_err() {
            skipped.push(name);
            continue;
        }
        if let Some(Err(refused)) = file.size.map(|size| budget.check_size(&name, size)) {
            received.problems.push(refused.to_string());
            continue;
        }
        let bytes = match download.download(file, limit).await {
            Ok(bytes) => bytes,
            // Over our own limit rather than the platform's: say which key.
            Err(ChannelError::TooLarge { .. }) if limit < platform_limit => {
                let refused = LimitError::FileTooLarge { name, max: limit };
                received.problems.push(refused.to_string());
                continue;
            }
            Err(error) => {
                received.problems.push(format!("{name}: {error}"));
                continue;
            }
        };
        if let Err(refused) = budget.check_size(&name, bytes.len() as u64) {
            received.problems.push(refused.to_string());
            continue;
        }
        let dir = uploads.clone();
        let stored = tokio::task::spawn_blocking(move || store_upload(&dir, &name, &bytes)).await;
        match stored {
            Ok(Ok(info)) => {
                budget.add(info.size);
                if let Some(audio) = &file.audio {
                    let at = received.files.len();
                    received
                        .audio
                        .push((at, audio.clone(), file.mime_type.clone()));
                }
                received.files.push(json!({
                    "filename": info.filename,
                    "size": info.size,
                    "path": info.path,
                    "is_image": info.is_image,
                }));
            }
            Ok(Err(error)) => received.problems.push(error.to_string()),
            Err(error) => received.problems.push(error.to_string()),
        }
    }
    if !skipped.is_empty() {
        let too_many = LimitError::TooManyFiles {
            max: limits.max_files,
        };
        received
            .problems
            .push(format!("{}: skipped, {too_many}", skipped.join(", ")));
    }
    received
}

/// The file's name, or one made from the message id when the platform gave none.
fn inbound_name(message: &InboundMessage, file: &InboundFile, idx: usize) -> String {
    file.filename.clone().unwrap_or_else(|| {
        let ext = if file.is_image { "png" } else { "bin" };
        format!("{}_{idx}.{ext}", message.platform_message_id)
    })
}
