//! Files both ways: people's files fetched from `url_private_download` with the bot token, and
//! the agent's artifacts shared with the external-upload flow (`files.getUploadURLExternal` →
//! upload → `files.completeUploadExternal` into the conversation's thread). The retired
//! `files.upload` is never used.

use antler_channel::{
    Attachment, ChannelError, ChatKey, DownloadFile, InboundFile, SentMessage, UploadFile,
};
use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use slack_morphism::prelude::{
    SlackApiFilesComplete, SlackApiFilesCompleteUploadExternalRequest,
    SlackApiFilesGetUploadUrlExternalRequest, SlackApiFilesUploadViaUrlRequest,
};
use slack_morphism::{SlackChannelId, SlackTs};

use crate::{SLACK_PROFILE, SlackChannel};

#[async_trait]
impl UploadFile for SlackChannel {
    async fn upload(
        &self,
        chat: &ChatKey,
        file: &Attachment,
        _reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let limit = SLACK_PROFILE.max_upload_bytes;
        if file.size > limit {
            return Err(ChannelError::TooLarge {
                size: file.size,
                limit,
            });
        }
        let content = tokio::fs::read(&file.path)
            .await
            .map_err(|e| ChannelError::Platform(format!("cannot read {}: {e}", file.filename)))?;
        let session = self.api.bot();
        let slot = self
            .api
            .call(
                "files.getUploadURLExternal",
                session.get_upload_url_external(&SlackApiFilesGetUploadUrlExternalRequest::new(
                    file.filename.clone(),
                    content.len(),
                )),
            )
            .await?;
        self.api
            .call(
                "files.upload (upload URL)",
                session.files_upload_via_url(&SlackApiFilesUploadViaUrlRequest::new(
                    slot.upload_url,
                    content,
                    file.mime_type.clone(),
                )),
            )
            .await?;
        let mut complete = SlackApiFilesCompleteUploadExternalRequest::new(vec![
            SlackApiFilesComplete::new(slot.file_id.clone()).with_title(file.filename.clone()),
        ])
        .with_channel_id(SlackChannelId::new(chat.chat_id.clone()));
        if let Some(thread) = &chat.topic_id {
            complete = complete.with_thread_ts(SlackTs::new(thread.clone()));
        }
        // The answer (full file objects) is not needed; parsing it could only turn a shared file
        // into a failure that shares it again.
        self.api
            .call(
                "files.completeUploadExternal",
                session
                    .http_session_api
                    .http_post::<_, serde::de::IgnoredAny>(
                        "files.completeUploadExternal",
                        &complete,
                        None,
                    ),
            )
            .await?;
        Ok(SentMessage {
            platform_message_id: slot.file_id.0,
        })
    }
}

#[async_trait]
impl DownloadFile for SlackChannel {
    async fn download(&self, file: &InboundFile, max_bytes: u64) -> Result<Bytes, ChannelError> {
        let too_large = |size: u64| ChannelError::TooLarge {
            size,
            limit: max_bytes,
        };
        if let Some(size) = file.size.filter(|size| *size > max_bytes) {
            return Err(too_large(size));
        }
        let url = url::Url::parse(&file.handle)
            .map_err(|e| ChannelError::Platform(format!("bad slack file url: {e}")))?;
        if !self.may_receive_token(&url) {
            return Err(ChannelError::Platform(format!(
                "refusing to send the bot token to {}: slack files come from files.slack.com",
                url.host_str().unwrap_or("an unknown host")
            )));
        }
        let response = self
            .http
            .get(url)
            .bearer_auth(self.api.bot_token_value())
            .send()
            .await
            .map_err(|e| ChannelError::Network(format!("slack file download: {e}")))?;
        if !response.status().is_success() {
            return Err(ChannelError::Platform(format!(
                "slack file download: HTTP {}",
                response.status()
            )));
        }
        // Without the files:read scope Slack answers 200 with its sign-in page.
        let html = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/html"));
        if html
            && !file
                .mime_type
                .as_deref()
                .is_some_and(|m| m.starts_with("text/html"))
        {
            return Err(ChannelError::Platform(
                "slack answered with a web page instead of the file; give the app the files:read scope and reinstall it".into(),
            ));
        }
        let mut stream = response.bytes_stream();
        let mut bytes = BytesMut::new();
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|e| ChannelError::Network(format!("slack file download: {e}")))?;
            bytes.extend_from_slice(&chunk);
            // The size in the event is a claim; the stream is what counts.
            if bytes.len() as u64 > max_bytes {
                return Err(too_large(bytes.len() as u64));
            }
        }
        Ok(bytes.freeze())
    }
}

impl SlackChannel {
    /// The bot token goes only to Slack's own hosts (or the configured API host), over https
    /// unless the API itself is plain http: a file URL in an event never leaks it elsewhere.
    fn may_receive_token(&self, url: &url::Url) -> bool {
        let base = &self.api.base_url;
        let Some(host) = url.host_str() else {
            return false;
        };
        let scheme_ok = url.scheme() == "https" || url.scheme() == base.scheme();
        let slack = host == "slack.com" || host.ends_with(".slack.com");
        let same_as_api = Some(host) == base.host_str()
            && url.port_or_known_default() == base.port_or_known_default();
        scheme_ok && (slack || same_as_api)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BotIdentity;
    use crate::api::SlackApi;

    #[test]
    fn the_token_goes_only_to_slack_hosts() {
        let identity = BotIdentity {
            user_id: "UBOT".into(),
            bot_id: None,
            team_id: "T1".into(),
            name: "antler".into(),
        };
        let production = SlackChannel::new(
            SlackApi::new(None, "xoxb-1").expect("api"),
            identity.clone(),
        )
        .expect("channel");
        let cases = [
            (
                "https://files.slack.com/files-pri/T1-F1/download/a.txt",
                true,
            ),
            (
                "http://files.slack.com/files-pri/T1-F1/download/a.txt",
                false,
            ),
            ("https://files.slack.com.evil.test/a.txt", false),
            ("https://evil.test/files.slack.com/a.txt", false),
        ];
        for (url, allowed) in cases {
            let url = url::Url::parse(url).expect("url");
            assert_eq!(production.may_receive_token(&url), allowed, "{url}");
        }
        let local = SlackChannel::new(
            SlackApi::new(Some("http://127.0.0.1:4000/api"), "xoxb-1").expect("api"),
            identity,
        )
        .expect("channel");
        let fake = url::Url::parse("http://127.0.0.1:4000/files/F1/a.txt").expect("url");
        assert!(local.may_receive_token(&fake));
        let other_port = url::Url::parse("http://127.0.0.1:4001/files/F1/a.txt").expect("url");
        assert!(!local.may_receive_token(&other_port));
    }
}
