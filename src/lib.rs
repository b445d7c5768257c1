//! Antler: a self-hosted AI agent daemon for team chats.
//!
//! See `ARCHITECTURE.md` for the map. The seams are traits: [`model::ChatModel`],
//! [`agent_api::Tool`], [`agent_api::Middleware`], [`antler_store::Store`]; the agent contracts all
//! live in [`agent_api`].

// Tests own their tasks through the test runtime, which ends them with the test.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod agent;
pub mod agent_api;
pub mod api_runs;
pub mod approvals;
pub mod body_buffers;
pub mod channels;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod custom_agents;
pub mod daemon;
pub mod files;
pub mod harness;
pub mod hooks;
pub mod http;
pub mod identity;
pub mod lead_agent;
pub mod mcp;
pub mod memory;
pub mod metrics;
pub mod middleware;
pub mod model;
pub mod paths;
pub mod sandbox;
pub mod scheduler;
pub mod skills;
pub mod storage;
pub mod subagents;
pub mod telemetry;
pub mod tools;
pub mod usage;
pub mod users;
pub mod voice;
