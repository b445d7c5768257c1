//! The Socket Mode side: `hello`, envelopes to the newest live connection, acknowledgements
//! recorded with their time, `disconnect`, and unacknowledged envelopes queued again when
//! their connection closes.

use std::time::Instant;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{
    ConnectionInfo, EnvelopeInfo, FAKE_SLACK_BOT_USER, FAKE_SLACK_TEAM, SharedSlack, SocketCommand,
};

pub(crate) async fn upgrade(
    State(shared): State<SharedSlack>,
    Path(_n): Path<String>,
    ws: WebSocketUpgrade,
) -> Response {
    ws.on_upgrade(move |socket| serve(shared, socket))
}

/// Wraps `event` in an event callback and queues it; `remember` makes it the one
/// `redeliver_last` and `last_payload` use. Returns the `event_id`.
pub(crate) fn enqueue_event(shared: &SharedSlack, event: Value, remember: bool) -> String {
    let payload = {
        let mut state = shared.lock();
        state.next_event += 1;
        let event_id = format!("Ev{:08}", state.next_event);
        let payload = json!({
            "token": "verification-token", "team_id": FAKE_SLACK_TEAM, "api_app_id": "A0FAKE01",
            "type": "event_callback", "event_id": event_id, "event_time": 1_700_000_000,
            "authorizations": [{"team_id": FAKE_SLACK_TEAM, "user_id": FAKE_SLACK_BOT_USER, "is_bot": true}],
            "event": event,
        });
        if remember {
            state.payloads.push(payload.clone());
        }
        payload
    };
    let event_id = payload["event_id"].as_str().unwrap_or_default().to_string();
    enqueue(shared, "events_api", payload, 0);
    event_id
}

/// Queues an envelope of `kind` around `payload` and hands the queue to a live connection.
pub(crate) fn enqueue(shared: &SharedSlack, kind: &str, payload: Value, retry_attempt: u32) {
    {
        let mut state = shared.lock();
        state.next_envelope += 1;
        let envelope = json!({
            "envelope_id": format!("env-{:06}", state.next_envelope),
            "type": kind,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry_attempt,
            "retry_reason": if retry_attempt > 0 { "timeout" } else { "" },
            "payload": payload,
        });
        state.pending.push_back(envelope);
    }
    flush(shared);
}

/// Sends every queued envelope to the newest connection that said hello.
fn flush(shared: &SharedSlack) {
    let mut state = shared.lock();
    let Some(newest) = state.live.keys().max().copied() else {
        return;
    };
    while let Some(envelope) = state.pending.pop_front() {
        let sent = state
            .live
            .get(&newest)
            .is_some_and(|sender| sender.send(SocketCommand::Send(envelope.clone())).is_ok());
        if !sent {
            state.pending.push_front(envelope);
            return;
        }
    }
}

async fn serve(shared: SharedSlack, mut socket: WebSocket) {
    let (sender, mut commands) = mpsc::unbounded_channel();
    let (id, live) = {
        let mut state = shared.lock();
        let id = state.connections.len() + 1;
        state.connections.push(ConnectionInfo {
            id,
            opened_at: Instant::now(),
            hello_at: None,
            closed_at: None,
            closed_by_client: false,
        });
        (id, state.live.len() + 1)
    };
    let hello = json!({"type": "hello", "num_connections": live,
        "debug_info": {"host": "fake-slack", "build_number": 1, "approximate_connection_time": 18060},
        "connection_info": {"app_id": "A0FAKE01"}});
    if socket
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_ok()
    {
        {
            let mut state = shared.lock();
            state.connections[id - 1].hello_at = Some(Instant::now());
            state.live.insert(id, sender);
        }
        flush(&shared);
        let closed_by_client = converse(&shared, id, &mut socket, &mut commands).await;
        shared.lock().connections[id - 1].closed_by_client = closed_by_client;
    }
    let mut state = shared.lock();
    state.live.remove(&id);
    state.connections[id - 1].closed_at = Some(Instant::now());
    // Slack delivers what this connection did not acknowledge again, elsewhere.
    let unacked: Vec<String> = state
        .inflight
        .iter()
        .filter(|(_, (connection, _))| *connection == id)
        .map(|(envelope_id, _)| envelope_id.clone())
        .collect();
    for envelope_id in unacked {
        if let Some((_, envelope)) = state.inflight.remove(&envelope_id) {
            state.pending.push_back(envelope);
        }
    }
    drop(state);
    flush(&shared);
}

/// Serves one connection until it closes; `true` when the client closed it.
async fn converse(
    shared: &SharedSlack,
    id: usize,
    socket: &mut WebSocket,
    commands: &mut mpsc::UnboundedReceiver<SocketCommand>,
) -> bool {
    let mut frozen = false;
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                Some(SocketCommand::Send(envelope)) => {
                    let envelope_id = envelope["envelope_id"].as_str().unwrap_or_default().to_string();
                    let payload = &envelope["payload"];
                    let event_id = payload["event_id"].as_str().or(payload["trigger_id"].as_str()).unwrap_or_default().to_string();
                    {
                        let mut state = shared.lock();
                        state.envelopes.push(EnvelopeInfo {
                            envelope_id: envelope_id.clone(),
                            event_id,
                            connection: id,
                            sent_at: Instant::now(),
                            acked_at: None,
                        });
                        state.inflight.insert(envelope_id, (id, envelope.clone()));
                    }
                    if socket.send(Message::Text(envelope.to_string().into())).await.is_err() {
                        return false;
                    }
                }
                Some(SocketCommand::Disconnect { with_debug_info }) => {
                    let mut frame = json!({"type": "disconnect", "reason": "refresh_requested"});
                    if with_debug_info {
                        frame["debug_info"] = json!({"host": "fake-slack"});
                    }
                    if socket.send(Message::Text(frame.to_string().into())).await.is_err() {
                        return false;
                    }
                }
                Some(SocketCommand::Freeze) => frozen = true,
                None => return false,
            },
            frame = socket.recv(), if !frozen => match frame {
                Some(Ok(Message::Text(text))) => acknowledge(shared, text.as_str()),
                Some(Ok(Message::Close(_))) => return true,
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return false,
            },
        }
    }
}

fn acknowledge(shared: &SharedSlack, text: &str) {
    let Ok(ack) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let Some(envelope_id) = ack["envelope_id"].as_str() else {
        return;
    };
    let mut state = shared.lock();
    state.inflight.remove(envelope_id);
    if let Some(envelope) = state
        .envelopes
        .iter_mut()
        .rev()
        .find(|e| e.envelope_id == envelope_id && e.acked_at.is_none())
    {
        envelope.acked_at = Some(Instant::now());
    }
}
