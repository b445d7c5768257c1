//! Scripted answers shared by the fake LLM servers: one [`Reply`] is consumed per request.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

/// One scripted answer of a fake LLM server.
///
/// The same script renders as OpenAI Chat Completions chunks or Anthropic Messages events,
/// depending on which fake serves it.
#[derive(Clone, Debug)]
pub struct Reply {
    pub(crate) body: ReplyBody,
    pub(crate) usage: (u64, u64),
    pub(crate) finish: Option<String>,
    pub(crate) split_args: usize,
    pub(crate) delay: Duration,
    pub(crate) reasoning: Option<String>,
    /// Text chunks streamed before the reply waits for the gate, and the gate.
    pub(crate) hold: Option<(usize, Gate)>,
}

/// What a test opens to let a held reply ([`Reply::hold_after`]) finish: a model call stays in
/// flight for exactly as long as the test needs, instead of a delay that a loaded machine may
/// outrun. A gate never opened holds the reply until the client goes away.
#[derive(Clone, Debug)]
pub struct Gate(Arc<watch::Sender<bool>>);

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    pub fn new() -> Self {
        Self(Arc::new(watch::Sender::new(false)))
    }

    /// Lets every reply held on this gate go on (now and from now on).
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    pub fn is_open(&self) -> bool {
        *self.0.borrow()
    }

    pub(crate) async fn opened(&self) {
        let mut open = self.0.subscribe();
        // The sender lives as long as `self`: the wait ends only when the gate opens.
        let _ = open.wait_for(|open| *open).await;
    }
}

#[derive(Clone, Debug)]
pub(crate) enum ReplyBody {
    Stream {
        chunks: Vec<String>,
        calls: Vec<(String, Value)>,
        end: StreamEnd,
    },
    Status {
        status: u16,
        body: Option<String>,
        retry_after: Option<u64>,
        retry_after_ms: Option<u64>,
        location: Option<String>,
    },
}

/// How a streamed answer ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// Finish reason, usage and the terminator (`[DONE]` / `message_stop`).
    Complete,
    /// A chunk that is not JSON, then the connection closes.
    Malformed,
    /// A provider error frame, then the connection closes.
    Error,
    /// The connection closes without any finish or terminator.
    Truncated,
}

impl Reply {
    fn stream(chunks: Vec<String>, calls: Vec<(String, Value)>, end: StreamEnd) -> Self {
        Self {
            body: ReplyBody::Stream { chunks, calls, end },
            usage: (10, 5),
            finish: None,
            split_args: 1,
            delay: Duration::ZERO,
            reasoning: None,
            hold: None,
        }
    }

    /// A text answer streamed in one chunk.
    pub fn text(text: impl Into<String>) -> Self {
        Self::chunks([text.into()])
    }

    /// A text answer streamed as the given chunks.
    pub fn chunks<S: Into<String>>(chunks: impl IntoIterator<Item = S>) -> Self {
        let chunks = chunks.into_iter().map(Into::into).collect();
        Self::stream(chunks, Vec::new(), StreamEnd::Complete)
    }

    /// One tool call (finish reason `tool_calls` / `tool_use`).
    pub fn tool_call(name: impl Into<String>, args: Value) -> Self {
        Self::tool_calls(vec![(name.into(), args)])
    }

    /// Parallel tool calls, in order.
    pub fn tool_calls(calls: Vec<(String, Value)>) -> Self {
        Self::stream(Vec::new(), calls, StreamEnd::Complete)
    }

    /// An HTTP error answer with this status and a provider-style JSON error body.
    pub fn status(status: u16) -> Self {
        Self {
            body: ReplyBody::Status {
                status,
                body: None,
                retry_after: None,
                retry_after_ms: None,
                location: None,
            },
            ..Self::chunks(Vec::<String>::new())
        }
    }

    /// A text chunk, then a chunk that is not valid JSON, then the connection closes.
    pub fn malformed_chunk() -> Self {
        Self::stream(vec!["partial".into()], Vec::new(), StreamEnd::Malformed)
    }

    /// A text chunk, then an in-stream provider error (`data: {"error":…}` / `event: error`).
    pub fn mid_stream_error() -> Self {
        Self::stream(vec!["partial".into()], Vec::new(), StreamEnd::Error)
    }

    /// The chunks, then the connection closes with no finish reason and no terminator.
    pub fn truncated<S: Into<String>>(chunks: impl IntoIterator<Item = S>) -> Self {
        let chunks = chunks.into_iter().map(Into::into).collect();
        Self::stream(chunks, Vec::new(), StreamEnd::Truncated)
    }

    /// The chunks with `delay` before every frame (for cancellation and timeout tests).
    pub fn slow<S: Into<String>>(chunks: impl IntoIterator<Item = S>, delay: Duration) -> Self {
        Self {
            delay,
            ..Self::chunks(chunks)
        }
    }

    /// A safety stop: Anthropic `stop_reason: refusal`, OpenAI `finish_reason: content_filter`.
    pub fn refusal() -> Self {
        Self::chunks(Vec::<String>::new()).finish("refusal")
    }

    /// Text streamed before the tool calls of this reply.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        if let ReplyBody::Stream { chunks, .. } = &mut self.body {
            chunks.push(text.into());
        }
        self
    }

    /// Waits `delay` before every frame of this reply (a slow model, whatever the reply holds).
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Streams the first `chunks` text chunks (none: only the stream's opening), then waits
    /// until `gate` opens before the rest: a turn in flight until the test says otherwise.
    pub fn hold_after(mut self, chunks: usize, gate: &Gate) -> Self {
        self.hold = Some((chunks, gate.clone()));
        self
    }

    /// The frame index the stream waits at, given where the text chunks' frames start and
    /// how many there are.
    pub(crate) fn hold_at(
        &self,
        first_chunk_frame: usize,
        chunk_count: usize,
    ) -> Option<(usize, Gate)> {
        self.hold
            .as_ref()
            .map(|(before, gate)| (first_chunk_frame + (*before).min(chunk_count), gate.clone()))
    }

    /// Reasoning streamed before the answer (`reasoning_content` / a signed thinking block).
    pub fn thinking(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Splits every tool call's JSON arguments over `fragments` chunks.
    pub fn split_args(mut self, fragments: usize) -> Self {
        self.split_args = fragments.max(1);
        self
    }

    /// Reported token usage (default 10 in, 5 out).
    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = (input_tokens, output_tokens);
        self
    }

    /// Overrides the finish reason. OpenAI names (`stop`, `length`, `tool_calls`) are translated
    /// for Anthropic; any other string is sent as-is.
    pub fn finish(mut self, reason: impl Into<String>) -> Self {
        self.finish = Some(reason.into());
        self
    }

    /// For [`Reply::status`]: a `Retry-After` header in seconds.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        if let ReplyBody::Status { retry_after, .. } = &mut self.body {
            *retry_after = Some(seconds);
        }
        self
    }

    /// For [`Reply::status`]: a `retry-after-ms` header (OpenAI's finer-grained hint).
    pub fn retry_after_ms(mut self, millis: u64) -> Self {
        if let ReplyBody::Status { retry_after_ms, .. } = &mut self.body {
            *retry_after_ms = Some(millis);
        }
        self
    }

    /// For [`Reply::status`]: a `Location` header (a redirect's target).
    pub fn location(mut self, url: impl Into<String>) -> Self {
        if let ReplyBody::Status { location, .. } = &mut self.body {
            *location = Some(url.into());
        }
        self
    }

    /// For [`Reply::status`]: the exact response body instead of the provider-style JSON error.
    pub fn body(mut self, text: impl Into<String>) -> Self {
        if let ReplyBody::Status { body, .. } = &mut self.body {
            *body = Some(text.into());
        }
        self
    }
}

/// Splits `text` into `parts` pieces of roughly equal size, on char boundaries.
pub(crate) fn split_text(text: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if parts <= 1 || chars.is_empty() {
        return vec![text.to_string()];
    }
    let size = chars.len().div_ceil(parts).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_text_covers_the_whole_string() {
        let parts = split_text(r#"{"city":"Zürich"}"#, 5);
        assert_eq!(parts.len(), 5);
        assert_eq!(parts.concat(), r#"{"city":"Zürich"}"#);
        assert_eq!(split_text("ab", 1), vec!["ab".to_string()]);
    }
}
