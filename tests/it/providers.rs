//! Integration tests: providers.
