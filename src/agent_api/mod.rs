//! The agent contracts: what the loop, the middlewares, the tools and every later extension
//! (memory, skills, MCP, sub-agents) agree on.
//!
//! This module is a leaf among the agent modules: it depends only on `config`, `messages`,
//! `state` and `model`, never on `agent` (the loop and factory), `middleware` or `tools` (the
//! built-ins). Everything that plugs into a run depends on it instead of on each other, which
//! keeps the module graph free of cycles.

pub mod approval;
mod context;
mod dropped;
mod events;
pub mod metering;
mod middleware;
mod options;
pub mod progress;
pub mod shared;
pub mod taint;
mod task;
mod tool;
pub mod tool_schema;
mod usage_kind;

pub use context::{BackgroundTasks, RunContext, RunUsers, ToolContext};
pub use dropped::DroppedMessagesSink;
pub use events::{ErrorCode, EventSink, RunEvent, RunEvents, StopReason};
pub use metering::{CallMeter, CallMeterRef, MeteredModel};
pub use middleware::{
    Anchors, Flow, HookResult, Middleware, MiddlewareError, MiddlewareRef, ModelNext, ToolNext,
    ToolResult,
};
pub use options::{ChatPlace, RunOptions};
pub use task::{CapReason, TaskEnd, TaskStatus};
pub use tool::{
    MemoSpec, Tool, ToolError, ToolOutput, ToolRef, dedupe_tools, parse_args, schema_for,
};
pub use usage_kind::UsageKind;
