//! The platform-neutral chat channel interface.
//!
//! Adapters (`channels/<platform>`) translate a platform's events into [`InboundMessage`]s and
//! deliver [`OutboundMessage`]s through small capability traits. This crate knows nothing of the
//! agent: the daemon wires adapters to the harness, never the other way round.

mod capabilities;
mod channel;
mod key;
mod message;

pub use capabilities::{
    ChannelError, ChannelLimits, DownloadFile, EditMessage, PollUpdates, React, SendMessage,
    SentMessage, TypingIndicator, UploadFile,
};
pub use channel::ChannelParts;
pub use key::ChatKey;
pub use message::{Attachment, InboundFile, InboundMessage, OutboundMessage};
