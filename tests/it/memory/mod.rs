//! Long-term memory end to end: isolation between users and agents through the harness, and
//! the chat commands through Telegram against the fake Bot API.

mod history;
mod http;
mod isolation;
mod latency;
mod shared;
mod shutdown;
mod telegram;
