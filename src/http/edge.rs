//! The gate every TCP request passes before its route: the host it names (without tokens, so
//! DNS rebinding cannot reach the API), the site it comes from (a page of another origin may not
//! act without a token), and the slow-down of clients that keep sending wrong tokens.
//!
//! Probes, `/metrics` and channel webhooks pass untouched, as through the lock gate: platforms
//! call webhooks from anywhere under any name, and each webhook checks its own signature. The
//! local socket passes untouched too: it is the operator's, and the CLI names no real host.
//!
//! Cross-site reads of `/api/*` are refused as well as writes: a page cannot read the answer of
//! a no-cors request, but it can still tell by timing or an `<img>`'s size whether a thread or
//! file exists. The web chat's page and assets stay open to links from other sites.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::uri::Authority;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::auth::{bearer, open_while_locked, token_user};
use crate::http::origin::{cross_site, is_own_host};
use crate::http::peer::{ClientKey, LocalOperator};
use crate::http::{ApiError, AppState};

/// Layer applying the gate (see the module's doc).
pub(crate) async fn edge_gate(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if request.extensions().get::<LocalOperator>().is_some() {
        return next.run(request).await;
    }
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned());
    if route.as_deref().is_some_and(open_while_locked) {
        return next.run(request).await;
    }
    let config = state.config.current();
    let gateway = &config.gateway;
    let authority = authority(&request);
    if gateway.api_tokens.is_empty() && !state.exposed {
        let host = authority.as_ref().map(Authority::host);
        if !host.is_some_and(|host| is_own_host(host, &gateway.listen, &gateway.allowed_hosts)) {
            return misdirected(authority.as_ref()).into_response();
        }
    }
    let mut token_checked = false;
    if let Some(presented) = bearer(request.headers())
        && !gateway.api_tokens.is_empty()
    {
        let client = client(&request);
        let now = Instant::now();
        if let Some(wait) = state.auth_failures.throttled(client, now) {
            return slowed_down(wait);
        }
        if token_user(&gateway.api_tokens, presented).is_none() {
            return match state.auth_failures.failed(client, now) {
                Some(wait) => slowed_down(wait),
                None => ApiError::unauthorized().into_response(),
            };
        }
        token_checked = true;
    }
    if !token_checked
        && !open_across_sites(route.as_deref(), request.method())
        && let Some(why) = cross_site(
            request.headers(),
            authority.as_ref(),
            &gateway.allowed_hosts,
        )
    {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site_request",
            format!(
                "refused a request from another web site ({why}): without an API token, a page \
                 open in your browser could otherwise act as you; use the web chat at this \
                 address, call the API from a script or curl (they send no Origin), or send \
                 'Authorization: Bearer <token>' with a token from gateway.api_tokens"
            ),
        )
        .into_response();
    }
    next.run(request).await
}

/// The web chat's page and assets, which other sites may link to (reads only).
fn open_across_sites(route: Option<&str>, method: &Method) -> bool {
    (method == Method::GET || method == Method::HEAD)
        && route.is_some_and(|route| {
            matches!(route, "/" | "/favicon.ico" | "/favicon.svg") || route.starts_with("/assets/")
        })
}

/// Where the request was sent: its `Host` header (HTTP/1.1), else the URI's authority (h2).
fn authority(request: &Request) -> Option<Authority> {
    match request.headers().get(header::HOST) {
        Some(host) => host.to_str().ok()?.parse().ok(),
        None => request.uri().authority().cloned(),
    }
}

/// The client as the listener saw it (unknown clients share one key).
fn client(request: &Request) -> ClientKey {
    let ip = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |info| info.0.ip());
    ClientKey::of(ip)
}

fn misdirected(authority: Option<&Authority>) -> ApiError {
    let named = authority.map_or_else(
        || "no host".to_string(),
        |a| a.host().chars().take(100).collect::<String>(),
    );
    let port = authority
        .and_then(Authority::port_u16)
        .map_or_else(|| "<port>".to_string(), |port| port.to_string());
    ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "misdirected_host",
        format!(
            "this request was addressed to {named:?}, and without API tokens the daemon answers \
             only requests addressed to a loopback name (127.0.0.1, localhost, [::1]) or its \
             listen address, so that a web site cannot reach it by pointing its own name at \
             127.0.0.1 (DNS rebinding); open it as http://127.0.0.1:{port}, or add the host to \
             gateway.allowed_hosts if a reverse proxy or tunnel of yours forwards it"
        ),
    )
}

fn slowed_down(wait: Duration) -> Response {
    let seconds = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1);
    let mut response = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "auth_throttled",
        format!(
            "too many requests with a wrong API token came from this address; wait {seconds} s \
             (Retry-After), then send a token from gateway.api_tokens"
        ),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}
