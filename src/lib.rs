//! Antler: a self-hosted AI agent daemon for team chats.
//!
//! See `ARCHITECTURE.md` for the map. The seams are traits: [`model::ChatModel`],
//! [`tools::Tool`], [`middleware::Middleware`], [`store::Store`].

pub mod agent;
pub mod config;
pub mod messages;
pub mod middleware;
pub mod model;
pub mod sandbox;
pub mod state;
pub mod store;
pub mod tools;
