//! Files both ways: people's attachments fetched from Discord's CDN (signed URLs, no token
//! needed or sent), and the agent's artifacts posted as message attachments (multipart:
//! `payload_json` plus `files[0]`).

use antler_channel::{
    Attachment, ChannelError, ChatKey, DownloadFile, InboundFile, SentMessage, UploadFile,
};
use async_trait::async_trait;
use bytes::Bytes;
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::json;

use crate::api::Body;
use crate::send::no_mentions;
use crate::{DiscordChannel, profile};

/// Hosts Discord serves attachments from.
const CDN_HOSTS: [&str; 2] = ["cdn.discordapp.com", "media.discordapp.net"];

#[async_trait]
impl UploadFile for DiscordChannel {
    async fn upload(
        &self,
        chat: &ChatKey,
        file: &Attachment,
        _reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let limit = profile(&self.config).max_upload_bytes;
        if file.size > limit {
            return Err(ChannelError::TooLarge {
                size: file.size,
                limit,
            });
        }
        let content = tokio::fs::read(&file.path)
            .await
            .map_err(|e| ChannelError::Platform(format!("cannot read {}: {e}", file.filename)))?;
        if content.len() as u64 > limit {
            return Err(ChannelError::TooLarge {
                size: content.len() as u64,
                limit,
            });
        }
        let target = self.target(chat).await?;
        let payload = json!({
            "attachments": [{"id": 0, "filename": file.filename}],
            "allowed_mentions": no_mentions(),
        });
        let mime = Some(file.mime_type.as_str())
            .filter(|m| m.contains('/') && !m.contains(char::is_whitespace))
            .unwrap_or("application/octet-stream");
        let part = Part::bytes(content)
            .file_name(file.filename.clone())
            .mime_str(mime)
            .map_err(|e| ChannelError::Platform(format!("bad file type {mime:?}: {e}")))?;
        let form = Form::new()
            .text("payload_json", payload.to_string())
            .part("files[0]", part);
        let sent = self
            .api
            .call(
                Method::POST,
                &format!("send:{target}"),
                &format!("channels/{target}/messages"),
                Body::Multipart(form),
            )
            .await
            .map_err(|error| error.into_channel("upload a file"))?;
        let id = sent["id"]
            .as_str()
            .ok_or_else(|| ChannelError::Platform("discord sent no message id".into()))?;
        Ok(SentMessage {
            platform_message_id: id.to_string(),
        })
    }
}

#[async_trait]
impl DownloadFile for DiscordChannel {
    async fn download(&self, file: &InboundFile, max_bytes: u64) -> Result<Bytes, ChannelError> {
        if let Some(size) = file.size.filter(|size| *size > max_bytes) {
            return Err(ChannelError::TooLarge {
                size,
                limit: max_bytes,
            });
        }
        let url = url::Url::parse(&file.handle)
            .map_err(|e| ChannelError::Platform(format!("bad discord attachment url: {e}")))?;
        if !self.may_fetch(&url) {
            return Err(ChannelError::Platform(format!(
                "refusing to fetch an attachment from {}: discord files come from its CDN",
                url.host_str().unwrap_or("an unknown host")
            )));
        }
        self.api.download(url, max_bytes).await
    }
}

impl DiscordChannel {
    /// Attachments come from Discord's CDN over https, or from the configured API server
    /// itself (a Discord-compatible server, tests).
    fn may_fetch(&self, url: &url::Url) -> bool {
        let Some(host) = url.host_str() else {
            return false;
        };
        let base = self.api.base();
        let cdn = url.scheme() == "https" && CDN_HOSTS.contains(&host);
        let same_as_api = url.scheme() == base.scheme()
            && Some(host) == base.host_str()
            && url.port_or_known_default() == base.port_or_known_default();
        cdn || same_as_api
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::DiscordApi;
    use crate::threads::Threads;
    use crate::{BotIdentity, DiscordConfig};

    fn channel(api_url: Option<&str>) -> DiscordChannel {
        DiscordChannel {
            api: DiscordApi::new(api_url, "t").expect("api"),
            token: "t".into(),
            identity: BotIdentity {
                user_id: "1".into(),
                name: "antler".into(),
            },
            config: DiscordConfig::default(),
            threads: Threads::default(),
        }
    }

    #[test]
    fn attachments_come_only_from_the_cdn_or_the_api_server() {
        let production = channel(None);
        let cases = [
            ("https://cdn.discordapp.com/attachments/1/2/a.txt", true),
            ("https://media.discordapp.net/attachments/1/2/a.png", true),
            ("http://cdn.discordapp.com/attachments/1/2/a.txt", false),
            ("https://cdn.discordapp.com.evil.test/a.txt", false),
            ("http://127.0.0.1:4000/attachments/a.txt", false),
        ];
        for (url, allowed) in cases {
            let url = url::Url::parse(url).expect("url");
            assert_eq!(production.may_fetch(&url), allowed, "{url}");
        }
        let local = channel(Some("http://127.0.0.1:4000"));
        let fake = url::Url::parse("http://127.0.0.1:4000/attachments/a.txt").expect("url");
        assert!(local.may_fetch(&fake));
        let other = url::Url::parse("http://127.0.0.1:4001/attachments/a.txt").expect("url");
        assert!(!local.may_fetch(&other));
    }
}
