//! `web_fetch(url)`: a web page as readable Markdown, capped in length. Private, loopback and
//! link-local addresses are refused (also after redirects) unless the tool's config sets
//! `allow_private_networks: true`.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{CONTENT_TYPE, LOCATION};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::tools::builtin::web::{
    self, DEFAULT_TIMEOUT, MAX_REDIRECTS, WebError, find_all, request_error, tag,
};
use crate::tools::builtin::{ToolMeta, truncate_head};

/// Characters of Markdown returned when the config does not say.
pub(crate) const DEFAULT_MAX_CHARS: usize = 20_000;
/// Bytes of a page read at most; the rest is never downloaded.
pub(crate) const MAX_PAGE_BYTES: usize = 5 * 1024 * 1024;
const TRUNCATION_HINT: &str = "The page is longer; fetch a more specific URL for the rest";
/// Elements that carry no readable content.
const SKIPPED_TAGS: &[&str] = &[
    "head", "script", "style", "noscript", "template", "iframe", "svg", "canvas", "form", "button",
    "nav", "footer",
];

/// Arguments of `web_fetch`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct WebFetchArgs {
    /// Full http(s) URL of the page, e.g. from web_search results.
    pub(crate) url: String,
}

pub struct WebFetchTool {
    meta: ToolMeta,
    max_chars: usize,
    allow_private: bool,
    client: reqwest::Client,
}

impl WebFetchTool {
    /// `Err` when no HTTP client can be built (the TLS backend failed to load).
    pub fn new(
        meta: ToolMeta,
        max_chars: Option<usize>,
        timeout_seconds: Option<u64>,
        allow_private_networks: bool,
    ) -> Result<Self, String> {
        let timeout = timeout_seconds.map_or(DEFAULT_TIMEOUT, |s| Duration::from_secs(s.max(1)));
        Ok(Self {
            meta,
            max_chars: max_chars.unwrap_or(DEFAULT_MAX_CHARS),
            allow_private: allow_private_networks,
            client: web::client(timeout, allow_private_networks)?,
        })
    }

    /// Fetches `raw_url` and returns the model-facing Markdown (already capped).
    pub async fn fetch(&self, raw_url: &str) -> Result<String, WebError> {
        let mut url = web::parse_url(raw_url)?;
        let mut hops = 0;
        let response = loop {
            if !self.allow_private {
                web::check_public(&url).await?;
            }
            let response = self
                .client
                .get(url.clone())
                .send()
                .await
                .map_err(|e| request_error(&url, &e))?;
            if !response.status().is_redirection() {
                break response;
            }
            let Some(next) = response
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| url.join(l).ok())
            else {
                break response;
            };
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(WebError::TooManyRedirects {
                    url: raw_url.to_string(),
                });
            }
            url = web::parse_url(next.as_str())?;
        };
        let status = response.status();
        if !status.is_success() {
            return Err(WebError::Status {
                url: url.to_string(),
                status: status.as_u16(),
            });
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let (body, cut) = web::read_capped(response, MAX_PAGE_BYTES).await?;
        let text = String::from_utf8_lossy(&body).into_owned();
        let kind = PageKind::of(&content_type, &text);
        let (title, content) = match kind {
            PageKind::Html => tokio::task::spawn_blocking(move || html_to_markdown(&text))
                .await
                .map_err(|e| WebError::Request {
                    url: url.to_string(),
                    detail: format!("converting the page failed: {e}"),
                })?,
            PageKind::Text => (None, text),
            PageKind::Binary => {
                return Err(WebError::Request {
                    url: url.to_string(),
                    detail: format!(
                        "it is not a text page (content type {content_type}); web_fetch reads HTML and text only"
                    ),
                });
            }
        };
        let mut page = String::new();
        if let Some(title) = title.filter(|t| !t.is_empty()) {
            page.push_str(&format!("# {title}\n\n"));
        }
        page.push_str(&format!("Source: {url}\n\n{}", content.trim()));
        if cut {
            page.push_str(&format!(
                "\n\n(only the first {MAX_PAGE_BYTES} bytes of the page were read)"
            ));
        }
        Ok(truncate_head(&page, self.max_chars, TRUNCATION_HINT))
    }
}

#[derive(Debug, PartialEq, Eq)]
enum PageKind {
    Html,
    Text,
    Binary,
}

impl PageKind {
    fn of(content_type: &str, body: &str) -> Self {
        let mime = content_type.split(';').next().unwrap_or_default().trim();
        match mime {
            "text/html" | "application/xhtml+xml" => Self::Html,
            "" if body.trim_start().starts_with('<') => Self::Html,
            "" => Self::Text,
            m if m.starts_with("text/")
                || m.ends_with("json")
                || m.ends_with("xml")
                || m.ends_with("javascript") =>
            {
                Self::Text
            }
            _ => Self::Binary,
        }
    }
}

/// The page title and its content as Markdown, without scripts, styles and navigation.
pub fn html_to_markdown(html: &str) -> (Option<String>, String) {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED_TAGS.to_vec())
        .build();
    let Ok(tree) = converter.html_to_tree(html) else {
        return (None, String::new());
    };
    let title = find_all(&tree, &|n| tag(n).as_deref() == Some("title"))
        .first()
        .map(web::text);
    let markdown = converter.tree_to_markdown(&tree);
    (title, collapse_blank_lines(&markdown))
}

/// At most one blank line in a row: converted pages are full of empty blocks.
fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
            out.push('\n');
        } else {
            blank = 0;
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out.trim().to_string()
}

#[async_trait]
impl Tool for WebFetchTool {
    fn name(&self) -> &str {
        &self.meta.name
    }

    fn description(&self) -> &str {
        "Fetch a web page and return its content as Markdown (long pages are cut). Only fetch \
         exact URLs the user gave or that web_search returned, complete with their scheme \
         (https://…); never guess or build a URL. Only public http(s) addresses can be fetched."
    }

    fn parameters(&self) -> Value {
        schema_for::<WebFetchArgs>()
    }

    fn group(&self) -> Option<&str> {
        self.meta.group.as_deref()
    }

    async fn call(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: WebFetchArgs = parse_args(args)?;
        match self.fetch(&args.url).await {
            Ok(page) => Ok(ToolOutput::text(page)),
            Err(error) => Ok(ToolOutput::text(format!("Error: {error}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_markdown_without_scripts_or_navigation() {
        let html = r#"<html><head><title>Tea  Guide</title><style>p{}</style></head><body>
            <nav><a href="/">Home</a></nav>
            <h1>Brewing</h1><script>alert(1)</script>
            <p>Use <strong>hot</strong> water.</p><p></p><p></p>
            <ul><li>Green</li><li>Black</li></ul>
            <footer>© 2026</footer></body></html>"#;
        let (title, markdown) = html_to_markdown(html);
        assert_eq!(title.as_deref(), Some("Tea Guide"));
        assert!(markdown.starts_with("# Brewing"), "{markdown}");
        assert!(markdown.contains("Use **hot** water."), "{markdown}");
        assert!(markdown.contains("*   Green"), "{markdown}");
        for gone in ["alert", "Home", "©", "p{}", "\n\n\n"] {
            assert!(!markdown.contains(gone), "{gone:?} in {markdown}");
        }
    }

    #[test]
    fn page_kind_follows_content_type_then_body() {
        assert_eq!(PageKind::of("text/html; charset=utf-8", ""), PageKind::Html);
        assert_eq!(PageKind::of("application/json", "{}"), PageKind::Text);
        assert_eq!(PageKind::of("", "<!doctype html>"), PageKind::Html);
        assert_eq!(PageKind::of("image/png", ""), PageKind::Binary);
    }
}
