//! The one integration-test binary (each extra test binary links the whole daemon again).

mod agents;
mod architecture;
mod chain;
mod channels;
mod chat_cli;
mod config;
mod conversion;
mod daemon;
mod deployment;
mod docker_sandbox;
mod lead_agent;
mod listener;
mod mcp;
mod memory;
mod messages;
mod ops_bench;
mod persistence;
mod providers;
mod sandbox;
mod skills;
mod usage;
mod web_browser;
mod web_tools;
