//! The platform-neutral chat channel interface.
//!
//! Adapters (`channels/<platform>`) implement [`ChannelConfig`] (their config section) and
//! [`ChannelAdapter`] (connecting), translate the platform's events into [`InboundMessage`]s and
//! deliver replies through small capability traits. This crate knows nothing of the agent: the
//! daemon wires adapters to the harness, never the other way round.

// Tests own their tasks through the test runtime, which ends them with the test.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod adapter;
mod buttons;
mod capabilities;
mod channel;
mod chunk;
mod code_spans;
mod history;
mod key;
mod message;
mod names;
mod profile;
mod secret;
mod transport;
mod webhook;

pub use adapter::{
    AccessSettings, ChannelAdapter, ChannelConfig, Connection, GroupPolicy, GroupRules,
    ReplyWithVoice, SessionConfig, connection_key_of, platform_ids,
};
pub use buttons::{BUTTON_VALUE_MAX, Button, ButtonClick, ButtonStyle, SendButtons};
pub use capabilities::{
    ChannelError, DownloadFile, EditMessage, React, SendMessage, SentMessage, TypingIndicator,
    UploadFile, UserNames,
};
pub use channel::ChannelParts;
pub use chunk::split_message;
pub use code_spans::{TextPart, any_prose, map_prose, text_parts};
pub use history::{ContextOverride, FetchHistory, HistoryMessage, HistoryRequest};
pub use key::ChatKey;
pub use message::{Attachment, AudioInfo, AudioKind, InboundFile, InboundMessage};
pub use names::{NAME_KEEP_FOR, NAME_MAX_KEPT, NameCache};
pub use profile::{BudgetLimits, ChannelProfile, Pace, ReactionSet};
pub use secret::Secret;
pub use transport::{InboundSink, SinkError, Transport, TransportContext};
pub use webhook::{
    CONCEALED_REFUSAL, WebhookError, WebhookHandler, WebhookReply, WebhookRequest, WebhookResponse,
};
