//! What the fake Telegram reads from a Bot API request: a JSON body, or a multipart one (text
//! fields as JSON, files as `{"filename", "size"}` with their bytes kept apart, teloxide's
//! `attach://` references resolved).

use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Request};
use serde_json::{Value, json};

/// A file the bot uploaded (`sendVoice`, `sendDocument`, …), as it arrived.
#[derive(Clone, Debug)]
pub struct TelegramUpload {
    /// Lowercase method name (`sendvoice`).
    pub method: String,
    /// The form field that carried it (`voice`, `document`, …).
    pub field: String,
    pub filename: String,
    pub bytes: Vec<u8>,
}

/// The body as JSON, and the files of a multipart body: `(part name, filename, bytes)`.
pub(crate) async fn read_body(request: Request) -> (Value, Vec<(String, String, Vec<u8>)>) {
    let is_multipart = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    if !is_multipart {
        let bytes = Bytes::from_request(request, &()).await.unwrap_or_default();
        return (
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            Vec::new(),
        );
    }
    let mut body = json!({});
    let mut files = Vec::new();
    let Ok(mut multipart) = Multipart::from_request(request, &()).await else {
        return (body, files);
    };
    while let Ok(Some(field)) = multipart.next_field().await {
        let name = field.name().unwrap_or_default().to_string();
        let filename = field.file_name().map(String::from);
        let bytes = field.bytes().await.unwrap_or_default();
        body[name.as_str()] = match filename {
            Some(filename) => {
                files.push((name.clone(), filename.clone(), bytes.to_vec()));
                json!({"filename": filename, "size": bytes.len()})
            }
            None => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                serde_json::from_str(&text).unwrap_or(Value::String(text))
            }
        };
    }
    // teloxide sends `document: "attach://ID"` plus a part named ID: resolve the reference.
    if let Some(fields) = body.as_object_mut() {
        let references: Vec<(String, String)> = fields
            .iter()
            .filter_map(|(key, value)| {
                let id = value.as_str()?.strip_prefix("attach://")?;
                Some((key.clone(), id.to_string()))
            })
            .collect();
        for (key, id) in references {
            if let Some(file) = fields.remove(&id) {
                fields.insert(key.clone(), file);
            }
            for file in files.iter_mut().filter(|file| file.0 == id) {
                file.0 = key.clone();
            }
        }
    }
    (body, files)
}
