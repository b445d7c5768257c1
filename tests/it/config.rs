//! Integration tests: config.
