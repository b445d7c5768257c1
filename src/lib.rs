//! Antler: a self-hosted AI agent daemon for team chats.
//!
//! See `ARCHITECTURE.md` for the map. The seams are traits: [`model::ChatModel`],
//! [`agent_api::Tool`], [`agent_api::Middleware`], [`antler_store::Store`]; the agent contracts all
//! live in [`agent_api`].

pub mod agent;
pub mod agent_api;
pub mod agents;
pub mod agents_cli;
pub mod artifacts;
pub mod bench;
pub mod bench_daemon;
pub mod body_buffers;
pub mod channels;
pub mod chat;
pub mod cli_locate;
pub mod client;
pub mod commands;
pub mod config;
pub mod daemon;
pub mod daemon_client;
pub mod harness;
pub mod http;
pub mod identity;
pub mod internal_cli;
pub mod lead_agent;
pub mod listener;
pub mod local_socket;
pub mod mcp;
pub mod mcp_cli;
pub mod memory;
pub mod memory_release;
pub mod metrics;
pub mod middleware;
pub mod model;
pub mod paths;
pub mod runtime_file;
pub mod sandbox;
pub mod service_manager;
pub mod skills;
pub mod skills_cli;
pub mod status;
pub mod store_cli;
pub mod subagents;
pub mod tools;
pub mod uploads;
pub mod usage;
