//! How far a question the daemon asked on someone's behalf (a schedule's slot, a webhook
//! delivery) got in its thread, found by the mark on its human message: after a restart it is
//! asked, continued without new input, or recorded as answered, never asked twice.

use antler_store::messages::Message;
use antler_store::state::ThreadState;
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Its human message is not in the thread: the run never started.
    NotStarted,
    /// Its human message is there without a final answer after it: the run continues.
    Asked,
    /// Answered already.
    Answered,
}

/// Where the human message whose `meta.extra[meta_key]` is `mark` stands in `state`. By its
/// mark, not its id: the first message of a thread gives its id to the date reminder placed
/// before it (`DynamicContextMiddleware`).
pub fn question_progress(state: &ThreadState, meta_key: &str, mark: &str) -> Progress {
    let messages: Vec<&Message> = state.messages.iter().collect();
    let Some(at) = messages.iter().position(|m| {
        matches!(m, Message::Human(h) if h.meta.extra.get(meta_key).and_then(Value::as_str) == Some(mark))
    }) else {
        return Progress::NotStarted;
    };
    let answered = messages[at + 1..]
        .iter()
        .any(|m| matches!(m, Message::Ai(ai) if ai.tool_calls.is_empty()));
    if answered {
        Progress::Answered
    } else {
        Progress::Asked
    }
}
