//! The fake's gateway WebSocket (version 10): HELLO, IDENTIFY → READY, dispatches with
//! sequence numbers, heartbeats, RESUME with replay, and scripted RECONNECT, INVALID_SESSION
//! and close codes.

use std::io::Write;

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{
    FAKE_DISCORD_BOT_ID, FAKE_DISCORD_BOT_NAME, FAKE_DISCORD_TOKEN, GatewayCommand, GatewaySession,
    SharedDiscord,
};

/// Short, so tests see heartbeats.
const HEARTBEAT_INTERVAL_MS: u64 = 2_000;

pub(crate) async fn upgrade(ws: WebSocketUpgrade, State(shared): State<SharedDiscord>) -> Response {
    ws.on_upgrade(move |socket| serve(socket, shared))
}

/// Sends `frame` (as a dispatch with a sequence number) to the ready session, or queues it.
pub(crate) fn dispatch(shared: &SharedDiscord, frame: Value) {
    let mut state = shared.lock();
    let Some((_, live)) = state.live.clone() else {
        state.pending.push_back(frame);
        return;
    };
    let frame = sequenced(&mut state, frame);
    let _ = live.send(GatewayCommand::Send(frame));
}

fn sequenced(state: &mut super::DiscordState, mut frame: Value) -> Value {
    state.seq += 1;
    frame["s"] = json!(state.seq);
    state.sent.push((state.seq, frame.clone()));
    frame
}

/// One whole zlib stream per binary frame once IDENTIFY asked for compression.
fn encode(frame: &Value, compress: bool) -> Message {
    let text = frame.to_string();
    if !compress {
        return Message::Text(text.into());
    }
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    let compressed = encoder
        .write_all(text.as_bytes())
        .and_then(|()| encoder.finish())
        .unwrap_or_default();
    Message::Binary(compressed.into())
}

fn ready(shared: &SharedDiscord, session_id: &str) -> Value {
    let url = shared.base().replace("http://", "ws://") + "/gateway";
    let mut user = super::discord_user(FAKE_DISCORD_BOT_ID, true);
    user["username"] = json!(FAKE_DISCORD_BOT_NAME);
    json!({"op": 0, "t": "READY", "d": {"v": 10, "user": user, "guilds": [],
        "session_id": session_id, "resume_gateway_url": url, "shard": [0, 1],
        "application": {"id": FAKE_DISCORD_BOT_ID, "flags": 0}}})
}

/// What the connection must do after a client frame.
enum Next {
    Send(Vec<Value>),
    Close(u16),
}

async fn serve(mut socket: WebSocket, shared: SharedDiscord) {
    let (commands, mut received) = mpsc::unbounded_channel();
    let connection = {
        let mut state = shared.lock();
        let connection = state.sessions.len();
        state.sessions.push(GatewaySession {
            connection,
            ..GatewaySession::default()
        });
        connection
    };
    let mut compress = false;
    let hello = json!({"op": 10, "d": {"heartbeat_interval": HEARTBEAT_INTERVAL_MS}});
    if socket.send(encode(&hello, false)).await.is_err() {
        return;
    }
    loop {
        let frames = tokio::select! {
            frame = socket.recv() => match frame {
                Some(Ok(Message::Text(text))) => {
                    let Ok(payload) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                    if payload["op"] == 2 {
                        compress = payload["d"]["compress"].as_bool().unwrap_or(false);
                    }
                    match client_frame(&shared, connection, &commands, &payload) {
                        Next::Send(frames) => frames,
                        Next::Close(code) => {
                            let close = CloseFrame { code, reason: "closed by the fake".into() };
                            let _ = socket.send(Message::Close(Some(close))).await;
                            break;
                        }
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => continue,
            },
            Some(command) = received.recv() => match command {
                GatewayCommand::Send(frame) => vec![frame],
                GatewayCommand::Reconnect => vec![json!({"op": 7, "d": null})],
                GatewayCommand::InvalidSession => {
                    let mut state = shared.lock();
                    state.session_id = None;
                    state.live = None;
                    vec![json!({"op": 9, "d": false})]
                }
                GatewayCommand::Close(code) => {
                    let close = CloseFrame { code, reason: "closed by the fake".into() };
                    let _ = socket.send(Message::Close(Some(close))).await;
                    break;
                }
            },
        };
        for frame in frames {
            if socket.send(encode(&frame, compress)).await.is_err() {
                break;
            }
        }
    }
    let mut state = shared.lock();
    state.sessions[connection].closed = true;
    if state.live.as_ref().is_some_and(|(id, _)| *id == connection) {
        state.live = None;
    }
}

fn client_frame(
    shared: &SharedDiscord,
    connection: usize,
    commands: &mpsc::UnboundedSender<GatewayCommand>,
    payload: &Value,
) -> Next {
    let mut state = shared.lock();
    let token_ok = |d: &Value| {
        d["token"].as_str().map(|t| t.trim_start_matches("Bot ")) == Some(FAKE_DISCORD_TOKEN)
    };
    match payload["op"].as_u64() {
        Some(1) => Next::Send(vec![json!({"op": 11})]),
        Some(2) => {
            let mut identify = payload["d"].clone();
            let good_token = token_ok(&identify);
            identify["token"] = json!("***");
            let session = &mut state.sessions[connection];
            session.identify = identify;
            if let Some(code) = state.close_next_identify.take() {
                return Next::Close(code);
            }
            if !good_token {
                return Next::Close(4004);
            }
            state.sessions[connection].identified = true;
            let session_id = format!("fake-session-{connection}");
            state.session_id = Some(session_id.clone());
            state.seq = 0;
            state.sent.clear();
            let mut frames = vec![sequenced(&mut state, ready(shared, &session_id))];
            frames.extend(flush(&mut state));
            state.live = Some((connection, commands.clone()));
            Next::Send(frames)
        }
        Some(6) => {
            let d = &payload["d"];
            let known = state.session_id.as_deref() == d["session_id"].as_str();
            if !token_ok(d) || !known {
                return Next::Send(vec![json!({"op": 9, "d": false})]);
            }
            state.sessions[connection].resumed = true;
            let client_seq = d["seq"].as_u64().unwrap_or(0);
            let mut frames: Vec<Value> = state
                .sent
                .iter()
                .filter(|(seq, _)| *seq > client_seq)
                .map(|(_, f)| f.clone())
                .collect();
            if std::mem::take(&mut state.replay_last_on_resume)
                && let Some((_, last)) = state
                    .sent
                    .iter()
                    .rev()
                    .find(|(seq, f)| *seq <= client_seq && f["t"] == "MESSAGE_CREATE")
            {
                frames.insert(0, last.clone());
            }
            frames.push(sequenced(
                &mut state,
                json!({"op": 0, "t": "RESUMED", "d": {}}),
            ));
            frames.extend(flush(&mut state));
            state.live = Some((connection, commands.clone()));
            Next::Send(frames)
        }
        _ => Next::Send(Vec::new()),
    }
}

/// Dispatches queued while no session was ready, now with sequence numbers.
fn flush(state: &mut super::DiscordState) -> Vec<Value> {
    let pending: Vec<Value> = state.pending.drain(..).collect();
    pending
        .into_iter()
        .map(|frame| sequenced(state, frame))
        .collect()
}
