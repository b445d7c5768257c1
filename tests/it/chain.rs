//! Integration tests: chain.
