//! A small web site of the test's own on another loopback port: the "other origin" pages the
//! browser tests open, served with no headers but their type.

use std::net::SocketAddr;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

/// Serves each `(path, content type, body)` on `127.0.0.1`, until the test's runtime ends.
pub(crate) async fn serve(files: Vec<(&'static str, &'static str, Vec<u8>)>) -> SocketAddr {
    // Browsers ask every site for its icon; none is no error.
    let mut app = Router::new().route(
        "/favicon.ico",
        get(|| async { axum::http::StatusCode::NO_CONTENT }),
    );
    for (path, content_type, body) in files {
        app = app.route(
            path,
            get(move || {
                let body = body.clone();
                async move { ([(header::CONTENT_TYPE, content_type)], body).into_response() }
            }),
        );
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the test site");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}
