//! The one integration-test binary (each extra test binary links the whole daemon again).

mod config;
mod providers;
mod chain;
mod persistence;
mod chat_cli;
