//! Long-term memory end to end: isolation between users and agents through the harness, the
//! chat commands through Telegram against the fake Bot API, and the memory block kept through
//! summarization.

mod diff_telegram;
mod history;
mod http;
mod isolation;
mod latency;
mod shared;
mod shutdown;
mod summarized;
mod telegram;
mod untrusted;
