//! The built-in middlewares, one file each. The `Middleware` contract they implement lives in
//! [`crate::agent_api`]; their order is data in `agent::features`.

pub mod clarification;
pub mod dangling_tool_call;
pub mod dynamic_context;
pub mod guardrail;
pub mod length_finish_reason;
pub mod loop_detection;
pub mod safety_finish_reason;
pub mod sandbox;
pub mod sender_names;
pub mod subagent_limit;
pub mod summarization;
pub mod system_message_coalescing;
pub mod taint;
pub mod terminal_response;
pub mod thread_data;
pub mod title;
pub mod todo;
pub mod token_budget;
pub mod token_usage;
pub mod tool_error_handling;
pub mod uploads;
pub mod view_image;

pub(crate) mod support;

pub use clarification::{AskClarificationTool, ClarificationMiddleware};
pub use dangling_tool_call::DanglingToolCallMiddleware;
pub use dynamic_context::DynamicContextMiddleware;
pub use guardrail::{AllowlistProvider, Decision, GuardrailMiddleware, GuardrailProvider};
pub use length_finish_reason::ModelLengthFinishReasonMiddleware;
pub use loop_detection::LoopDetectionMiddleware;
pub use safety_finish_reason::SafetyFinishReasonMiddleware;
pub use sandbox::SandboxMiddleware;
pub use subagent_limit::SubagentLimitMiddleware;
pub use summarization::SummarizationMiddleware;
pub use system_message_coalescing::SystemMessageCoalescingMiddleware;
pub use taint::TaintMiddleware;
pub use terminal_response::TerminalResponseMiddleware;
pub use thread_data::ThreadDataMiddleware;
pub use title::TitleMiddleware;
pub use todo::{TodoMiddleware, WriteTodosTool};
pub use token_budget::TokenBudgetMiddleware;
pub use token_usage::TokenUsageMiddleware;
pub use tool_error_handling::ToolErrorHandlingMiddleware;
pub use uploads::UploadsMiddleware;
pub use view_image::ViewImageMiddleware;
