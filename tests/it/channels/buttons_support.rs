//! What the adapter-level button tests share: a sink that keeps what a transport journals, a
//! small HTTP server that hands pushes to an adapter's webhook handler like the daemon's
//! `POST /channels/<name>/webhook` does, and the three buttons of an approval request.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use antler_channel::{
    Button, ButtonStyle, InboundMessage, InboundSink, SinkError, WebhookError, WebhookHandler,
    WebhookReply, WebhookRequest,
};
use async_trait::async_trait;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use tokio::sync::watch;

use super::WAIT;

/// Keeps every journalled message; [`Collected::wait_for`] waits for a count.
pub(crate) struct Collected {
    messages: Mutex<Vec<InboundMessage>>,
    count: watch::Sender<usize>,
}

impl Collected {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            messages: Mutex::new(Vec::new()),
            count: watch::channel(0).0,
        })
    }

    pub(crate) fn messages(&self) -> Vec<InboundMessage> {
        self.messages.lock().unwrap().clone()
    }

    /// Waits (at most [`WAIT`]) until `n` messages were journalled; returns them all.
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<InboundMessage> {
        let mut count = self.count.subscribe();
        let reached = tokio::time::timeout(WAIT, count.wait_for(|seen| *seen >= n)).await;
        assert!(
            matches!(reached, Ok(Ok(_))),
            "waited for {n} journalled messages, have {:?}",
            self.messages()
        );
        self.messages()
    }
}

#[async_trait]
impl InboundSink for Collected {
    async fn accept(&self, messages: Vec<InboundMessage>) -> Result<(), SinkError> {
        let total = {
            let mut kept = self.messages.lock().unwrap();
            kept.extend(messages);
            kept.len()
        };
        self.count.send_replace(total);
        Ok(())
    }
}

/// Serves `handler` at `http://ADDR/` as the daemon serves a webhook: a verified delivery's
/// messages go to `sink` before the ack; a refusal is 401 or 400.
pub(crate) async fn serve_webhook(
    handler: Arc<dyn WebhookHandler>,
    sink: Arc<Collected>,
) -> SocketAddr {
    let route = move |headers: HeaderMap, body: Bytes| {
        let (handler, sink) = (handler.clone(), sink.clone());
        async move {
            let reply = handler.handle(&WebhookRequest {
                headers: &headers,
                body: &body,
            });
            let (status, body) = match reply {
                Ok(WebhookReply::Respond(ack)) | Ok(WebhookReply::Ignore { ack, .. }) => {
                    (ack.status, ack.body)
                }
                Ok(WebhookReply::Accept { messages, ack }) => {
                    sink.accept(messages).await.unwrap();
                    (ack.status, ack.body)
                }
                Err(WebhookError::Unauthorized(why)) => (401, why.into_bytes()),
                Err(other) => (400, other.to_string().into_bytes()),
            };
            (StatusCode::from_u16(status).unwrap(), body).into_response()
        }
    };
    let router = axum::Router::new().route("/", axum::routing::post(route));
    antler_test_support::serve(router).await
}

/// An approval request's buttons, as the chat layer sends them.
pub(crate) fn approval_buttons(id: &str) -> Vec<Button> {
    [
        ("Approve", "a", ButtonStyle::Primary),
        ("Approve for this conversation", "c", ButtonStyle::Default),
        ("Deny", "d", ButtonStyle::Danger),
    ]
    .into_iter()
    .map(|(label, code, style)| Button {
        label: label.into(),
        value: format!("ap:{id}:{code}"),
        style,
    })
    .collect()
}
