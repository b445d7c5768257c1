//! A thread's files: what users upload ([`uploads`]) and what the agent writes for them
//! ([`artifacts`]). Where they live on the host and the virtual paths the model sees is
//! [`crate::paths`], a leaf: the thread state names those paths too, and the store sits below
//! the configuration these modules read.

pub mod artifacts;
pub mod uploads;
