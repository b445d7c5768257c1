//! A channel as the manager sees it: a name, its limits and the capabilities it offers.

use std::sync::Arc;

use crate::capabilities::{
    DownloadFile, EditMessage, PollUpdates, SendMessage, TypingIndicator, UploadFile,
};

/// The capabilities one adapter instance offers; optional ones are `None` when the platform
/// (or this adapter) cannot do them, and the manager degrades accordingly.
#[derive(Clone)]
pub struct ChannelParts {
    /// The channel's name in `ChatKey`s and config (`telegram`, `slack`, …).
    pub name: String,
    pub send: Arc<dyn SendMessage>,
    pub edit: Option<Arc<dyn EditMessage>>,
    pub typing: Option<Arc<dyn TypingIndicator>>,
    pub upload: Option<Arc<dyn UploadFile>>,
    pub download: Option<Arc<dyn DownloadFile>>,
    /// Present for pull-based transports (long polling); push transports feed the manager directly.
    pub poll: Option<Arc<dyn PollUpdates>>,
}

impl std::fmt::Debug for ChannelParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelParts")
            .field("name", &self.name)
            .field("edit", &self.edit.is_some())
            .field("typing", &self.typing.is_some())
            .field("upload", &self.upload.is_some())
            .field("download", &self.download.is_some())
            .field("poll", &self.poll.is_some())
            .finish()
    }
}
