//! What a metered model call was for. The enum lives with the agent contracts (the model-call
//! chain tags each call with it); usage rows, reports and metrics name it from here.

pub use crate::agent_api::UsageKind;
