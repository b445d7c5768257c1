//! Long polling as a supervised transport: `getUpdates`, journal, then advance the offset.

use std::sync::Arc;

use antler_channel::{ChannelError, Transport, TransportContext};
use async_trait::async_trait;
use teloxide::payloads::GetUpdatesSetters;
use teloxide::requests::Requester;

use crate::convert::message_of;
use crate::error::channel_error;
use crate::{ALLOWED_UPDATES, TelegramChannel};

pub(crate) struct Poller {
    channel: Arc<TelegramChannel>,
    timeout_secs: u32,
}

impl Poller {
    pub(crate) fn new(channel: Arc<TelegramChannel>, timeout_secs: u32) -> Self {
        Self {
            channel,
            timeout_secs,
        }
    }
}

#[async_trait]
impl Transport for Poller {
    /// The offset lives in this loop: updates below it are acknowledged by the next request, so
    /// it only moves past a batch once the sink journalled it. A restart begins at Telegram's
    /// own record of the last acknowledged offset.
    async fn run(&self, ctx: TransportContext) -> Result<(), ChannelError> {
        let mut offset = 0i32;
        loop {
            let request = self
                .channel
                .bot
                .get_updates()
                .offset(offset)
                .timeout(self.timeout_secs)
                .allowed_updates(ALLOWED_UPDATES.to_vec());
            let updates = tokio::select! {
                _ = ctx.stop.cancelled() => return Ok(()),
                updates = request => updates.map_err(channel_error)?,
            };
            ctx.report_live();
            let Some(last) = updates.iter().map(|u| u.id.0).max() else {
                continue;
            };
            let messages = updates
                .iter()
                .filter_map(|update| message_of(update, &self.channel.identity))
                .collect::<Vec<_>>();
            if !messages.is_empty() {
                // Not acknowledged on failure: Telegram delivers the batch again.
                ctx.sink
                    .accept(messages)
                    .await
                    .map_err(|e| ChannelError::Platform(e.to_string()))?;
            }
            offset = i32::try_from(last).unwrap_or(i32::MAX).saturating_add(1);
        }
    }
}
