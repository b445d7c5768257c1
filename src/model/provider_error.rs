//! A provider's error body read for what it says: its message (OpenAI's `error.message`,
//! Anthropic's `error.message`, vLLM's and Ollama's `message`/`error`, FastAPI's `detail`)
//! instead of the raw JSON, and whether it means the model id is unknown (OpenAI's
//! `model_not_found`, Anthropic's `not_found_error`, "model … not found / does not exist").

use serde_json::Value;

/// Longest provider message kept for a chat reply or a log line.
const MAX_MESSAGE_CHARS: usize = 200;

/// What an error body says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProviderError {
    /// The provider's own message, shortened; `None` for an empty body or an HTML page.
    pub(crate) message: Option<String>,
    /// The body says the requested model does not exist.
    pub(crate) model_not_found: bool,
}

/// Reads an error body (already stripped of the API key).
pub(crate) fn read(body: &str) -> ProviderError {
    let body = body.trim();
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        let html = body.starts_with('<');
        return ProviderError {
            message: (!body.is_empty() && !html).then(|| shorten(body)),
            model_not_found: says_model_not_found(body),
        };
    };
    let error = &json["error"];
    let message = [
        &error["message"],
        error,
        &json["message"],
        &json["detail"],
        &error["type"],
    ]
    .into_iter()
    .find_map(|value| value.as_str().filter(|text| !text.trim().is_empty()))
    .map(|text| shorten(text.trim()));
    let code = |value: &Value| value.as_str().map(str::to_ascii_lowercase);
    let model_not_found = code(&error["code"]).as_deref() == Some("model_not_found")
        || code(&error["type"]).as_deref() == Some("not_found_error")
        || message.as_deref().is_some_and(says_model_not_found);
    ProviderError {
        message,
        model_not_found,
    }
}

fn says_model_not_found(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.contains("model")
        && [
            "not found",
            "does not exist",
            "not exist",
            "no such model",
            "unknown model",
            "not available",
            "try pulling it",
        ]
        .iter()
        .any(|phrase| text.contains(phrase))
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= MAX_MESSAGE_CHARS {
        return text.to_string();
    }
    text.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "…"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_of_real_providers() {
        let cases: &[(&str, Option<&str>, bool)] = &[
            // OpenAI
            (
                r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
                Some("The model `gpt-9` does not exist or you do not have access to it."),
                true,
            ),
            (
                r#"{"error":{"message":"Incorrect API key provided: ***.","type":"invalid_request_error","code":"invalid_api_key"}}"#,
                Some("Incorrect API key provided: ***."),
                false,
            ),
            // Ollama
            (
                r#"{"error":{"message":"model \"qwen9\" not found, try pulling it first","type":"api_error","param":null,"code":null}}"#,
                Some("model \"qwen9\" not found, try pulling it first"),
                true,
            ),
            // vLLM
            (
                r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#,
                Some("The model `x` does not exist."),
                true,
            ),
            // Anthropic
            (
                r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}"#,
                Some("model: claude-9"),
                true,
            ),
            (
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                Some("Overloaded"),
                false,
            ),
            // A string error, FastAPI's detail, plain text, HTML, nothing.
            (r#"{"error":"bad gateway"}"#, Some("bad gateway"), false),
            (r#"{"detail":"Not Found"}"#, Some("Not Found"), false),
            ("upstream timed out", Some("upstream timed out"), false),
            ("<html><body>502 Bad Gateway</body></html>", None, false),
            ("", None, false),
        ];
        for (body, message, not_found) in cases {
            let read = read(body);
            assert_eq!(read.message.as_deref(), *message, "{body}");
            assert_eq!(read.model_not_found, *not_found, "{body}");
        }
    }

    #[test]
    fn long_messages_are_shortened() {
        let body = format!(r#"{{"error":{{"message":"{}"}}}}"#, "x".repeat(1000));
        let message = read(&body).message.unwrap();
        assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS + 1);
    }
}
