//! The LangGraph Platform API through the daemon binary.

mod stream;
