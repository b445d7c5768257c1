//! A small W3C WebDriver client on the `reqwest` the tests already use: the dozen commands the
//! browser tests need. fantoccini and thirtyfour were weighed and not taken: fantoccini's
//! `webdriver` dependency brings second copies of the ICU 1.x stack, `http` 0.2 and `cookie`,
//! thirtyfour a second `reqwest` major; this speaks the same protocol in one short file.

use std::time::Duration;

use serde_json::{Value, json};

/// The W3C key code of Enter, Escape and Shift (WebDriver's "special keys"; typing Shift again
/// releases it).
pub(crate) const ENTER: char = '\u{E007}';
pub(crate) const ESCAPE: char = '\u{E00C}';
pub(crate) const SHIFT: char = '\u{E008}';

/// A WebDriver error: `error` is the protocol's code (`no such alert`, `no such element`, …).
#[derive(Debug, thiserror::Error)]
#[error("webdriver {command}: {error}: {message}")]
pub(crate) struct WebDriverError {
    pub(crate) command: String,
    pub(crate) error: String,
    pub(crate) message: String,
}

/// One session on a WebDriver server (chromedriver).
#[derive(Clone)]
pub(crate) struct Session {
    http: reqwest::Client,
    base: String,
}

/// An element of the page, by its WebDriver reference.
pub(crate) struct Element {
    session: Session,
    id: String,
}

impl Session {
    /// `POST /session` with `capabilities` as `alwaysMatch`.
    pub(crate) async fn start(driver: &str, capabilities: Value) -> Result<Self, WebDriverError> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(120))
            .build()
            .expect("http client");
        let body = json!({"capabilities": {"alwaysMatch": capabilities}});
        let value = send(
            &http,
            reqwest::Method::POST,
            &format!("{driver}/session"),
            Some(body),
        )
        .await?;
        let id = value["sessionId"].as_str().unwrap_or_default();
        Ok(Self {
            http,
            base: format!("{driver}/session/{id}"),
        })
    }

    async fn command(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, WebDriverError> {
        send(&self.http, method, &format!("{}{path}", self.base), body).await
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, WebDriverError> {
        self.command(reqwest::Method::POST, path, Some(body)).await
    }

    pub(crate) async fn goto(&self, url: &str) -> Result<(), WebDriverError> {
        self.post("/url", json!({"url": url})).await.map(drop)
    }

    pub(crate) async fn refresh(&self) -> Result<(), WebDriverError> {
        self.post("/refresh", json!({})).await.map(drop)
    }

    /// Runs `script` (a function body) in the page and returns what it returns.
    pub(crate) async fn execute(&self, script: &str) -> Result<Value, WebDriverError> {
        self.post("/execute/sync", json!({"script": script, "args": []}))
            .await
    }

    pub(crate) async fn find(&self, css: &str) -> Result<Element, WebDriverError> {
        let value = self
            .post("/element", json!({"using": "css selector", "value": css}))
            .await?;
        Ok(Element {
            session: self.clone(),
            // The reference is the object's one value (under the spec's fixed "element-…" key).
            id: value
                .as_object()
                .and_then(|object| object.values().next())
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        })
    }

    /// The open alert's text; an error (`no such alert`) when none is open.
    pub(crate) async fn alert_text(&self) -> Result<Value, WebDriverError> {
        self.command(reqwest::Method::GET, "/alert/text", None)
            .await
    }

    /// A PNG of the viewport.
    pub(crate) async fn screenshot(&self) -> Result<Vec<u8>, WebDriverError> {
        use base64::Engine as _;
        let value = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await?;
        base64::engine::general_purpose::STANDARD
            .decode(value.as_str().unwrap_or_default())
            .map_err(|e| WebDriverError {
                command: "screenshot".into(),
                error: "bad base64".into(),
                message: e.to_string(),
            })
    }

    pub(crate) async fn set_window_size(
        &self,
        width: u32,
        height: u32,
    ) -> Result<(), WebDriverError> {
        self.post("/window/rect", json!({"width": width, "height": height}))
            .await
            .map(drop)
    }

    /// A left click at viewport coordinates (W3C actions), wherever elements lie: what a
    /// person's tap on an overlay does.
    pub(crate) async fn click_at(&self, x: i64, y: i64) -> Result<(), WebDriverError> {
        let actions = json!({"actions": [{
            "type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
            "actions": [
                {"type": "pointerMove", "x": x, "y": y, "origin": "viewport"},
                {"type": "pointerDown", "button": 0},
                {"type": "pointerUp", "button": 0},
            ],
        }]});
        self.post("/actions", actions).await.map(drop)
    }

    /// A Chrome DevTools Protocol command through chromedriver (`goog/cdp/execute`), e.g.
    /// `Emulation.setEmulatedMedia` for the dark colour scheme.
    pub(crate) async fn cdp(&self, command: &str, params: Value) -> Result<Value, WebDriverError> {
        self.post(
            "/goog/cdp/execute",
            json!({"cmd": command, "params": params}),
        )
        .await
    }

    /// chromedriver's (non-W3C) console log: `[{level, message, …}]` since the last call.
    pub(crate) async fn browser_log(&self) -> Result<Value, WebDriverError> {
        self.post("/se/log", json!({"type": "browser"})).await
    }

    pub(crate) async fn close(&self) -> Result<(), WebDriverError> {
        self.command(reqwest::Method::DELETE, "", None)
            .await
            .map(drop)
    }
}

impl Element {
    pub(crate) async fn click(&self) -> Result<(), WebDriverError> {
        self.session
            .post(&format!("/element/{}/click", self.id), json!({}))
            .await
            .map(drop)
    }

    /// Types `text`; for a file input, `text` is the path of the file to choose.
    pub(crate) async fn send_keys(&self, text: &str) -> Result<(), WebDriverError> {
        self.session
            .post(
                &format!("/element/{}/value", self.id),
                json!({"text": text}),
            )
            .await
            .map(drop)
    }
}

async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Result<Value, WebDriverError> {
    let command = format!("{method} {url}");
    let mut request = http.request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let failed = |error: &str, message: String| WebDriverError {
        command: command.clone(),
        error: error.to_owned(),
        message,
    };
    let response = request
        .send()
        .await
        .map_err(|e| failed("transport", e.to_string()))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .map_err(|e| failed("body", e.to_string()))?;
    let value = body.get("value").cloned().unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(value);
    }
    Err(failed(
        value["error"].as_str().unwrap_or("unknown error"),
        value["message"].as_str().unwrap_or_default().to_owned(),
    ))
}
