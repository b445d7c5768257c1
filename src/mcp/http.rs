//! The HTTP side of remote MCP servers, on the project's reqwest 0.12 client: rmcp's
//! streamable-HTTP transport driven through our [`StreamableHttpClient`] implementation, and
//! the request decoration both remote transports share (configured headers, OAuth).
//!
//! Why not rmcp's own reqwest client: it is built on reqwest 0.13, whose default TLS stack
//! (aws-lc-rs) would be a second copy of reqwest and a second rustls crypto provider in the
//! binary (the "CryptoProvider" panic of the ecosystem notes). This file is the small part of it
//! we need: POST a message (JSON or SSE answer), GET the server's stream, DELETE the session.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

use crate::config::Secret;
use crate::mcp::oauth::{OAuthError, TokenSource};

const SESSION_HEADER: &str = "mcp-session-id";
const LAST_EVENT_HEADER: &str = "last-event-id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

#[derive(Debug, thiserror::Error)]
pub(crate) enum RemoteError {
    /// With its causes in the text: rmcp's wrapper (`StreamableHttpError::Client`) does not
    /// pass the source chain on, and "error sending request" alone does not say what failed.
    #[error("{}", with_causes(.0))]
    Http(#[from] reqwest::Error),
    #[error("{0}")]
    OAuth(#[from] OAuthError),
}

/// What every request to one remote server carries: its configured headers and, with
/// `oauth`, a fresh `Authorization` header.
#[derive(Clone)]
pub(crate) struct RemoteAuth {
    headers: Arc<Vec<(HeaderName, Secret)>>,
    oauth: Option<Arc<TokenSource>>,
}

impl RemoteAuth {
    pub(crate) fn new(headers: Vec<(HeaderName, Secret)>, oauth: Option<Arc<TokenSource>>) -> Self {
        Self {
            headers: Arc::new(headers),
            oauth,
        }
    }

    /// Adds the headers to `request`; OAuth's `Authorization` wins over a configured one.
    pub(crate) async fn decorate(
        &self,
        mut request: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, OAuthError> {
        for (name, value) in self.headers.iter() {
            if let Ok(mut value) = HeaderValue::from_str(value.expose()) {
                value.set_sensitive(true);
                request = request.header(name, value);
            }
        }
        if let Some(oauth) = &self.oauth
            && let Some(header) = oauth.authorization().await?
            && let Ok(mut value) = HeaderValue::from_str(header.expose())
        {
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        Ok(request)
    }

    /// The server answered 401 or 403 with `www_authenticate`: `Ok(true)` when the token
    /// source obtained what it asked for and the request should be sent again.
    pub(crate) async fn challenge(
        &self,
        status: StatusCode,
        www_authenticate: Option<&str>,
    ) -> Result<bool, OAuthError> {
        match &self.oauth {
            Some(oauth) => oauth.challenge(status.as_u16(), www_authenticate).await,
            None => Ok(false),
        }
    }
}

/// rmcp's streamable-HTTP client contract on reqwest 0.12.
#[derive(Clone)]
pub(crate) struct StreamableClient {
    pub http: reqwest::Client,
    pub auth: RemoteAuth,
}

type HttpResult<T> = Result<T, StreamableHttpError<RemoteError>>;

impl StreamableClient {
    /// Sends the request `build` makes, answering the server's 401/403 challenges: the token
    /// source may obtain a (wider) token, then the request is built and sent again; a
    /// challenge it cannot answer is the caller's `AuthRequired` (401) or the response (403).
    async fn request(
        &self,
        build: impl Fn() -> reqwest::RequestBuilder,
        session_id: Option<&str>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<reqwest::Response> {
        loop {
            let mut builder = self
                .auth
                .decorate(build())
                .await
                .map_err(|e| StreamableHttpError::Client(RemoteError::OAuth(e)))?;
            if let Some(session_id) = session_id {
                builder = builder.header(SESSION_HEADER, session_id);
            }
            for (name, value) in &custom_headers {
                builder = builder.header(name, value);
            }
            let response = builder.send().await.map_err(client_error)?;
            let status = response.status();
            if !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
                return Ok(response);
            }
            let header = response
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            if self
                .auth
                .challenge(status, header.as_deref())
                .await
                .map_err(|e| StreamableHttpError::Client(RemoteError::OAuth(e)))?
            {
                continue;
            }
            if status == StatusCode::FORBIDDEN {
                return Ok(response);
            }
            return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
                header.unwrap_or_else(|| "Bearer".to_string()),
            )));
        }
    }
}

/// The transports' error texts use the token source's (`error sending request for url (…):
/// client error (Connect): tcp connect error: Connection refused`).
pub(crate) use crate::mcp::oauth::with_causes;

/// `HTTP 404 Not Found: {body}`, in one line: an HTML error page is named, not quoted.
fn refusal(status: StatusCode, kind: Option<&str>, body: &str) -> String {
    let body = body.trim();
    if kind == Some("text/html") || body.starts_with('<') {
        return format!("HTTP {status} with a web page; is the url the server's MCP endpoint?");
    }
    let line: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.chars().count() {
        0 => format!("HTTP {status}"),
        n if n > 200 => format!(
            "HTTP {status}: {}…",
            line.chars().take(200).collect::<String>()
        ),
        _ => format!("HTTP {status}: {line}"),
    }
}

fn client_error(error: reqwest::Error) -> StreamableHttpError<RemoteError> {
    StreamableHttpError::Client(RemoteError::Http(error))
}

fn content_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
}

fn sse_of(response: reqwest::Response) -> BoxStream<'static, Result<Sse, sse_stream::Error>> {
    SseStream::from_bytes_stream(response.bytes_stream()).boxed()
}

impl StreamableHttpClient for StreamableClient {
    type Error = RemoteError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let awaits_no_response = !matches!(message, ClientJsonRpcMessage::Request(_));
        let build = || {
            self.http
                .post(uri.as_ref())
                .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"))
                .json(&message)
        };
        let response = self
            .request(build, session_id.as_deref(), custom_headers)
            .await?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let new_session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let kind = content_type(response.headers());
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            if let Ok(error @ ServerJsonRpcMessage::Error(_)) = serde_json::from_str(&body) {
                return Ok(StreamableHttpPostResponse::Json(error, new_session));
            }
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                refusal(status, kind.as_deref(), &body),
            )));
        }
        match kind.as_deref() {
            Some(EVENT_STREAM) => Ok(StreamableHttpPostResponse::Sse(
                sse_of(response),
                new_session,
            )),
            Some(JSON) => {
                let body = response.bytes().await.map_err(client_error)?;
                match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, new_session)),
                    Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                    Err(error) => Err(StreamableHttpError::Deserialize(error)),
                }
            }
            // A notification's answer carries nothing we need, whatever its type.
            _ if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
            other => Err(StreamableHttpError::UnexpectedContentType(
                other.map(str::to_string),
            )),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        let build = || self.http.delete(uri.as_ref());
        let response = self
            .request(build, Some(&session_id), custom_headers)
            .await?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        response.error_for_status().map_err(client_error)?;
        Ok(())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, sse_stream::Error>>> {
        let build = || {
            let builder = self
                .http
                .get(uri.as_ref())
                .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
            match &last_event_id {
                Some(id) => builder.header(LAST_EVENT_HEADER, id),
                None => builder,
            }
        };
        let response = self
            .request(build, session_id.as_deref(), custom_headers)
            .await?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        let response = response.error_for_status().map_err(client_error)?;
        match content_type(response.headers()).as_deref() {
            Some(EVENT_STREAM | JSON) => Ok(sse_of(response)),
            other => Err(StreamableHttpError::UnexpectedContentType(
                other.map(str::to_string),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_post_is_one_line_and_never_quotes_a_web_page() {
        let page = "<!DOCTYPE HTML>\n<html><body><h1>Error</h1></body></html>";
        let text = refusal(StatusCode::NOT_IMPLEMENTED, Some("text/html"), page);
        assert_eq!(
            text,
            "HTTP 501 Not Implemented with a web page; is the url the server's MCP endpoint?"
        );
        assert_eq!(
            refusal(
                StatusCode::FORBIDDEN,
                Some("text/plain"),
                "  no\n  entry \n"
            ),
            "HTTP 403 Forbidden: no entry"
        );
        assert_eq!(
            refusal(StatusCode::BAD_GATEWAY, None, ""),
            "HTTP 502 Bad Gateway"
        );
        assert!(refusal(StatusCode::BAD_REQUEST, None, &"x".repeat(500)).ends_with("x…"));
    }
}
