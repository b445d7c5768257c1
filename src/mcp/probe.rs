//! The library side of `antler mcp call` and `antler mcp probe`: one session opened outside a
//! model's run (a configured server, or a URL with a server entry's headers and OAuth), its
//! handshake reported, its tools listed, one tool called.
//!
//! Contract: owned by the cli lane.
