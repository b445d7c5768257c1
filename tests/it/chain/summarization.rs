//! Summarization on a long scripted conversation: the older part is summarized by the summary
//! model and replaced by one summary message, AI/tool pairs stay together, the next model call
//! sees summary + recent messages, the dropped-messages sink (memory) hears about the dropped
//! part first, and plan mode re-shows the todo list whose `write_todos` call went away.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;

use antler::agent::{AgentOptions, Feature, RuntimeFeatures, create_agent};
use antler::agent_api::{DroppedMessagesSink, RunContext, StopReason};
use antler::config::AppConfig;
use antler::config::summarization::{ContextMeasure, ContextSize};
use antler::middleware::summarization::{SUMMARY_NAME, SUMMARY_PREFIX};
use antler::middleware::todo::TODO_REMINDER_NAME;
use antler::model::{ModelErrorKind, ScriptedModel, ScriptedTurn};
use antler_store::messages::{AiMessage, Message, ToolCall, ToolMessage};
use antler_store::state::{ThreadState, Todo, TodoStatus};

#[derive(Default)]
struct Recorder(Mutex<Vec<Vec<Message>>>);

#[async_trait]
impl DroppedMessagesSink for Recorder {
    async fn dropped(&self, _ctx: &RunContext, messages: &[Message]) {
        self.0.lock().unwrap().push(messages.to_vec());
    }
}

fn call(id: &str, name: &str) -> (Message, Message) {
    let call = ToolCall {
        id: id.into(),
        name: name.into(),
        args: json!({"q": id}),
        args_error: None,
    };
    let ai = Message::Ai(AiMessage {
        tool_calls: vec![call.clone()],
        ..Default::default()
    });
    let result = Message::Tool(ToolMessage::success(&call, format!("result of {id}")));
    (ai, result)
}

/// Ten messages: two early turns (one wrote the todo list), then a tool round trip.
fn long_thread() -> ThreadState {
    let (todo_call, todo_result) = call("c-todo", "write_todos");
    let (lookup_call, lookup_result) = call("c-lookup", "lookup");
    ThreadState {
        messages: vec![
            Message::human("q1 about apples"),
            Message::ai("a1 apples are red"),
            Message::human("q2 about pears"),
            todo_call,
            todo_result,
            Message::ai("a2 pears are green"),
            Message::human("q3 about plums"),
            lookup_call,
            lookup_result,
            Message::ai("a3 plums are purple"),
        ]
        .into(),
        todos: Some(vec![Todo {
            content: "compare the fruit".into(),
            status: TodoStatus::Completed,
            active_form: None,
        }]),
        ..Default::default()
    }
}

fn config() -> Arc<AppConfig> {
    let mut config = AppConfig::default();
    config.summarization.enabled = true;
    config.summarization.trigger = vec![ContextSize {
        measure: ContextMeasure::Messages,
        value: 8.0,
    }];
    config.summarization.keep = ContextSize {
        measure: ContextMeasure::Messages,
        value: 3.0,
    };
    Arc::new(config)
}

fn agent(
    main: Arc<ScriptedModel>,
    summarizer: Arc<ScriptedModel>,
    sink: Arc<Recorder>,
) -> antler::agent::Agent {
    let features = RuntimeFeatures {
        summarization: Feature::BuiltIn,
        ..RuntimeFeatures::none()
    };
    create_agent(
        main,
        Vec::new(),
        AgentOptions {
            features: Some(features),
            plan_mode: true,
            config: Some(config()),
            summary_model: Some(summarizer),
            dropped_messages: Some(sink),
            ..Default::default()
        },
    )
    .unwrap()
}

#[tokio::test]
async fn a_long_conversation_is_summarized_keeping_pairs_and_recent_messages() {
    let main = Arc::new(ScriptedModel::text("main", "a4 figs"));
    let summarizer = Arc::new(ScriptedModel::text(
        "summarizer",
        "Fruit talk: apples, pears.",
    ));
    let sink = Arc::new(Recorder::default());
    let agent = agent(main.clone(), summarizer.clone(), sink.clone());
    let ctx = RunContext::new("t", "u", config());
    let before = long_thread();
    let outcome = agent
        .run(before.clone(), vec![Message::human("q4 about figs")], &ctx)
        .await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);

    // Keep 3 would cut between the lookup call and its result: the cut moves back to the call.
    let dropped = sink.0.lock().unwrap().clone();
    assert_eq!(dropped.len(), 1, "the sink hears once");
    let dropped_ids: Vec<&str> = dropped[0].iter().map(Message::id).collect();
    let older_ids: Vec<&str> = before.messages[..7].iter().map(Message::id).collect();
    assert_eq!(dropped_ids, older_ids);

    let prompt = summarizer.requests()[0].messages[0].content().to_string();
    assert!(prompt.contains("Human: q1 about apples"), "{prompt}");
    assert!(prompt.contains("write_todos"), "{prompt}");
    assert!(
        !prompt.contains("a3 plums"),
        "kept messages are not summarized: {prompt}"
    );

    let sent = &main.requests()[0].messages;
    let texts: Vec<&str> = sent.iter().map(Message::content).collect();
    assert!(
        !texts.iter().any(|t| t.contains("apples are red")),
        "{texts:?}"
    );
    let summary = sent
        .iter()
        .filter_map(Message::as_human)
        .find(|h| h.name.as_deref() == Some(SUMMARY_NAME))
        .expect("the summary reaches the model");
    assert_eq!(
        summary.content,
        format!("{SUMMARY_PREFIX}Fruit talk: apples, pears.")
    );
    let lookup = sent
        .iter()
        .position(|m| m.as_ai().is_some_and(|ai| !ai.tool_calls.is_empty()))
        .expect("the lookup call is kept");
    assert!(
        sent[lookup + 1].as_tool().is_some(),
        "its result follows it"
    );
    assert!(texts.contains(&"a3 plums are purple"), "{texts:?}");
    // The reminder follows the question (merged into one user turn for the provider).
    let question = texts
        .iter()
        .find(|t| t.starts_with("q4 about figs"))
        .expect("the question is sent");
    assert_eq!(
        texts
            .iter()
            .map(|t| t
                .matches("Your todo list from earlier is no longer visible")
                .count())
            .sum::<usize>(),
        1,
        "the todo list is re-shown exactly once once its write_todos call is summarized away"
    );
    assert!(
        question.contains("- [completed] compare the fruit"),
        "{question}"
    );
    let reminders = outcome
        .state
        .messages
        .iter()
        .filter_map(Message::as_human)
        .filter(|h| h.name.as_deref() == Some(TODO_REMINDER_NAME))
        .count();
    assert_eq!(reminders, 1, "one persisted reminder");

    let state = &outcome.state;
    assert_eq!(
        state.summary_text.as_deref(),
        Some("Fruit talk: apples, pears.")
    );
    assert_eq!(
        state.messages.len(),
        7,
        "summary + 4 kept + the todo reminder + the answer"
    );
    assert_eq!(
        state.messages[0].as_human().unwrap().name.as_deref(),
        Some(SUMMARY_NAME)
    );
    assert_eq!(state.messages[1].id(), before.messages[7].id());
}

#[tokio::test]
async fn a_failing_summary_model_leaves_the_thread_as_it_was() {
    let main = Arc::new(ScriptedModel::text("main", "a4 figs"));
    let summarizer = Arc::new(ScriptedModel::new(
        "summarizer",
        [ScriptedTurn::Fail(ModelErrorKind::Status(500))],
    ));
    let agent = agent(main.clone(), summarizer, Arc::new(Recorder::default()));
    let ctx = RunContext::new("t", "u", config());
    let outcome = agent
        .run(long_thread(), vec![Message::human("q4 about figs")], &ctx)
        .await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.state.messages.len(), 12, "nothing dropped");
    assert_eq!(outcome.state.summary_text, None);
}

#[tokio::test]
async fn the_summarized_thread_is_what_a_reload_reads() {
    use antler_store::{Checkpointer, MemoryStore, ThreadStore};
    let threads = ThreadStore::new(Arc::new(MemoryStore::new())).unwrap();
    threads
        .create("u", Some("t".into()), serde_json::Map::new())
        .unwrap();
    let checkpointer: Arc<dyn Checkpointer> = Arc::new(threads.clone());
    let features = RuntimeFeatures {
        summarization: Feature::BuiltIn,
        ..RuntimeFeatures::none()
    };
    let main = Arc::new(ScriptedModel::new(
        "main",
        [
            ScriptedTurn::Text(vec!["a4 figs".into()]),
            ScriptedTurn::Text(vec!["a5 kiwis".into()]),
        ],
    ));
    let summarizer = Arc::new(ScriptedModel::text("summarizer", "Fruit so far."));
    let agent = create_agent(
        main,
        Vec::new(),
        AgentOptions {
            features: Some(features),
            config: Some(config()),
            summary_model: Some(summarizer),
            checkpointer: Some(checkpointer.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let ctx = RunContext::new("t", "u", config());
    let outcome = agent
        .run(long_thread(), vec![Message::human("q4 about figs")], &ctx)
        .await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let stored = checkpointer.latest("t").await.unwrap().unwrap().state;
    assert_eq!(stored.messages, outcome.state.messages);
    assert_eq!(stored.summary_text.as_deref(), Some("Fruit so far."));

    // The next turn continues from the stored, summarized thread (below the trigger again).
    let outcome = agent
        .run(stored, vec![Message::human("q5 about kiwis")], &ctx)
        .await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let stored = checkpointer.latest("t").await.unwrap().unwrap().state;
    assert_eq!(stored.messages.len(), 8);
    assert_eq!(stored.messages, outcome.state.messages);
}
