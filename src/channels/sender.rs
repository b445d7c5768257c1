//! How a person who wrote or clicked is named: the name their message came with, else the one
//! the platform gives (Slack's events and clicks, Feishu's carry none), else their platform id.
//! A leaf both the turn (group senders) and approvals (deciders) use.

use std::time::Duration;

use antler_channel::InboundMessage;

use crate::channels::runtime::ChannelRuntime;

/// A name lookup may not hold up a turn.
const NAME_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) async fn sender_name(runtime: &ChannelRuntime, message: &InboundMessage) -> String {
    let given = message
        .display_name
        .as_deref()
        .map(str::trim)
        .filter(|name| !name.is_empty());
    if let Some(name) = given {
        return name.to_string();
    }
    if let Some(names) = &runtime.parts.names {
        let lookup = names.display_name(&message.user_id);
        match tokio::time::timeout(NAME_LOOKUP_TIMEOUT, lookup).await {
            Ok(Ok(Some(name))) => return name,
            Ok(Ok(None)) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, channel = %message.channel, "Could not look up a sender's name; the agent sees their user id")
            }
            Err(_) => {
                tracing::warn!(channel = %message.channel, "Looking up a sender's name took too long; the agent sees their user id")
            }
        }
    }
    message.user_id.clone()
}
