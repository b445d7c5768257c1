//! Whether a thread's context holds untrusted content, and from where: text anyone can shape
//! (a fetched page, an MCP tool's output, a colleague's words, an uploaded document) that may
//! try to steer the agent. Kept in the thread state (`extra.untrusted`), so a resumed or later
//! run of the thread knows; a new conversation (`/new`) starts clean.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use antler_store::state::{StateUpdate, ThreadState};

/// The `ThreadState::extra` key holding the sources.
pub const UNTRUSTED_KEY: &str = "untrusted";

/// One way untrusted content entered the thread.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaintSource {
    /// `web_fetch`, `web_search`, `mcp`, `shared_context`, `upload` or `document`.
    pub kind: String,
    /// What exactly: the URL, the MCP server, whose words or which file.
    pub detail: String,
}

impl TaintSource {
    pub fn new(kind: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            detail: detail.into(),
        }
    }

    /// `web_fetch https://…`, as a request's reason and `/state` show it.
    pub fn label(&self) -> String {
        if self.detail.is_empty() {
            self.kind.clone()
        } else {
            format!("{} {}", self.kind, self.detail)
        }
    }
}

/// The thread's untrusted sources, oldest first; empty when its context is clean.
pub fn sources(state: &ThreadState) -> Vec<TaintSource> {
    state
        .extra
        .get(UNTRUSTED_KEY)
        .and_then(|value| serde_json::from_value(value.clone()).ok())
        .unwrap_or_default()
}

/// The update that adds `new` to the thread's sources; `None` when it knows them all already.
pub fn mark(
    state: &ThreadState,
    new: impl IntoIterator<Item = TaintSource>,
) -> Option<StateUpdate> {
    let mut all = sources(state);
    let before = all.len();
    for source in new {
        if !all.contains(&source) {
            all.push(source);
        }
    }
    if all.len() == before {
        return None;
    }
    let value = serde_json::to_value(&all).unwrap_or(Value::Null);
    Some(StateUpdate {
        extra: BTreeMap::from([(UNTRUSTED_KEY.to_string(), value)]),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_accumulate_once_each() {
        let mut state = ThreadState::default();
        assert!(sources(&state).is_empty());
        let page = TaintSource::new("web_fetch", "https://example.com/");
        let update = mark(&state, [page.clone()]).expect("a new source");
        state.apply(update).expect("applies");
        assert_eq!(sources(&state), vec![page.clone()]);
        assert!(mark(&state, [page.clone()]).is_none());
        let server = TaintSource::new("mcp", "github");
        state
            .apply(mark(&state, [server.clone()]).expect("another source"))
            .expect("applies");
        assert_eq!(sources(&state), vec![page, server]);
        assert_eq!(sources(&state)[0].label(), "web_fetch https://example.com/");
    }
}
