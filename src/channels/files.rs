//! Files both ways: inbound attachments into the thread's uploads, outbound artifacts from
//! `present_files` resolved to local files the adapter can upload.
//!
//! Attachments obey the limits HTTP uploads do (`uploads::limits`): the first
//! `uploads.max_files` files of a message are taken, each up to `uploads.max_file_size` (and
//! the platform's download limit), while the thread's uploads stay within
//! `uploads.max_total_size`; a file refused is not fetched when its size is known, never
//! stored, and named with the reason (for the agent and in the reply).

use std::path::{Component, Path};

use antler_channel::{Attachment, ChannelError, InboundFile, InboundMessage};
use serde_json::{Value, json};

use crate::channels::runtime::ChannelRuntime;
use crate::config::UploadsConfig;
use crate::paths::{ThreadPaths, VIRTUAL_OUTPUTS};
use crate::uploads::limits::{LimitError, UploadBudget};
use crate::uploads::{store_upload, total_size};

/// The result of fetching a message's files.
#[derive(Debug, Default)]
pub struct Received {
    /// `[{filename, size, path, is_image}]` for the human message's `meta.extra["files"]`.
    pub files: Vec<Value>,
    /// Files that could not be received, with the reason, for the agent and the user.
    pub problems: Vec<String>,
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

/// Resolves `/mnt/user-data/outputs/...` paths to files; the rest come back as names only.
pub fn resolve_artifacts(
    paths: &ThreadPaths,
    virtual_paths: &[String],
) -> (Vec<Attachment>, Vec<String>) {
    let mut attachments = Vec::new();
    let mut unresolved = Vec::new();
    let outputs = paths.outputs();
    for virtual_path in virtual_paths {
        let display = file_name(virtual_path);
        match resolve_one(&outputs, virtual_path) {
            Some(attachment) => attachments.push(attachment),
            None => unresolved.push(display),
        }
    }
    (attachments, unresolved)
}

fn resolve_one(outputs: &Path, virtual_path: &str) -> Option<Attachment> {
    let relative = virtual_path
        .strip_prefix(VIRTUAL_OUTPUTS)?
        .trim_start_matches('/');
    let relative = Path::new(relative);
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return None;
    }
    let path = outputs.join(relative);
    let metadata = std::fs::symlink_metadata(&path).ok()?;
    if !metadata.is_file() {
        return None;
    }
    let canonical = path.canonicalize().ok()?;
    if !canonical.starts_with(outputs.canonicalize().ok()?) {
        return None;
    }
    let mime_type = mime_guess::from_path(&path)
        .first_or_octet_stream()
        .essence_str()
        .to_string();
    Some(Attachment {
        filename: file_name(virtual_path),
        is_image: mime_type.starts_with("image/"),
        mime_type,
        path: canonical,
        size: metadata.len(),
    })
}

fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_real_files_inside_outputs_resolve() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = ThreadPaths::new(dir.path(), "u1", "t1").expect("paths");
        paths.ensure_dirs().expect("dirs");
        std::fs::write(paths.outputs().join("chart.png"), b"png").expect("write");
        std::fs::write(paths.outputs().join("report.pdf"), b"pdf").expect("write");
        std::fs::write(dir.path().join("secret.txt"), b"no").expect("write");
        let (attachments, unresolved) = resolve_artifacts(
            &paths,
            &[
                "/mnt/user-data/outputs/chart.png".into(),
                "/mnt/user-data/outputs/report.pdf".into(),
                "/mnt/user-data/outputs/../../../../secret.txt".into(),
                "/mnt/user-data/outputs/missing.txt".into(),
                "/etc/passwd".into(),
            ],
        );
        assert_eq!(attachments.len(), 2);
        assert!(attachments[0].is_image);
        assert_eq!(attachments[0].mime_type, "image/png");
        assert!(!attachments[1].is_image);
        assert_eq!(unresolved, vec!["secret.txt", "missing.txt", "passwd"]);
    }
}
