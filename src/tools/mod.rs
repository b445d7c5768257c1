//! Tools: the built-in ones (`builtin`), a tool from a closure (`FnTool`) and the registry that
//! builds the configured set. The `Tool` contract itself lives in [`crate::agent_api`].

pub mod builtin;
mod fn_tool;
pub mod registry;

pub use fn_tool::FnTool;
