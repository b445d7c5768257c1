//! Sub-agents: the `task` tool the lead agent delegates with, the types it may name, and the
//! executor that runs each one as an agent of its own.
//!
//! A `task` call resolves its type ([`registry`]), builds an agent with the type's prompt,
//! tools and model, and runs it on a task owned by the lead run ([`executor`]): the lead's
//! sandbox, thread data, user and configuration snapshot, its own messages, a timeout enforced
//! by cancelling it, and cancelled when the lead run is. Progress (`task_started`,
//! `task_running`, and one of `task_completed` / `task_failed` / `task_timed_out` /
//! `task_cancelled`) goes to the lead run's events; the result comes back as the tool message
//! ([`report`]). How many run is `SubagentLimitMiddleware`'s business.

pub mod executor;
pub mod registry;
pub mod report;
pub mod task_tool;

pub use executor::{SubagentRunner, SubagentTasks, TaskRequest};
pub use registry::{SubagentRegistry, SubagentSpec};
pub use report::TaskReport;
pub use task_tool::TaskTool;
