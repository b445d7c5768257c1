//! The one integration-test binary (each extra test binary links the whole daemon again).

mod agents;
mod chain;
mod chat_cli;
mod config;
mod daemon;
mod persistence;
mod providers;
mod sandbox;
