//! An MCP tool result as a tool message: text as is, images and binary resources saved to the
//! thread's outputs (where `view_image` and `present_files` reach them), links and structured
//! content as text. `isError` results become tool errors the model reads.
//!
//! The result is read through its wire JSON (the MCP spec's content blocks), which stays
//! stable while rmcp's Rust types change between majors.

use base64::Engine;
use serde_json::Value;

use crate::agent_api::shared::MAX_IMAGE_BYTES;
use crate::agent_api::{ToolContext, ToolError, ToolOutput};
use crate::paths::{ThreadPaths, VIRTUAL_OUTPUTS};

/// The directory under the thread's outputs files from MCP results go to.
const MCP_OUTPUTS: &str = "mcp";

pub(crate) async fn to_tool_output(
    result: rmcp::model::CallToolResult,
    ctx: &ToolContext<'_>,
) -> Result<ToolOutput, ToolError> {
    let wire = serde_json::to_value(&result)
        .map_err(|e| ToolError::Failed(format!("unreadable MCP result: {e}")))?;
    let is_error = wire.get("isError").and_then(Value::as_bool) == Some(true);
    let mut parts = Vec::new();
    let blocks = wire
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (index, block) in blocks.iter().enumerate() {
        parts.push(block_text(block, index, ctx).await);
    }
    if parts.is_empty()
        && let Some(structured) = wire.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if is_error {
        let text = if text.is_empty() {
            "the tool reported an error without details".to_string()
        } else {
            text
        };
        return Err(ToolError::Failed(text));
    }
    Ok(ToolOutput::text(if text.is_empty() {
        "(the tool returned no content)".to_string()
    } else {
        text
    }))
}

async fn block_text(block: &Value, index: usize, ctx: &ToolContext<'_>) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "text" => field("text").to_string(),
        "image" | "audio" => {
            let kind = field("type");
            let mime = field("mimeType");
            match save_base64(field("data"), mime, index, ctx).await {
                Ok((path, size)) if kind == "image" => format!(
                    "[image {mime}, {size} bytes, saved to {path}; call view_image on that path to look at it]"
                ),
                Ok((path, size)) => format!("[audio {mime}, {size} bytes, saved to {path}]"),
                Err(error) => format!("[{kind} {mime} not kept: {error}]"),
            }
        }
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let get = |name: &str| resource.get(name).and_then(Value::as_str).unwrap_or("");
            let uri = get("uri");
            if let Some(text) = resource.get("text").and_then(Value::as_str) {
                format!("[resource {uri}]\n{text}")
            } else {
                match save_base64(get("blob"), get("mimeType"), index, ctx).await {
                    Ok((path, size)) => format!("[resource {uri}, {size} bytes, saved to {path}]"),
                    Err(error) => format!("[resource {uri} not kept: {error}]"),
                }
            }
        }
        "resource_link" => {
            let name = field("name");
            let description = field("description");
            format!("[resource link {} ({name}) {description}]", field("uri"))
                .trim_end()
                .to_string()
        }
        other => format!("[unsupported MCP content of type {other:?}]"),
    }
}

/// Decodes and writes a file to `/mnt/user-data/outputs/mcp/`; returns its virtual path.
async fn save_base64(
    data: &str,
    mime: &str,
    index: usize,
    ctx: &ToolContext<'_>,
) -> Result<(String, usize), String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| "its data is not valid base64".to_string())?;
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(format!("it is {} bytes, over the 5 MiB limit", bytes.len()));
    }
    let paths = ThreadPaths::new(
        &ctx.run.config.data_dir(),
        &ctx.run.users.owner,
        &ctx.run.thread_id,
    )
    .map_err(|e| e.to_string())?;
    let dir = paths.outputs().join(MCP_OUTPUTS);
    let extension = extension_of(mime);
    let call: String = ctx
        .tool_call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(48)
        .collect();
    let file = format!("{call}-{index}.{extension}");
    tokio::fs::create_dir_all(&dir)
        .await
        .map_err(|e| format!("could not create the outputs directory: {e}"))?;
    tokio::fs::write(dir.join(&file), &bytes)
        .await
        .map_err(|e| format!("could not write it: {e}"))?;
    Ok((
        format!("{VIRTUAL_OUTPUTS}/{MCP_OUTPUTS}/{file}"),
        bytes.len(),
    ))
}

fn extension_of(mime: &str) -> &'static str {
    match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/mpeg" => "mp3",
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        "application/json" => "json",
        _ => "bin",
    }
}
