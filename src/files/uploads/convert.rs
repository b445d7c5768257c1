//! Uploaded documents (`.pdf`, `.docx`, `.xlsx`, `.pptx`) to a Markdown sibling the agent can
//! read with its file tools, when `uploads.auto_convert_documents` is on.
//!
//! Parsing happens in a bounded converter child (`converter`): a hostile document stops that
//! child, never the daemon. This module picks what to convert, writes the copy beside the
//! original (never over it, never touching the original) and notes the outcome in the file's
//! entry (`markdown_path`, or `conversion_error` with the reason), which is what the upload's
//! answer and the agent's `<current_uploads>` list show.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::AppConfig;
use crate::files::uploads::{split_extension, store_upload};
use crate::paths::VIRTUAL_UPLOADS;
use antler_convert::{ConvertError, Converter, Input, Kind, Limits};

/// Largest document read for conversion; bigger uploads are kept without a `.md`.
pub const MAX_DOCUMENT_BYTES: u64 = 50 * 1024 * 1024;
/// The entry key naming the Markdown copy's file name.
pub const MARKDOWN_FILE: &str = "markdown_file";
/// The entry key naming the Markdown copy's virtual path.
pub const MARKDOWN_PATH: &str = "markdown_path";
/// The entry key saying why a document has no Markdown copy.
pub const CONVERSION_ERROR: &str = "conversion_error";

/// Why an upload has no Markdown copy; read after "report.pdf has no Markdown copy: ".
#[derive(Debug, thiserror::Error)]
pub enum UploadConvertError {
    #[error("it is larger than {} MiB, the most that is converted", MAX_DOCUMENT_BYTES / (1024 * 1024))]
    TooLarge,
    #[error("could not read it ({0})")]
    Read(String),
    #[error(transparent)]
    Convert(#[from] ConvertError),
    #[error("could not write the Markdown copy ({0})")]
    Write(String),
}

/// Converts the stored upload at `path` when it is a supported document, writing `{stem}.md`
/// beside it (`{stem}_1.md`, … when that name is taken) and returning the new file's path.
/// `Ok(None)`: not a convertible type. On error the original is untouched and no `.md` exists.
pub async fn convert_upload(
    converter: &Converter,
    limits: &Limits,
    path: &Path,
) -> Result<Option<PathBuf>, UploadConvertError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some(kind) = Kind::of_document(&name) else {
        return Ok(None);
    };
    let size = tokio::fs::metadata(path)
        .await
        .map_err(|e| UploadConvertError::Read(e.to_string()))?
        .len();
    if size > MAX_DOCUMENT_BYTES {
        return Err(UploadConvertError::TooLarge);
    }
    let body = converter
        .convert(kind, Input::File(path.to_path_buf()), limits)
        .await?;
    let markdown = format!("# {name}\n\n{}\n", body.trim_end());
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let (stem, _) = split_extension(&name);
    let md_name = format!("{stem}.md");
    let stored = tokio::task::spawn_blocking(move || {
        store_upload(&dir, &md_name, markdown.as_bytes()).map(|info| dir.join(info.filename))
    })
    .await
    .map_err(|e| UploadConvertError::Write(e.to_string()))?
    .map_err(|e| UploadConvertError::Write(e.to_string()))?;
    Ok(Some(stored))
}

/// With `uploads.auto_convert_documents` on, converts every document among `files` (entries
/// with a `filename`, stored in `dir`) and notes the outcome in its entry: `markdown_file` and
/// `markdown_path`, or `conversion_error`. The uploads themselves already succeeded. HTTP
/// uploads and the files of chat messages (`channels::received`) both come through here, so
/// every surface converts the same kinds within the same `conversion:` limits.
pub async fn convert_listed_uploads(
    converter: &Converter,
    config: &AppConfig,
    dir: &Path,
    files: &mut [Value],
) {
    if !config.uploads.auto_convert_documents {
        return;
    }
    let limits = Limits::from_config(&config.conversion);
    let conversions = files.iter().map(|entry| {
        // An entry that already says how its conversion went was converted before (a chat
        // message handled again after a restart): converting again would write a second copy.
        let settled = entry.get(MARKDOWN_PATH).is_some() || entry.get(CONVERSION_ERROR).is_some();
        let name = entry
            .get("filename")
            .and_then(Value::as_str)
            .filter(|_| !settled)
            .map(str::to_string);
        let limits = &limits;
        async move {
            match name {
                Some(name) => Some(convert_upload(converter, limits, &dir.join(name)).await),
                None => None,
            }
        }
    });
    let outcomes = futures::future::join_all(conversions).await;
    for (entry, outcome) in files.iter_mut().zip(outcomes) {
        let Some(object) = entry.as_object_mut() else {
            continue;
        };
        match outcome {
            Some(Ok(Some(markdown))) => {
                let file = markdown
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                object.insert(
                    MARKDOWN_PATH.into(),
                    Value::String(format!("{VIRTUAL_UPLOADS}/{file}")),
                );
                object.insert(MARKDOWN_FILE.into(), Value::String(file));
            }
            Some(Err(error)) => {
                object.insert(CONVERSION_ERROR.into(), Value::String(error.to_string()));
            }
            Some(Ok(None)) | None => {}
        }
    }
}

/// "report.pdf has no Markdown copy: …" for each entry whose conversion failed.
pub fn conversion_notices(files: &[Value]) -> Vec<String> {
    files
        .iter()
        .filter_map(|entry| {
            let error = entry.get(CONVERSION_ERROR)?.as_str()?;
            let name = entry.get("filename")?.as_str()?;
            Some(format!("{name} was kept but has no Markdown copy: {error}"))
        })
        .collect()
}
