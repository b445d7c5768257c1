//! The one integration-test binary (each extra test binary links the whole daemon again).

// Tests: a setup that cannot work fails the test (unwrap), and the test runtime owns every
// task it spawns, ending them with the test; a skipped test says why on stdout.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::print_stdout)]

mod agents;
mod approvals;
mod architecture;
mod budgets;
mod chain;
mod channels;
mod chat_cli;
mod cluster;
mod cluster_chats;
mod config;
mod conversion;
mod daemon;
mod deployment;
mod docker_sandbox;
mod identities;
mod langgraph;
mod lead_agent;
mod listener;
mod mcp;
mod memory;
mod messages;
mod ops_bench;
mod persistence;
mod postgres;
mod providers;
mod sandbox;
mod skills;
mod usage;
mod web_browser;
mod web_tools;
