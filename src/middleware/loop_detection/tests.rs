//! Unit tests of the loop detector's bookkeeping (the acceptance cases live in `tests/it/chain.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::config::AppConfig;
use crate::config::schema::ToolFreqOverride;
use antler_store::messages::ToolCall;

fn ai_with(calls: &[(&str, serde_json::Value)]) -> AiMessage {
    AiMessage {
        id: "ai-1".into(),
        tool_calls: calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| ToolCall {
                id: format!("c{i}"),
                name: name.to_string(),
                args: args.clone(),
                args_error: None,
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn frequency_warns_once_then_hard_stops() {
    let mut overrides = BTreeMap::new();
    overrides.insert(
        "web_search".to_string(),
        ToolFreqOverride {
            warn: 2,
            hard_limit: 3,
        },
    );
    let mw = LoopDetectionMiddleware::new(LoopDetectionConfig {
        tool_freq_overrides: overrides,
        ..Default::default()
    });
    // Different queries: the hash layer never fires, only the per-tool count does.
    assert!(
        mw.observe("t", &ai_with(&[("web_search", json!({"query": "a"}))]))
            .is_none()
    );
    assert!(
        mw.observe("t", &ai_with(&[("web_search", json!({"query": "b"}))]))
            .is_none()
    );
    let pending = mw.take_pending("t");
    assert_eq!(pending.len(), 1);
    assert!(pending[0].contains("You have called web_search 2 times"));
    let stop = mw
        .observe("t", &ai_with(&[("web_search", json!({"query": "c"}))]))
        .unwrap();
    assert!(stop.contains("[FORCED STOP] Tool web_search was called 3 times"));
}

#[test]
fn threads_are_tracked_separately_and_bounded() {
    let mw = LoopDetectionMiddleware::new(LoopDetectionConfig {
        max_tracked_threads: 2,
        ..Default::default()
    });
    let ai = ai_with(&[("ls", json!({"path": "/"}))]);
    for _ in 0..2 {
        mw.observe("a", &ai);
    }
    mw.observe("b", &ai);
    mw.observe("c", &ai); // evicts "a", the least recently used
    let mut threads = mw.threads.lock().unwrap();
    assert_eq!(threads.len(), 2);
    assert!(threads.get("a").is_none());
}

#[tokio::test]
async fn after_agent_drops_unseen_warnings() {
    let mw = LoopDetectionMiddleware::new(LoopDetectionConfig::default());
    let ai = ai_with(&[("ls", json!({"path": "/"}))]);
    for _ in 0..3 {
        mw.observe("t", &ai);
    }
    let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
    mw.after_agent(&ThreadState::default(), &ctx).await.unwrap();
    assert!(mw.take_pending("t").is_empty());
}
