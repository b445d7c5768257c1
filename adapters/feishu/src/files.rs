//! Files both ways: people's images and files fetched with the message-resource API, and the
//! agent's artifacts uploaded (`/open-apis/im/v1/images` up to 10 MB, `/open-apis/im/v1/files`
//! up to 30 MB) and sent as replies. A file Feishu cannot take (too large, empty) is named in a
//! card with the reason instead, so the person knows it exists.

use antler_channel::{
    Attachment, ChannelError, ChatKey, DownloadFile, InboundFile, SentMessage, UploadFile,
};
use async_trait::async_trait;
use bytes::Bytes;
use reqwest::multipart::{Form, Part};
use serde_json::json;

use crate::api::data;
use crate::convert::{ResourceKind, parse_handle};
use crate::markup::card;
use crate::{FEISHU_PROFILE, FeishuChannel};

/// Feishu's `file_type` for an upload, from the file's extension.
pub(crate) fn file_type(filename: &str) -> &'static str {
    let extension = filename
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "opus" => "opus",
        "mp4" => "mp4",
        "pdf" => "pdf",
        "doc" | "docx" => "doc",
        "xls" | "xlsx" => "xls",
        "ppt" | "pptx" => "ppt",
        _ => "stream",
    }
}

/// How an artifact goes out.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Image,
    File,
    /// Not sent; the person is told why.
    Refused(String),
}

pub(crate) fn route(file: &Attachment) -> Route {
    let megabytes = |bytes: u64| bytes / (1024 * 1024);
    if file.size == 0 {
        return Route::Refused(format!(
            "📎 {} was not sent: it is empty, and Feishu does not accept empty files.",
            file.filename
        ));
    }
    if file.is_image && file.size <= FEISHU_PROFILE.max_photo_bytes {
        return Route::Image;
    }
    if file.size <= FEISHU_PROFILE.max_upload_bytes {
        return Route::File;
    }
    Route::Refused(format!(
        "📎 {} ({:.1} MB) was not sent: Feishu accepts files up to {} MB.",
        file.filename,
        file.size as f64 / (1024.0 * 1024.0),
        megabytes(FEISHU_PROFILE.max_upload_bytes)
    ))
}

#[async_trait]
impl UploadFile for FeishuChannel {
    async fn upload(
        &self,
        chat: &ChatKey,
        file: &Attachment,
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let route = route(file);
        if let Route::Refused(why) = &route {
            return self
                .post_message(chat, reply_to, "interactive", &card(why))
                .await;
        }
        let content = tokio::fs::read(&file.path)
            .await
            .map_err(|e| ChannelError::Platform(format!("cannot read {}: {e}", file.filename)))?;
        let content = Bytes::from(content);
        let length = content.len() as u64;
        let part = || {
            let fresh = || {
                Part::stream_with_length(content.clone(), length).file_name(file.filename.clone())
            };
            fresh()
                .mime_str(&file.mime_type)
                .unwrap_or_else(|_| fresh())
        };
        let (msg_type, message_content) = if route == Route::Image {
            let answer = self
                .api
                .multipart("im.image.create", "open-apis/im/v1/images", || {
                    Form::new()
                        .text("image_type", "message")
                        .part("image", part())
                })
                .await?;
            let key = key_of(&answer, "image_key")?;
            ("image", json!({"image_key": key}))
        } else {
            // Feishu plays only Opus as an audio message; a spoken answer in OGG/Opus is one.
            let file_type = if file.voice && file.mime_type.eq_ignore_ascii_case("audio/ogg") {
                "opus"
            } else {
                file_type(&file.filename)
            };
            let answer = self
                .api
                .multipart("im.file.create", "open-apis/im/v1/files", || {
                    Form::new()
                        .text("file_type", file_type)
                        .text("file_name", upload_name(file, file_type))
                        .part("file", part())
                })
                .await?;
            let key = key_of(&answer, "file_key")?;
            let msg_type = if file_type == "opus" { "audio" } else { "file" };
            (msg_type, json!({"file_key": key}))
        };
        self.post_message(chat, reply_to, msg_type, &message_content.to_string())
            .await
    }
}

/// The name Feishu is told: an Opus upload is named `.opus`, as its docs show it.
fn upload_name(file: &Attachment, file_type: &str) -> String {
    match file.filename.rsplit_once('.') {
        Some((stem, "ogg")) if file_type == "opus" => format!("{stem}.opus"),
        _ => file.filename.clone(),
    }
}

fn key_of(answer: &serde_json::Value, field: &str) -> Result<String, ChannelError> {
    data(answer)[field]
        .as_str()
        .filter(|key| !key.is_empty())
        .map(str::to_string)
        .ok_or_else(|| ChannelError::Platform(format!("feishu answered an upload without {field}")))
}

#[async_trait]
impl DownloadFile for FeishuChannel {
    async fn download(&self, file: &InboundFile, max_bytes: u64) -> Result<Bytes, ChannelError> {
        if let Some(size) = file.size.filter(|size| *size > max_bytes) {
            return Err(ChannelError::TooLarge {
                size,
                limit: max_bytes,
            });
        }
        let (kind, message_id, key) = parse_handle(&file.handle).ok_or_else(|| {
            ChannelError::Platform(format!("{:?} is not a feishu resource", file.handle))
        })?;
        let kind = match kind {
            ResourceKind::Image => "image",
            ResourceKind::File => "file",
        };
        let mut url = self.api.url(&format!(
            "open-apis/im/v1/messages/{message_id}/resources/{key}"
        ))?;
        url.query_pairs_mut().append_pair("type", kind);
        self.api
            .download("im.message.resource", url, max_bytes)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attachment(name: &str, size: u64, is_image: bool) -> Attachment {
        Attachment {
            filename: name.into(),
            mime_type: "application/octet-stream".into(),
            path: std::path::PathBuf::from("/nonexistent"),
            size,
            is_image,
            voice: false,
        }
    }

    #[test]
    fn artifacts_take_the_route_their_size_allows() {
        const MB: u64 = 1024 * 1024;
        assert_eq!(route(&attachment("a.png", 3 * MB, true)), Route::Image);
        assert_eq!(route(&attachment("big.png", 12 * MB, true)), Route::File);
        assert_eq!(route(&attachment("r.pdf", 30 * MB, false)), Route::File);
        match route(&attachment("huge.zip", 45 * MB, false)) {
            Route::Refused(why) => {
                assert_eq!(
                    why,
                    "📎 huge.zip (45.0 MB) was not sent: Feishu accepts files up to 30 MB."
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(route(&attachment("e.txt", 0, false)), Route::Refused(why) if why.contains("empty"))
        );
    }

    #[test]
    fn file_types_follow_the_extension() {
        for (name, expected) in [
            ("voice.OPUS", "opus"),
            ("clip.mp4", "mp4"),
            ("r.pdf", "pdf"),
            ("w.docx", "doc"),
            ("s.xlsx", "xls"),
            ("p.ppt", "ppt"),
            ("report.md", "stream"),
            ("noext", "stream"),
        ] {
            assert_eq!(file_type(name), expected, "{name}");
        }
    }
}
