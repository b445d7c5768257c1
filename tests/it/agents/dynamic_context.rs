//! Integration tests: the dynamic-context middleware (reference §13.1 item 24) — the date and
//! memory reach the model once per thread, as system context apart from what people wrote, and
//! after midnight the model reads one date, the new one.

use std::sync::{Arc, Mutex};

use chrono::NaiveDate;

use antler::agent::{AgentOptions, create_agent};
use antler::agent_api::Middleware;
use antler::middleware::DynamicContextMiddleware;
use antler::middleware::dynamic_context::{
    Clock, DYNAMIC_CONTEXT_MARKER, MEMORY_HEADER, REMINDER_DATE_KEY,
};
use antler::model::{ScriptedModel, ScriptedTurn};
use antler_store::messages::Message;
use antler_store::state::{StateUpdate, ThreadState};

use super::run_ctx;

struct FixedClock(Mutex<NaiveDate>);

impl Clock for FixedClock {
    fn today(&self) -> NaiveDate {
        *self.0.lock().unwrap()
    }
}

fn date(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

fn human(id: &str, text: &str) -> Message {
    let mut message = Message::human(text);
    message.set_id(id.into());
    message
}

async fn before_agent(mw: &DynamicContextMiddleware, state: &mut ThreadState, input: Message) {
    state.apply(StateUpdate::message(input)).unwrap();
    let ctx = run_ctx("alice", Some("reviewer"));
    let result = mw.before_agent(state, &ctx).await.unwrap();
    state.apply(result.update).unwrap();
}

fn summary(state: &ThreadState) -> Vec<(String, String, String)> {
    state
        .messages
        .iter()
        .map(|m| {
            let kind = match m {
                Message::System(_) => "system",
                Message::Human(_) => "human",
                Message::Ai(_) => "ai",
                Message::Tool(_) => "tool",
            };
            (
                kind.to_string(),
                m.id().to_string(),
                m.content().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn dynamic_context_is_injected_once_and_redated_after_midnight() {
    let clock = Arc::new(FixedClock(Mutex::new(date(2026, 5, 8))));
    let memory_calls = Arc::new(Mutex::new(0));
    let counter = memory_calls.clone();
    let memory = move |user: &str, agent: Option<&str>| {
        *counter.lock().unwrap() += 1;
        Some(format!(
            "{user} prefers short answers ({})",
            agent.unwrap_or("-")
        ))
    };
    let mw = DynamicContextMiddleware::new()
        .with_clock(clock.clone())
        .with_memory(Arc::new(memory));
    let mut state = ThreadState::default();

    before_agent(&mw, &mut state, human("h1", "hello")).await;
    let first = summary(&state);
    assert_eq!(
        first,
        [
            (
                "system".into(),
                "h1".into(),
                "<system-reminder>\n<current_date>2026-05-08, Friday</current_date>\n</system-reminder>"
                    .into()
            ),
            (
                "system".into(),
                "h1__memory".into(),
                format!("<memory>\n{MEMORY_HEADER}\nalice prefers short answers (reviewer)\n</memory>")
            ),
            ("human".into(), "h1__user".into(), "hello".into()),
        ]
    );
    assert!(state.messages[0].is_hidden() && state.messages[1].is_hidden());
    assert_eq!(state.messages[0].meta().extra[DYNAMIC_CONTEXT_MARKER], true);
    assert!(state.messages[2].is_genuine_human());
    assert_eq!(state.extra[REMINDER_DATE_KEY], "2026-05-08");

    // Same day: nothing is added and memory is not reloaded.
    state
        .apply(StateUpdate::message(Message::ai("hi")))
        .unwrap();
    before_agent(&mw, &mut state, human("h2", "again")).await;
    assert_eq!(summary(&state)[..3], first[..]);
    assert_eq!(state.messages.len(), 5);
    assert_eq!(state.messages[4].id(), "h2");
    assert_eq!(*memory_calls.lock().unwrap(), 1);

    // Midnight: the reminder is rewritten in place with the new date, nothing else changes.
    *clock.0.lock().unwrap() = date(2026, 5, 9);
    state
        .apply(StateUpdate::message(Message::ai("ok")))
        .unwrap();
    let before_midnight = summary(&state);
    before_agent(&mw, &mut state, human("h3", "next day")).await;
    let after = summary(&state);
    assert_eq!(after.len(), 7);
    assert_eq!(
        after[0],
        (
            "system".into(),
            "h1".into(),
            "<system-reminder>\n<current_date>2026-05-09, Saturday</current_date>\n</system-reminder>"
                .into()
        )
    );
    assert_eq!(
        after[1..6],
        before_midnight[1..],
        "the rest stays untouched"
    );
    assert_eq!(after[6], ("human".into(), "h3".into(), "next day".into()));
    assert_eq!(
        state.messages[0].meta().extra[REMINDER_DATE_KEY],
        "2026-05-09"
    );
    assert_eq!(state.extra[REMINDER_DATE_KEY], "2026-05-09");
    assert_eq!(
        *memory_calls.lock().unwrap(),
        1,
        "memory is injected once per thread"
    );
    let dates = state
        .messages
        .iter()
        .filter(|m| m.content().contains("<current_date>"))
        .count();
    assert_eq!(dates, 1);
}

#[tokio::test]
async fn dynamic_context_reaches_the_model_before_the_user_message_in_a_real_run() {
    let clock = Arc::new(FixedClock(Mutex::new(date(2026, 7, 1))));
    let answer = || ScriptedTurn::Text(vec!["done".into()]);
    let model = Arc::new(ScriptedModel::new("m", [answer(), answer()]));
    let mw: Arc<dyn Middleware> = Arc::new(DynamicContextMiddleware::new().with_clock(clock));
    let agent = create_agent(
        model.clone(),
        Vec::new(),
        AgentOptions {
            middleware: Some(vec![mw]),
            ..Default::default()
        },
    )
    .unwrap();
    let ctx = run_ctx("alice", None);
    let outcome = agent
        .run(
            ThreadState::default(),
            vec![human("u1", "what day is it?")],
            &ctx,
        )
        .await;
    let second = agent
        .run(outcome.state, vec![human("u2", "and now?")], &ctx)
        .await;
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let first_request: Vec<&str> = requests[0].messages.iter().map(Message::content).collect();
    assert_eq!(
        first_request,
        [
            "<system-reminder>\n<current_date>2026-07-01, Wednesday</current_date>\n</system-reminder>",
            "what day is it?"
        ]
    );
    assert_eq!(
        requests[1].messages[..2],
        requests[0].messages[..],
        "the second turn replays the persisted prefix unchanged"
    );
    let second_request: Vec<&str> = requests[1].messages.iter().map(Message::content).collect();
    assert_eq!(second_request[2..], ["done", "and now?"]);
    assert_eq!(second.state.messages.len(), 5);
}

/// An agent with the dynamic context (date and memory) and the always-present coalescing that
/// merges it into the system prompt, as the lead agent has them.
fn coalescing_agent(model: Arc<ScriptedModel>, clock: Arc<FixedClock>) -> antler::agent::Agent {
    let memory = |_: &str, _: Option<&str>| Some("- [preference | 0.90] Likes tea".to_string());
    let dynamic = DynamicContextMiddleware::new()
        .with_clock(clock)
        .with_memory(Arc::new(memory));
    create_agent(
        model,
        Vec::new(),
        AgentOptions {
            system_prompt: Some("You are Antler.".into()),
            features: Some(antler::agent::RuntimeFeatures::none()),
            extra_middleware: vec![Arc::new(dynamic)],
            ..Default::default()
        },
    )
    .unwrap()
}

/// What the provider writes as the system prompt, and the conversation's texts.
fn as_sent(request: &antler::model::ModelRequest) -> (String, Vec<String>) {
    let system = request.system_parts().collect::<Vec<_>>().join("\n\n");
    let conversation = request
        .messages
        .iter()
        .filter(|m| !matches!(m, Message::System(_)))
        .map(|m| m.content().to_string())
        .collect();
    (system, conversation)
}

#[tokio::test]
async fn after_midnight_the_model_reads_one_date_the_new_one() {
    let clock = Arc::new(FixedClock(Mutex::new(date(2026, 7, 1))));
    let answer = || ScriptedTurn::Text(vec!["done".into()]);
    let model = Arc::new(ScriptedModel::new("m", [answer(), answer(), answer()]));
    let agent = coalescing_agent(model.clone(), clock.clone());
    let ctx = run_ctx("alice", None);
    let first = agent
        .run(
            ThreadState::default(),
            vec![human("u1", "late night question")],
            &ctx,
        )
        .await;
    *clock.0.lock().unwrap() = date(2026, 7, 2);
    let second = agent
        .run(first.state, vec![human("u2", "good morning")], &ctx)
        .await;
    agent
        .run(second.state, vec![human("u3", "still today")], &ctx)
        .await;

    let requests = model.requests();
    let (before, _) = as_sent(&requests[0]);
    assert!(before.contains("<current_date>2026-07-01, Wednesday</current_date>"));
    for request in &requests[1..] {
        let (system, conversation) = as_sent(request);
        assert_eq!(system.matches("<current_date>").count(), 1, "{system}");
        assert!(
            system.contains("<current_date>2026-07-02, Thursday</current_date>"),
            "{system}"
        );
        assert!(
            system.starts_with("You are Antler.\n\n<system-reminder>"),
            "{system}"
        );
        assert!(
            system.contains("<memory>\n") && system.contains("Likes tea"),
            "{system}"
        );
        assert!(
            conversation.iter().all(|text| !text.contains("<memory>")),
            "memory is not a person's words: {conversation:?}"
        );
    }
    assert_eq!(
        requests[2].messages[..requests[1].messages.len()],
        requests[1].messages[..],
        "after the new date the history is replayed unchanged"
    );
}

#[tokio::test]
async fn a_thread_an_older_version_left_without_context_or_with_two_dates_is_repaired() {
    let clock = Arc::new(FixedClock(Mutex::new(date(2026, 7, 2))));
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedTurn::Text(vec!["one".into()]),
            ScriptedTurn::Text(vec!["two".into()]),
        ],
    ));
    let agent = coalescing_agent(model.clone(), clock);
    let ctx = run_ctx("alice", None);
    // Summarized by an older version: the date is recorded, the reminder and memory are gone.
    let mut lost = ThreadState {
        messages: vec![Message::human("earlier"), Message::ai("answer")].into(),
        ..Default::default()
    };
    lost.extra
        .insert(REMINDER_DATE_KEY.into(), serde_json::json!("2026-07-02"));
    agent.run(lost, vec![human("u1", "again")], &ctx).await;
    // Crossed midnight under an older version: two date reminders.
    let reminder = |id: &str, day: &str| {
        let mut message = Message::system(format!(
            "<system-reminder>\n<current_date>{day}</current_date>\n</system-reminder>"
        ));
        message.set_id(id.into());
        if let Message::System(system) = &mut message {
            system.meta.hide_from_ui = true;
            system
                .meta
                .extra
                .insert(DYNAMIC_CONTEXT_MARKER.into(), true.into());
            system
                .meta
                .extra
                .insert(REMINDER_DATE_KEY.into(), day[..10].into());
        }
        message
    };
    let two_dates = ThreadState {
        messages: vec![
            reminder("a", "2026-06-30, Tuesday"),
            Message::human("first"),
            Message::ai("answer"),
            reminder("b", "2026-07-01, Wednesday"),
            Message::human("second"),
            Message::ai("answer"),
        ]
        .into(),
        ..Default::default()
    };
    let repaired = agent.run(two_dates, vec![human("u2", "third")], &ctx).await;

    let requests = model.requests();
    let (system, _) = as_sent(&requests[0]);
    assert!(
        system.contains("<current_date>2026-07-02, Thursday</current_date>"),
        "{system}"
    );
    assert!(
        system.contains("Likes tea"),
        "the memory came back: {system}"
    );
    let (system, _) = as_sent(&requests[1]);
    assert_eq!(system.matches("<current_date>").count(), 1, "{system}");
    assert!(system.contains("2026-07-02, Thursday"), "{system}");
    let ids: Vec<&str> = repaired.state.messages.iter().map(Message::id).collect();
    assert_eq!(ids[0], "a", "the first reminder is rewritten in place");
    assert!(!ids.contains(&"b"), "{ids:?}");
}
