//! `ClarificationMiddleware` and the `ask_clarification` tool: the model asks, the run waits.
//!
//! The tool is never executed: the middleware intercepts the call, answers it with the formatted
//! question (plus a `human_input_request` artifact for surfaces) and ends the run. The user's
//! next message resumes the same thread with the question in its history.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::agent_api::{MemoSpec, Middleware, ToolNext, ToolResult};
use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, ToolRef, schema_for};
use antler_store::messages::{ToolCall, ToolMessage};

pub const ASK_CLARIFICATION: &str = "ask_clarification";
pub const NON_INTERACTIVE_ANSWER: &str = "No one can answer questions in this run (it is non-interactive). Do not ask again: proceed with your best judgement, state the assumptions you made, and finish the task.";

/// What kind of question is asked; decides the icon shown to the user.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClarificationType {
    #[default]
    MissingInfo,
    AmbiguousRequirement,
    ApproachChoice,
    RiskConfirmation,
    Suggestion,
}

impl ClarificationType {
    pub fn icon(self) -> &'static str {
        match self {
            Self::MissingInfo => "❓",
            Self::AmbiguousRequirement => "🤔",
            Self::ApproachChoice => "🔀",
            Self::RiskConfirmation => "⚠️",
            Self::Suggestion => "💡",
        }
    }

    fn parse(raw: Option<&Value>) -> Self {
        raw.and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }
}

/// Arguments of `ask_clarification`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct ClarificationArgs {
    /// The question to ask the user. Be specific.
    pub question: String,
    /// Why you are asking.
    pub clarification_type: ClarificationType,
    /// Optional context shown before the question (what you know, why it matters).
    #[serde(default)]
    pub context: Option<String>,
    /// Optional answer choices, shown as a numbered list.
    #[serde(default)]
    pub options: Option<Vec<String>>,
}

/// A question ready to show: the user-facing text and the structured payload.
#[derive(Clone, Debug, PartialEq)]
pub struct Clarification {
    pub text: String,
    pub payload: Value,
}

/// Formats a (leniently read) `ask_clarification` call: context line, question, numbered options.
pub fn format_clarification(args: &Value, request_id: &str) -> Clarification {
    let question = text_arg(args, "question");
    let context = text_arg(args, "context");
    let kind = ClarificationType::parse(args.get("clarification_type"));
    let options = normalize_options(args.get("options"));
    let icon = kind.icon();
    let mut lines = Vec::new();
    if context.is_empty() {
        lines.push(format!("{icon} {question}"));
    } else {
        lines.push(format!("{icon} {context}"));
        lines.push(format!("\n{question}"));
    }
    if !options.is_empty() {
        lines.push(String::new());
        for (i, option) in options.iter().enumerate() {
            lines.push(format!("  {}. {option}", i + 1));
        }
    }
    let mut payload = json!({
        "version": 1,
        "kind": "human_input_request",
        "source": ASK_CLARIFICATION,
        "request_id": request_id,
        "clarification_type": kind,
        "question": question,
        "input_mode": if options.is_empty() { "free_text" } else { "choice_with_other" },
    });
    if !context.is_empty() {
        payload["context"] = Value::String(context);
    }
    if !options.is_empty() {
        payload["options"] = json!(options);
    }
    Clarification {
        text: lines.join("\n"),
        payload,
    }
}

fn text_arg(args: &Value, key: &str) -> String {
    match args.get(key) {
        Some(Value::String(s)) => s.trim().to_string(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Options as a list of clean, distinct, non-blank strings. Accepts a list (of strings, numbers or
/// `{label|value|text}` objects) or that list encoded as a JSON string.
pub fn normalize_options(raw: Option<&Value>) -> Vec<String> {
    let items: Vec<Value> = match raw {
        Some(Value::Array(items)) => items.clone(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Array(items)) => items,
            _ if s.trim().is_empty() => Vec::new(),
            _ => vec![Value::String(s.clone())],
        },
        _ => Vec::new(),
    };
    let mut options: Vec<String> = Vec::new();
    for item in items {
        let text = match &item {
            Value::String(s) => s.clone(),
            Value::Object(map) => object_label(map),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        let text = strip_tags(&text).trim().to_string();
        if !text.is_empty() && !options.contains(&text) {
            options.push(text);
        }
    }
    options
}

fn object_label(map: &Map<String, Value>) -> String {
    ["label", "value", "text", "title"]
        .iter()
        .find_map(|k| map.get(*k).and_then(Value::as_str))
        .unwrap_or_default()
        .to_string()
}

/// Removes `<tag>`-looking spans so an option cannot smuggle markup into the surfaces.
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        match rest[open..].find('>') {
            Some(close) => rest = &rest[open + close + 1..],
            None => {
                rest = &rest[open..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

#[derive(Debug, Default)]
pub struct ClarificationMiddleware;

impl ClarificationMiddleware {
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl Middleware for ClarificationMiddleware {
    fn name(&self) -> &str {
        "ClarificationMiddleware"
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    fn tools(&self) -> Vec<ToolRef> {
        // Built once per process: a run's agent is built per run, and the schema is ~4 KiB.
        static TOOL: LazyLock<ToolRef> =
            LazyLock::new(|| MemoSpec::wrap(Arc::new(AskClarificationTool)));
        vec![TOOL.clone()]
    }

    async fn wrap_tool_call(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
        next: ToolNext<'_>,
    ) -> Result<ToolResult, ToolError> {
        if call.name != ASK_CLARIFICATION {
            return next.call(call, ctx).await;
        }
        if ctx.run.options.non_interactive {
            return Ok(ToolResult::message(ToolMessage::success(
                call,
                NON_INTERACTIVE_ANSWER,
            )));
        }
        let clarification = format_clarification(&call.args, &call.id);
        let mut message = ToolMessage::success(call, clarification.text);
        message.id = format!("clarification:{}", call.id).into();
        message.name = ASK_CLARIFICATION.to_string();
        message.artifact = Some(clarification.payload);
        Ok(ToolResult {
            message,
            update: Default::default(),
            end_run: true,
            parked: None,
        })
    }
}

/// The tool the model sees. Its `call` only runs when no `ClarificationMiddleware` intercepts
/// (an explicit chain without it); it then just echoes the formatted question.
#[derive(Debug, Default)]
pub struct AskClarificationTool;

#[async_trait]
impl Tool for AskClarificationTool {
    fn name(&self) -> &str {
        ASK_CLARIFICATION
    }

    fn description(&self) -> &str {
        "Ask the user a clarifying question when information is missing, the request is ambiguous, \
         several approaches are possible, or an action is risky. The run pauses until the user \
         answers. Ask before acting, not after."
    }

    fn parameters(&self) -> Value {
        schema_for::<ClarificationArgs>()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let clarification = format_clarification(&args, ctx.tool_call_id);
        Ok(ToolOutput {
            content: clarification.text,
            artifact: Some(clarification.payload),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_accept_json_strings_objects_and_drop_junk() {
        let raw = json!("[\" A \", \"B\", \"A\", \"\", \"<b>C</b>\"]");
        assert_eq!(normalize_options(Some(&raw)), ["A", "B", "C"]);
        let raw = json!([{"label": "x"}, {"value": "y"}, 3, null]);
        assert_eq!(normalize_options(Some(&raw)), ["x", "y", "3"]);
    }

    #[test]
    fn formats_context_question_and_numbered_options() {
        let args = json!({
            "question": "Which database?",
            "clarification_type": "approach_choice",
            "context": "Both work.",
            "options": ["Postgres", "SQLite"],
        });
        let c = format_clarification(&args, "call-1");
        assert_eq!(
            c.text,
            "🔀 Both work.\n\nWhich database?\n\n  1. Postgres\n  2. SQLite"
        );
        assert_eq!(c.payload["input_mode"], "choice_with_other");
        assert_eq!(c.payload["request_id"], "call-1");
        let plain = format_clarification(
            &json!({"question": "Sure?", "clarification_type": "risk_confirmation"}),
            "c",
        );
        assert_eq!(plain.text, "⚠️ Sure?");
        assert_eq!(plain.payload["input_mode"], "free_text");
    }

    #[test]
    fn schema_lists_the_documented_fields() {
        let schema = AskClarificationTool.parameters();
        let props = schema["properties"].as_object().unwrap();
        for field in ["question", "clarification_type", "context", "options"] {
            assert!(props.contains_key(field), "{field}");
        }
        let required = schema["required"].as_array().unwrap();
        assert!(required.contains(&json!("question")));
    }
}
