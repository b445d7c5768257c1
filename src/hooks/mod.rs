//! Webhooks from other systems (`channels.webhook`): `POST /hooks/{endpoint}` verified by its
//! signature before anything is parsed, journalled once per delivery id, run as the endpoint's
//! user, answered in `deliver_to` through that channel's outbox (or only in the thread).

pub mod template;
pub mod verify;

use serde::Serialize;

/// What `POST /hooks/{endpoint}` answers with 202: the same ids for a redelivery.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Accepted {
    pub run_id: String,
    pub thread_id: String,
}
