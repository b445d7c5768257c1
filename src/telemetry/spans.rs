//! The spans of a run, named and attributed by the OpenTelemetry GenAI semantic conventions:
//! `invoke_agent {agent}` (a run or a sub-agent), `chat {model}` (one model call),
//! `execute_tool {tool}` (one tool call), plus the inbound message and the delivery to the
//! platform around them.
//!
//! Every constructor returns [`Span::none`] while traces are off. Attributes go to the span
//! through [`OpenTelemetrySpanExt::set_attribute`], not as `tracing` fields, so log lines only
//! gain the span names and the trace id. Content (message text, prompts, tool arguments and
//! results, user ids) is added only with `telemetry.include_content`.

use opentelemetry::trace::{Status, TraceContextExt};
use opentelemetry::{Array, StringValue, Value};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::config::AppConfig;
use crate::model::ModelRequest;
use crate::telemetry::{ROOT_TARGET, SPAN_TARGET, enabled, include_content};
use antler_store::messages::{AiMessage, FinishReason, Message, ToolCall, ToolMessage, ToolStatus};

/// The longest content attribute, in bytes (cut at a character boundary).
const MAX_CONTENT_BYTES: usize = 4096;
/// How many of the latest messages a model span's input shows.
const MAX_INPUT_MESSAGES: usize = 20;

/// An enabled span under [`SPAN_TARGET`] named `$kind` for logs and `otel.name` (the
/// formatted rest) for the collector. A span that starts a trace records its trace id as a
/// field, so every log line inside it shows the id (text and JSON).
macro_rules! otel_span {
    ($kind:literal, $($name:tt)+) => {{
        if opentelemetry::Context::current().has_active_span() {
            tracing::info_span!(target: SPAN_TARGET, $kind, otel.name = %format_args!($($name)+))
        } else {
            // The log formatter sees only roots (ROOT_TARGET): a line inside a child shows
            // its root's trace id, and children cost the formatter nothing.
            let span = tracing::info_span!(
                target: ROOT_TARGET,
                $kind,
                otel.name = %format_args!($($name)+),
                trace_id = Empty,
            );
            record_trace_id(&span);
            span
        }
    }};
}

fn record_trace_id(span: &Span) {
    let trace_id = span.context().span().span_context().trace_id();
    span.record("trace_id", tracing::field::display(trace_id));
}

/// A run of the lead agent (`agent` is the custom agent's name, or `lead`).
pub fn run(agent: &str, thread_id: &str, channel: Option<&str>, user_id: &str) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = otel_span!("invoke_agent", "invoke_agent {agent}");
    span.set_attribute("gen_ai.operation.name", "invoke_agent");
    span.set_attribute("gen_ai.agent.name", agent.to_owned());
    span.set_attribute("gen_ai.conversation.id", thread_id.to_owned());
    span.set_attribute("antler.thread_id", thread_id.to_owned());
    if let Some(channel) = channel {
        span.set_attribute("antler.channel", channel.to_owned());
    }
    if include_content() {
        span.set_attribute("user.id", user_id.to_owned());
    }
    span
}

/// A sub-agent's run: `invoke_agent {type}`, a child of the `task` tool's span.
pub fn subagent(subagent_type: &str, thread_id: &str) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = otel_span!("invoke_agent", "invoke_agent {subagent_type}");
    span.set_attribute("gen_ai.operation.name", "invoke_agent");
    span.set_attribute("gen_ai.agent.name", subagent_type.to_owned());
    span.set_attribute("gen_ai.conversation.id", thread_id.to_owned());
    span.set_attribute("antler.thread_id", thread_id.to_owned());
    span
}

/// How a run (or sub-agent) ended: `antler.stop_reason` (a `StopReason`'s name), and error
/// status when it `failed`.
pub fn record_stop(span: &Span, stop_reason: &'static str, failed: bool) {
    if span.is_disabled() {
        return;
    }
    span.set_attribute("antler.stop_reason", stop_reason);
    if failed {
        span.set_status(Status::error("the run failed"));
    }
}

/// One model call: `chat {model}`, with the provider and the requested model from the
/// config entry `model_name` names.
pub fn model_call(model_name: &str, config: &AppConfig, request: &ModelRequest) -> Span {
    if !enabled() {
        return Span::none();
    }
    let entry = config.model(model_name);
    let requested = entry.map_or(model_name, |entry| entry.model.as_str());
    let span = otel_span!("chat", "chat {requested}");
    span.set_attribute("gen_ai.operation.name", "chat");
    span.set_attribute("gen_ai.request.model", requested.to_owned());
    if let Some(entry) = entry {
        let provider = crate::model::probe::provider_name(&entry.provider);
        span.set_attribute("gen_ai.provider.name", provider);
        span.set_attribute("gen_ai.system", provider);
    }
    if include_content() {
        let from = request.messages.len().saturating_sub(MAX_INPUT_MESSAGES);
        let input = serde_json::to_string(&request.messages[from..]).unwrap_or_default();
        span.set_attribute("gen_ai.input.messages", truncated(input));
    }
    span
}

/// What the model answered: its model, token counts and finish reason (and text, with content).
pub fn record_model_answer(span: &Span, answer: &Result<AiMessage, crate::model::ModelError>) {
    if span.is_disabled() {
        return;
    }
    let message = match answer {
        Ok(message) => message,
        Err(error) => {
            span.set_status(Status::error(error_kind(error)));
            return;
        }
    };
    if let Some(model) = &message.model {
        span.set_attribute("gen_ai.response.model", model.to_string());
    }
    if let Some(usage) = &message.usage {
        span.set_attribute("gen_ai.usage.input_tokens", tokens(usage.input_tokens));
        span.set_attribute("gen_ai.usage.output_tokens", tokens(usage.output_tokens));
    }
    if let Some(reason) = &message.finish_reason {
        let reasons = vec![StringValue::from(finish_reason(reason).to_owned())];
        span.set_attribute(
            "gen_ai.response.finish_reasons",
            Value::Array(Array::String(reasons)),
        );
    }
    if include_content() {
        let output = serde_json::to_string(&Message::Ai(message.clone())).unwrap_or_default();
        span.set_attribute("gen_ai.output.messages", truncated(output));
    }
}

/// One tool call: `execute_tool {tool}`.
pub fn tool_call(call: &ToolCall) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = otel_span!("execute_tool", "execute_tool {}", call.name);
    span.set_attribute("gen_ai.operation.name", "execute_tool");
    span.set_attribute("gen_ai.tool.name", call.name.clone());
    span.set_attribute("gen_ai.tool.call.id", call.id.clone());
    span.set_attribute("gen_ai.tool.type", "function");
    if include_content() {
        span.set_attribute(
            "gen_ai.tool.call.arguments",
            truncated(call.args.to_string()),
        );
    }
    span
}

/// The tool's answer: error status when it failed (and the result, with content).
pub fn record_tool_result(span: &Span, result: &ToolMessage) {
    if span.is_disabled() {
        return;
    }
    if result.status == ToolStatus::Error {
        span.set_status(Status::error("the tool call failed"));
    }
    if include_content() {
        span.set_attribute(
            "gen_ai.tool.call.result",
            truncated(result.content.to_string()),
        );
    }
}

/// A message a chat platform delivered: the root of its run's trace.
pub fn inbound(channel: &str, text: &str) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = otel_span!("receive", "receive {channel}");
    span.set_attribute("antler.channel", channel.to_owned());
    if include_content() {
        span.set_attribute("antler.message.text", truncated(text.to_owned()));
    }
    span
}

/// An HTTP API run request: the root of its run's trace.
pub fn api_run(route: &'static str, thread_id: &str) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = otel_span!("api_run", "POST {route}");
    span.set_attribute("antler.channel", "api");
    span.set_attribute("http.route", route);
    span.set_attribute("antler.thread_id", thread_id.to_owned());
    span
}

/// Sending an answer to the platform.
pub fn delivery(channel: &str) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = otel_span!("deliver", "deliver {channel}");
    span.set_attribute("antler.channel", channel.to_owned());
    span
}

/// The delivery failed (the reply is retried or given up by the outbox).
pub fn record_failure(span: &Span, what: &'static str) {
    if !span.is_disabled() {
        span.set_status(Status::error(what));
    }
}

fn tokens(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

fn finish_reason(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Refusal => "refusal",
        FinishReason::Other(other) => other,
    }
}

/// A model error's kind, never its text (a provider's message may quote the prompt).
fn error_kind(error: &crate::model::ModelError) -> &'static str {
    use crate::model::ModelError;
    match error {
        ModelError::Cancelled => "model call cancelled",
        _ => "model call failed",
    }
}

fn truncated(mut text: String) -> String {
    if text.len() > MAX_CONTENT_BYTES {
        let mut cut = MAX_CONTENT_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// [`record_stop`] on the span the caller runs in (the run task's own span).
pub fn record_stop_current(stop_reason: &'static str, failed: bool) {
    if enabled() {
        record_stop(&Span::current(), stop_reason, failed);
    }
}

/// A span as the constructors make it, without the global "enabled" switch (unit tests run
/// under a scoped subscriber).
#[cfg(test)]
pub(crate) fn otel_span_for_test(name: &str) -> Span {
    otel_span!("test", "{name}")
}
