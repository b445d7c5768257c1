//! The `antler` command line: one module per subcommand, and the daemon client and locator the
//! client commands share.

pub mod agents;
pub mod bench;
pub mod chat;
pub mod daemon_client;
pub mod internal;
pub mod locate;
pub mod mcp;
pub mod skills;
pub mod status;
pub mod store;
pub mod usage;
