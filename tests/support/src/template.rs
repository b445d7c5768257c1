//! The history rules of strict chat templates (the Mistral and Llama-style Jinja templates that
//! llama.cpp and vLLM apply), checked on a Chat Completions request a fake received.
//!
//! Such templates raise "conversation roles must alternate user/assistant/user/assistant/..."
//! and reject tool results that do not answer the assistant's calls. The rules, as those
//! templates apply them:
//! - system messages only at the start;
//! - user messages and assistant answers (assistant messages without `tool_calls`) alternate,
//!   starting with a user message;
//! - tool messages only right after an assistant message with `tool_calls` (or another tool
//!   message), each answering one of its calls, and every call answered exactly once.

use std::collections::HashSet;

use serde_json::Value;

/// Checks `request["messages"]`; the error names the first broken rule and the message index.
pub fn check_strict_alternation(request: &Value) -> Result<(), String> {
    let Some(messages) = request["messages"].as_array() else {
        return Err(format!("the request has no messages array: {request}"));
    };
    let mut conversation_started = false;
    let mut expect_user = true;
    // Calls of the last assistant message with tool_calls that still wait for their result.
    let mut open_calls: Option<HashSet<String>> = None;
    for (index, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if role != "tool"
            && let Some(open) = open_calls.take()
            && !open.is_empty()
        {
            return Err(format!(
                "message {index} ({role}) follows unanswered tool calls {open:?}"
            ));
        }
        match role {
            "system" if !conversation_started => {}
            "system" => {
                return Err(format!(
                    "message {index}: a system message mid-conversation"
                ));
            }
            "user" => {
                if !expect_user {
                    return Err(format!(
                        "message {index}: two user turns without an assistant answer between \
                         them"
                    ));
                }
                expect_user = false;
            }
            "assistant" => {
                let calls: HashSet<String> = message["tool_calls"]
                    .as_array()
                    .map(|calls| {
                        calls
                            .iter()
                            .filter_map(|c| c["id"].as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                if calls.is_empty() {
                    if expect_user {
                        return Err(format!(
                            "message {index}: two assistant answers without a user turn between \
                             them"
                        ));
                    }
                    expect_user = true;
                } else {
                    open_calls = Some(calls);
                }
            }
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                let Some(open) = open_calls.as_mut() else {
                    return Err(format!(
                        "message {index}: tool result {id:?} does not follow an assistant message \
                         with tool calls"
                    ));
                };
                if !open.remove(id) {
                    return Err(format!(
                        "message {index}: tool result {id:?} answers no open call of the \
                         assistant message before it"
                    ));
                }
            }
            other => return Err(format!("message {index}: unknown role {other:?}")),
        }
        conversation_started |= role != "system";
    }
    match open_calls {
        Some(open) if !open.is_empty() => Err(format!(
            "the request ends with unanswered tool calls {open:?}"
        )),
        _ => Ok(()),
    }
}

/// Panics with the broken rule and the whole message list.
pub fn assert_strict_alternation(request: &Value) {
    if let Err(problem) = check_strict_alternation(request) {
        panic!(
            "a strict chat template would reject this request: {problem}\nmessages: {:#}",
            request["messages"]
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(id: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": "ls", "arguments": "{}"}})
    }

    #[test]
    fn a_tool_turn_between_questions_is_accepted() {
        let request = json!({"messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": null, "tool_calls": [call("1"), call("2")]},
            {"role": "tool", "tool_call_id": "2", "content": "r"},
            {"role": "tool", "tool_call_id": "1", "content": "r"},
            {"role": "assistant", "content": "answer"},
            {"role": "user", "content": "b"},
        ]});
        assert_eq!(check_strict_alternation(&request), Ok(()));
    }

    #[test]
    fn broken_histories_are_rejected() {
        let cases = [
            (
                json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]),
                "two user turns",
            ),
            (
                json!([{"role": "user", "content": "a"},
                    {"role": "assistant", "content": null, "tool_calls": [call("1")]},
                    {"role": "tool", "tool_call_id": "1", "content": "r"},
                    {"role": "user", "content": "b"}]),
                "two user turns",
            ),
            (
                json!([{"role": "user", "content": "a"},
                    {"role": "assistant", "content": null, "tool_calls": [call("1")]},
                    {"role": "user", "content": "b"}]),
                "unanswered tool calls",
            ),
            (
                json!([{"role": "user", "content": "a"},
                    {"role": "assistant", "content": null, "tool_calls": [call("1")]},
                    {"role": "tool", "tool_call_id": "9", "content": "r"}]),
                "answers no open call",
            ),
            (
                json!([{"role": "assistant", "content": "hi"}]),
                "two assistant answers",
            ),
            (
                json!([{"role": "user", "content": "a"}, {"role": "system", "content": "s"}]),
                "mid-conversation",
            ),
        ];
        for (messages, expected) in cases {
            let problem = check_strict_alternation(&json!({"messages": messages})).unwrap_err();
            assert!(
                problem.contains(expected),
                "{problem} (expected {expected})"
            );
        }
    }
}
