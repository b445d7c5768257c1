//! Integration tests: the dynamic-context middleware (reference §13.1 item 24) — the date and
//! memory reach the model once per thread, and the date again after midnight.

use std::sync::{Arc, Mutex};

use chrono::NaiveDate;

use antler::agent::{AgentOptions, create_agent};
use antler::agent_api::Middleware;
use antler::messages::Message;
use antler::middleware::DynamicContextMiddleware;
use antler::middleware::dynamic_context::{Clock, DYNAMIC_CONTEXT_MARKER, REMINDER_DATE_KEY};
use antler::model::{ScriptedModel, ScriptedTurn};
use antler::state::{StateUpdate, ThreadState};

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
                "human".into(),
                "h1__memory".into(),
                "<memory>\nalice prefers short answers (reviewer)\n</memory>".into()
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

    // Midnight: a date-only reminder goes right before the new message.
    *clock.0.lock().unwrap() = date(2026, 5, 9);
    state
        .apply(StateUpdate::message(Message::ai("ok")))
        .unwrap();
    let before_midnight = summary(&state);
    before_agent(&mw, &mut state, human("h3", "next day")).await;
    let after = summary(&state);
    assert_eq!(after.len(), 8);
    assert_eq!(
        after[..6],
        before_midnight[..],
        "earlier messages stay untouched"
    );
    assert_eq!(
        after[6],
        (
            "system".into(),
            "h3".into(),
            "<system-reminder>\n<current_date>2026-05-09, Saturday</current_date>\n</system-reminder>"
                .into()
        )
    );
    assert_eq!(
        after[7],
        ("human".into(), "h3__user".into(), "next day".into())
    );
    assert_eq!(state.extra[REMINDER_DATE_KEY], "2026-05-09");
    assert_eq!(
        *memory_calls.lock().unwrap(),
        1,
        "memory is injected once per thread"
    );
    let reminders = state
        .messages
        .iter()
        .filter(|m| m.content().contains("<system-reminder>"))
        .count();
    assert_eq!(reminders, 2);
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
