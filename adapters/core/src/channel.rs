//! The capabilities one connected adapter offers the daemon.

use std::sync::Arc;

use crate::buttons::SendButtons;
use crate::capabilities::{
    DownloadFile, EditMessage, React, SendMessage, TypingIndicator, UploadFile, UserNames,
};
use crate::history::FetchHistory;

/// The capabilities one adapter instance offers; optional ones are `None` when the platform
/// (or this adapter) cannot do them, and the daemon degrades accordingly.
#[derive(Clone)]
pub struct ChannelParts {
    pub send: Arc<dyn SendMessage>,
    pub edit: Option<Arc<dyn EditMessage>>,
    pub typing: Option<Arc<dyn TypingIndicator>>,
    pub react: Option<Arc<dyn React>>,
    pub upload: Option<Arc<dyn UploadFile>>,
    pub download: Option<Arc<dyn DownloadFile>>,
    /// Needed where inbound messages carry no display name (`InboundMessage::display_name`).
    pub names: Option<Arc<dyn UserNames>>,
    /// Earlier messages of a group conversation, read when someone addresses the bot.
    pub history: Option<Arc<dyn FetchHistory>>,
    /// Messages with buttons (approval requests); without it the daemon asks for a typed
    /// command instead.
    pub buttons: Option<Arc<dyn SendButtons>>,
}

impl ChannelParts {
    /// Only sending; add the optional capabilities with struct update syntax.
    pub fn send_only(send: Arc<dyn SendMessage>) -> Self {
        Self {
            send,
            edit: None,
            typing: None,
            react: None,
            upload: None,
            download: None,
            names: None,
            history: None,
            buttons: None,
        }
    }
}

impl std::fmt::Debug for ChannelParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelParts")
            .field("edit", &self.edit.is_some())
            .field("typing", &self.typing.is_some())
            .field("react", &self.react.is_some())
            .field("upload", &self.upload.is_some())
            .field("download", &self.download.is_some())
            .field("names", &self.names.is_some())
            .field("history", &self.history.is_some())
            .field("buttons", &self.buttons.is_some())
            .finish()
    }
}
