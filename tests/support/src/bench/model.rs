//! The benchmarks' model: a fake OpenAI endpoint that answers every turn with a text naming the
//! turn's marker, streamed over a chosen time, so each reply can be matched to its question.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{FakeOpenAi, Reply};

/// The answer the model gives to the question carrying `marker`.
pub fn answer_for(marker: &str) -> String {
    format!("Answer to {marker} is here.")
}

/// The marker (`q<digits>x<digits>`) in the newest user message of a chat-completions body.
pub fn marker_of(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    let last = messages.iter().rev().find(|m| m["role"] == "user")?;
    let text = match &last["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => return None,
    };
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .find(|word| is_marker(word))
        .map(str::to_string)
}

fn is_marker(word: &str) -> bool {
    let Some(rest) = word.strip_prefix('q') else {
        return false;
    };
    let Some((a, b)) = rest.split_once('x') else {
        return false;
    };
    !a.is_empty()
        && !b.is_empty()
        && a.bytes().all(|c| c.is_ascii_digit())
        && b.bytes().all(|c| c.is_ascii_digit())
}

/// The fake model of a benchmark, and when each marker first reached it.
pub struct EchoModel {
    fake: FakeOpenAi,
    first_calls: Arc<Mutex<HashMap<String, Instant>>>,
    /// Run calls by marker: a delivery or turn run twice shows here as 2.
    calls_by_marker: Arc<Mutex<HashMap<String, usize>>>,
}

impl EchoModel {
    /// For `models[].base_url`.
    pub fn base_url(&self) -> String {
        self.fake.base_url()
    }

    /// Model calls so far (a run repeated after a crash calls again).
    pub fn calls(&self) -> usize {
        self.fake.responded()
    }

    /// When the daemon first asked the model about `marker`.
    pub fn first_call(&self, marker: &str) -> Option<Instant> {
        self.first_calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(marker)
            .copied()
    }

    /// How many times the daemon asked the model about `marker` (title and memory calls are
    /// answered apart and not counted).
    pub fn calls_for(&self, marker: &str) -> usize {
        self.calls_by_marker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(marker)
            .copied()
            .unwrap_or(0)
    }
}

/// A fake model answering every turn with [`answer_for`] its marker, streamed in five chunks
/// spread over `stream_over` (the marker arrives in the third, so a preview cut short never
/// reads as the whole answer).
pub async fn echo_model(stream_over: Duration) -> EchoModel {
    let fake = FakeOpenAi::start().await;
    let first_calls: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let calls_by_marker: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let seen = first_calls.clone();
    let counted = calls_by_marker.clone();
    fake.respond_with(move |body| {
        let marker = marker_of(body).unwrap_or_else(|| "unmarked".into());
        *counted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(marker.clone())
            .or_default() += 1;
        seen.lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(marker.clone())
            .or_insert_with(Instant::now);
        let chunks = [
            "Answer ".to_string(),
            "to ".into(),
            format!("{marker} "),
            "is ".into(),
            "here.".into(),
        ];
        // Role frame, the chunks, finish, usage and [DONE] each wait the same share.
        let frames = chunks.len() as u32 + 4;
        Reply::slow(chunks, stream_over / frames)
    });
    EchoModel {
        fake,
        first_calls,
        calls_by_marker,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_marker_comes_from_the_newest_user_message() {
        let body = json!({"messages": [
            {"role": "system", "content": "q1x1 in the prompt"},
            {"role": "user", "content": "first q7x1"},
            {"role": "assistant", "content": "Answer to q7x1 is here."},
            {"role": "user", "content": [{"type": "text", "text": "[Ann] then q7x2, please"}]},
        ]});
        assert_eq!(marker_of(&body).as_deref(), Some("q7x2"));
        assert_eq!(
            marker_of(&json!({"messages": [{"role": "user", "content": "qx1 q1x"}]})),
            None
        );
        assert_eq!(answer_for("q7x2"), "Answer to q7x2 is here.");
    }
}
