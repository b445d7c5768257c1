//! `view_image(path)` (vision models only): checks that a file in the sandbox is an image and
//! records it in `state.viewed_images`, so `ViewImageMiddleware` shows it to the model on the
//! next call. The bytes never enter the thread's messages.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::shared::{MAX_IMAGE_BYTES, sniff_image};
use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::config::{AppConfig, SandboxMountConfig};
use crate::paths::ThreadPaths;
use crate::sandbox::PathMapper;
use crate::tools::builtin::{
    SandboxAccess, ToolMeta, error_text, normalise_virtual_key, sha256_hex,
};
use antler_store::state::ViewedImage;

/// Where copies of viewed images go when the sandbox's file has no host path (inside the
/// thread's directory but outside `user-data`, so the model never sees them).
const SNAPSHOT_DIR: &str = "viewed-images";

/// Arguments of `view_image`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ViewImageArgs {
    /// Explain why you want to see this image in a few words.
    // Only for the model (and the trace): it states its intent before acting.
    #[allow(dead_code)]
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Absolute path of a PNG, JPEG, GIF or WebP file, e.g. /mnt/user-data/uploads/photo.png.
    #[serde(alias = "image_path")]
    pub(crate) path: String,
}

pub struct ViewImageTool {
    meta: ToolMeta,
    access: SandboxAccess,
    host: HostLayout,
}

/// Where the thread's files live on the host, to read an image without copying it: the data
/// dir and the mount table the host providers use.
#[derive(Clone, Debug)]
pub struct HostLayout {
    pub data_dir: PathBuf,
    pub skills_path: Option<PathBuf>,
    pub mounts: Vec<SandboxMountConfig>,
}

impl HostLayout {
    pub fn from_config(config: &AppConfig) -> Self {
        let data_dir = config.data_dir();
        Self {
            data_dir: std::path::absolute(&data_dir).unwrap_or(data_dir),
            skills_path: config.sandbox.skills_path.clone(),
            mounts: config.sandbox.mounts.clone(),
        }
    }

    fn thread(&self, ctx: &ToolContext<'_>) -> Option<ThreadPaths> {
        ThreadPaths::new(&self.data_dir, &ctx.run.users.owner, &ctx.run.thread_id).ok()
    }
}

impl ViewImageTool {
    pub fn new(meta: ToolMeta, access: SandboxAccess, host: HostLayout) -> Self {
        Self { meta, access, host }
    }
}

fn too_big(path: &str, size: u64) -> String {
    format!(
        "Error: {path} is {size} bytes; view_image accepts images up to {MAX_IMAGE_BYTES} bytes (5 MiB). Make a smaller copy first."
    )
}

#[async_trait]
impl Tool for ViewImageTool {
    fn name(&self) -> &str {
        &self.meta.name
    }

    fn description(&self) -> &str {
        "Look at an image file (PNG, JPEG, GIF or WebP, up to 5 MiB) under /mnt/user-data. \
         The image is shown to you with your next message."
    }

    fn parameters(&self) -> Value {
        schema_for::<ViewImageArgs>()
    }

    fn group(&self) -> Option<&str> {
        self.meta.group.as_deref()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: ViewImageArgs = parse_args(args)?;
        let (sandbox, mut update) = self.access.sandbox(ctx).await?;
        let reply = |content: String, update| {
            Ok(ToolOutput {
                content,
                update,
                artifact: None,
            })
        };
        let virtual_path = normalise_virtual_key(&args.path);
        let host = host_path(&self.host, ctx, &args.path);
        // Refuse a huge file before loading it, when its size can be known up front.
        if let Some(size) = host
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .filter(|size| *size > MAX_IMAGE_BYTES)
        {
            return reply(too_big(&virtual_path, size), update);
        }
        let bytes = match sandbox.download_file(&args.path).await {
            Ok(bytes) => bytes,
            Err(error) => return reply(error_text(&error), update),
        };
        let size = bytes.len() as u64;
        if size > MAX_IMAGE_BYTES {
            return reply(too_big(&virtual_path, size), update);
        }
        let Some(mime_type) = sniff_image(&bytes) else {
            return reply(
                format!(
                    "Error: {virtual_path} is not a PNG, JPEG, GIF or WebP image; view_image only shows images. Use read_file for text."
                ),
                update,
            );
        };
        let on_host = match &host {
            Some(path) => same_content(path, &bytes).await,
            None => false,
        };
        let actual_path = match host.filter(|_| on_host) {
            Some(path) => path,
            None => snapshot(&self.host, ctx, &bytes, mime_type)
                .await
                .map_err(ToolError::Failed)?,
        };
        update.viewed_images = Some(BTreeMap::from([(
            virtual_path.clone(),
            ViewedImage {
                mime_type: mime_type.to_string(),
                size,
                actual_path: actual_path.to_string_lossy().into_owned(),
            },
        )]));
        reply(
            format!(
                "Successfully read image {virtual_path} ({mime_type}, {size} bytes). It is shown to you with your next message."
            ),
            update,
        )
    }
}

/// The host file behind a virtual path, by the same mount table the host providers use.
fn host_path(host: &HostLayout, ctx: &ToolContext<'_>, path: &str) -> Option<PathBuf> {
    let paths = host.thread(ctx)?;
    let mapper = PathMapper::for_thread(&paths, host.skills_path.as_deref(), &host.mounts);
    mapper.resolve(path).ok().map(|r| r.host_path)
}

/// Whether the host file holds exactly the bytes the sandbox returned (else the sandbox is not
/// backed by host files, or the mount tables differ, and a copy is used instead).
async fn same_content(path: &Path, bytes: &[u8]) -> bool {
    tokio::fs::read(path).await.is_ok_and(|host| host == bytes)
}

/// Copies the image next to the thread's data so the middleware can read it from the host
/// (for sandboxes whose files are not host files).
async fn snapshot(
    host: &HostLayout,
    ctx: &ToolContext<'_>,
    bytes: &[u8],
    mime_type: &str,
) -> Result<PathBuf, String> {
    let paths = host
        .thread(ctx)
        .ok_or_else(|| "the thread's directory is unknown".to_string())?;
    let thread_dir = paths.user_data().parent().unwrap_or(paths.user_data());
    let dir = thread_dir.join(SNAPSHOT_DIR);
    let extension = mime_type.trim_start_matches("image/");
    let file = dir.join(format!("{}.{extension}", sha256_hex(bytes)));
    tokio::fs::create_dir_all(&dir)
        .await
        .map_err(|e| format!("could not keep a copy of the image for the model: {e}"))?;
    tokio::fs::write(&file, bytes)
        .await
        .map_err(|e| format!("could not keep a copy of the image for the model: {e}"))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_the_four_image_types_and_nothing_else() {
        assert_eq!(sniff_image(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(sniff_image(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(sniff_image(b"GIF89a..."), Some("image/gif"));
        assert_eq!(sniff_image(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff_image(b"RIFF\0\0\0\0WAVE"), None);
        assert_eq!(sniff_image(b"hello"), None);
        assert_eq!(sniff_image(b""), None);
    }
}
