//! Integration tests: chat_cli.
