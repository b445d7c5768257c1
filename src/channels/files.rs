//! Files both ways: inbound attachments into the thread's uploads, outbound artifacts from
//! `present_files` resolved to local files the adapter can upload.

use std::path::{Component, Path};

use antler_channel::{Attachment, InboundMessage};
use serde_json::{Value, json};

use crate::channels::runtime::ChannelRuntime;
use crate::paths::{ThreadPaths, VIRTUAL_OUTPUTS};
use crate::uploads::store_upload;

/// The result of fetching a message's files.
#[derive(Debug, Default)]
pub struct Received {
    /// `[{filename, size, path, is_image}]` for the human message's `meta.extra["files"]`.
    pub files: Vec<Value>,
    /// Files that could not be received, with the reason, for the agent and the user.
    pub problems: Vec<String>,
}

/// Downloads every file of `message` into the thread's uploads directory.
pub async fn receive_files(
    runtime: &ChannelRuntime,
    message: &InboundMessage,
    paths: &ThreadPaths,
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
    let limit = runtime.profile.max_download_bytes;
    let uploads = paths.uploads();
    for (idx, file) in message.files.iter().enumerate() {
        let name = file.filename.clone().unwrap_or_else(|| {
            let ext = if file.is_image { "png" } else { "bin" };
            format!("{}_{idx}.{ext}", message.platform_message_id)
        });
        let bytes = match download.download(file, limit).await {
            Ok(bytes) => bytes,
            Err(error) => {
                received.problems.push(format!("{name}: {error}"));
                continue;
            }
        };
        let dir = uploads.clone();
        let stored = tokio::task::spawn_blocking(move || store_upload(&dir, &name, &bytes)).await;
        match stored {
            Ok(Ok(info)) => received.files.push(json!({
                "filename": info.filename,
                "size": info.size,
                "path": info.path,
                "is_image": info.is_image,
            })),
            Ok(Err(error)) => received.problems.push(error.to_string()),
            Err(error) => received.problems.push(error.to_string()),
        }
    }
    received
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
