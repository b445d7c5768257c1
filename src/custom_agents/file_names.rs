//! The names of an agent's files in its directory: a leaf the store and the change summaries
//! both read.

pub const SOUL_FILE: &str = "SOUL.md";
pub const CONFIG_FILE: &str = "config.yaml";
