//! The LangGraph Platform API against the daemon binary and the scripted fake model.

mod runs;
mod runs_multitask;
