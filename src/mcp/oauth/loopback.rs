//! The redirect of an authorization-code flow on a native client (RFC 8252 §7.3): a one-shot
//! HTTP listener on `127.0.0.1`, path `/callback`, that takes the first callback carrying the
//! request's `state`, answers the browser with a short page, and stops. Callbacks with another
//! `state` (a stale tab, another program) are answered and ignored; the listener lives only
//! as long as the future that waits on it, so cancelling the login closes it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Secret;
use crate::mcp::oauth::login_error::LoginError;

/// How long the page of a finished callback may take to reach the browser before the
/// listener is closed anyway.
const DELIVERY_GRACE: Duration = Duration::from_secs(2);

/// A bound listener waiting to be used.
pub(crate) struct Loopback {
    listener: tokio::net::TcpListener,
    redirect_uri: String,
}

impl Loopback {
    /// Binds `127.0.0.1:{port}` (`None`: a free port). The address is the IP literal, not
    /// `localhost`, so no resolver or IPv6 preference can send the browser elsewhere.
    pub(crate) async fn bind(port: Option<u16>) -> Result<Self, LoginError> {
        let wanted = port.unwrap_or(0);
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", wanted))
            .await
            .map_err(|source| LoginError::Listen {
                port: wanted,
                detail: source.to_string(),
            })?;
        let port = listener
            .local_addr()
            .map_err(|source| LoginError::Listen {
                port: wanted,
                detail: source.to_string(),
            })?
            .port();
        Ok(Self {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
        })
    }

    /// `http://127.0.0.1:PORT/callback`.
    pub(crate) fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Serves until a callback with `state` arrives (its `code`, or its `error` as
    /// [`LoginError::Denied`]) or `timeout` passes.
    pub(crate) async fn wait(self, state: &str, timeout: Duration) -> Result<Secret, LoginError> {
        let (sender, mut receiver) = mpsc::channel(1);
        let shared = Arc::new(Callback {
            state: state.to_string(),
            sender: Mutex::new(Some(sender)),
        });
        let router = Router::new()
            .route("/callback", axum::routing::get(callback))
            .with_state(shared);
        let stop = CancellationToken::new();
        let server = axum::serve(self.listener, router)
            .with_graceful_shutdown(stop.clone().cancelled_owned())
            .into_future();
        tokio::pin!(server);
        let outcome = tokio::select! {
            received = receiver.recv() => received.unwrap_or(Err(LoginError::Interrupted)),
            served = &mut server => Err(LoginError::Listen {
                port: 0,
                detail: served.err().map(|e| e.to_string()).unwrap_or_else(|| "the listener stopped".into()),
            }),
            () = tokio::time::sleep(timeout) => Err(LoginError::Timeout {
                minutes: timeout.as_secs().div_ceil(60),
            }),
        };
        stop.cancel();
        // Let the answer of the callback reach the browser; a lingering connection does not
        // hold the login up.
        let _ = tokio::time::timeout(DELIVERY_GRACE, server).await;
        outcome
    }
}

struct Callback {
    state: String,
    /// Taken by the first valid callback: the listener ends after one.
    sender: Mutex<Option<mpsc::Sender<Result<Secret, LoginError>>>>,
}

#[derive(serde::Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

async fn callback(
    State(shared): State<Arc<Callback>>,
    Query(query): Query<CallbackQuery>,
) -> Response {
    if query.state.as_deref() != Some(shared.state.as_str()) {
        return page(
            StatusCode::BAD_REQUEST,
            "This answer does not belong to the authorization Antler is waiting for (its state \
             differs). Use the link of the current <code>antler mcp login</code>.",
        );
    }
    let outcome = match (query.error, query.code) {
        (Some(error), _) => Err(LoginError::Denied {
            error,
            description: query.error_description,
        }),
        (None, Some(code)) if !code.is_empty() => Ok(Secret::new(code)),
        (None, _) => {
            return page(
                StatusCode::BAD_REQUEST,
                "The authorization server sent neither a code nor an error.",
            );
        }
    };
    let sender = shared
        .sender
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    let Some(sender) = sender else {
        return page(
            StatusCode::CONFLICT,
            "Antler already received an answer for this authorization; you can close this tab.",
        );
    };
    let body = match &outcome {
        Ok(_) => "Antler is authorized; you can close this tab.".to_string(),
        Err(error) => format!(
            "Antler was not authorized: {}. You can close this tab; the terminal says what to do next.",
            escape(&error.to_string())
        ),
    };
    let status = if outcome.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let _ = sender.send(outcome).await;
    page(status, &body)
}

fn page(status: StatusCode, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Antler</title></head>\
         <body><p>{body}</p></body></html>"
    );
    (status, Html(html)).into_response()
}

/// Text from the authorization server shown in the page: never markup.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    async fn get(url: &str) -> (u16, String) {
        let response = reqwest::get(url).await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    #[tokio::test]
    async fn a_foreign_state_is_ignored_and_the_first_valid_code_ends_the_wait() {
        let loopback = Loopback::bind(None).await.unwrap();
        let uri = loopback.redirect_uri().to_string();
        assert!(uri.starts_with("http://127.0.0.1:") && uri.ends_with("/callback"));
        let waiting =
            tokio::spawn(async move { loopback.wait("expected", Duration::from_secs(10)).await });
        let (status, body) = get(&format!("{uri}?code=forged&state=other")).await;
        assert_eq!(status, 400);
        assert!(body.contains("state differs"), "{body}");
        let (status, body) = get(&format!("{uri}?code=abc&state=expected")).await;
        assert_eq!(status, 200);
        assert!(body.contains("Antler is authorized"), "{body}");
        let code = waiting.await.unwrap().unwrap();
        assert_eq!(code.expose(), "abc");
    }

    #[tokio::test]
    async fn an_error_callback_names_the_error_and_escapes_it_in_the_page() {
        let loopback = Loopback::bind(None).await.unwrap();
        let uri = loopback.redirect_uri().to_string();
        let waiting =
            tokio::spawn(async move { loopback.wait("s", Duration::from_secs(10)).await });
        let (status, body) = get(&format!(
            "{uri}?error=access_denied&error_description=%3Cb%3Eno%3C/b%3E&state=s"
        ))
        .await;
        assert_eq!(status, 400);
        assert!(
            body.contains("access_denied") && body.contains("&lt;b&gt;"),
            "{body}"
        );
        let error = waiting.await.unwrap().unwrap_err();
        assert!(
            matches!(&error, LoginError::Denied { error, .. } if error == "access_denied"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn no_callback_within_the_timeout_is_a_timeout() {
        let loopback = Loopback::bind(None).await.unwrap();
        let error = loopback
            .wait("s", Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(matches!(error, LoginError::Timeout { .. }), "{error}");
    }

    #[tokio::test]
    async fn a_taken_port_is_a_listen_error_naming_it() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = taken.local_addr().unwrap().port();
        let error = Loopback::bind(Some(port)).await.err().unwrap();
        assert!(error.to_string().contains(&port.to_string()), "{error}");
        assert!(error.to_string().contains("redirect_port"), "{error}");
    }
}
