//! Telegram adapter: teloxide requests behind Antler's channel capability traits.
