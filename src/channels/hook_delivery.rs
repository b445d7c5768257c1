//! The webhook channel's [`ChatDelivery`]: a delivery with a chat journalled there as its
//! entry (`channels::hook_entry`), handed to the chat's worker now or once the channel
//! connects; the journal takes an id once, so journalling it again changes nothing.

use std::sync::{Arc, Weak};

use crate::channels::hook_entry::entry;
use crate::channels::manager::{ChannelManager, ManagerInner};
use crate::hooks::ChatDelivery;
use crate::hooks::store::Delivery;

/// The webhook channel's [`ChatDelivery`], set when the channels start. Holds the manager
/// weakly (the manager holds the harness).
pub(crate) struct ChatHookDelivery {
    inner: Weak<ManagerInner>,
}

impl ChatHookDelivery {
    pub(crate) fn new(manager: &ChannelManager) -> Arc<Self> {
        Arc::new(Self {
            inner: Arc::downgrade(manager.inner()),
        })
    }
}

impl ChatDelivery for ChatHookDelivery {
    fn journal(&self, delivery: &Delivery) -> Result<(), String> {
        let Some((key, message)) = entry(delivery) else {
            return Err("the delivery has no chat".into());
        };
        let Some(inner) = self.inner.upgrade() else {
            return Err("the daemon is stopping".into());
        };
        let config = inner.deps.config.current();
        match config.channels.section(&key.channel) {
            Some(section) if section.enabled() => {}
            Some(_) => {
                return Err(format!(
                    "channel {channel} is turned off (`channels.{channel}.enabled`)",
                    channel = key.channel
                ));
            }
            None => return Err(format!("no channel {} is configured", key.channel)),
        }
        inner
            .queue_entry(&key, message)
            .map(|_| ())
            .map_err(|error| error.to_string())
    }
}
