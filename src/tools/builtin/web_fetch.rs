//! `web_fetch(url)`: a web page as readable Markdown, capped in length. Private, loopback and
//! link-local addresses are refused (also after redirects) unless the tool's config sets
//! `allow_private_networks: true`. HTML is converted in a converter child (`converter`), like
//! uploaded documents: a page that needs too much memory or time costs that child only, and
//! the model reads why the page could not be converted.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{CONTENT_TYPE, LOCATION};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::taint::UntrustedOutput;
use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::tools::builtin::web::{self, DEFAULT_TIMEOUT, MAX_REDIRECTS, WebError, request_error};
use crate::tools::builtin::{ToolMeta, truncate_head};
use antler_convert::{Converter, Limits, html::MAX_DEPTH};

/// Characters of Markdown returned when the config does not say.
pub(crate) const DEFAULT_MAX_CHARS: usize = 20_000;
/// Bytes of a page read at most; the rest is never downloaded.
pub(crate) const MAX_PAGE_BYTES: usize = 5 * 1024 * 1024;
const TRUNCATION_HINT: &str = "The page is longer; fetch a more specific URL for the rest";
/// Bytes of a body looked at to tell HTML from text when the server names no type.
const SNIFF_BYTES: usize = 1024;

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
    converter: Converter,
    limits: Limits,
}

impl WebFetchTool {
    /// `Err` when no HTTP client can be built (the TLS backend failed to load). Pages are
    /// converted by `converter` within `limits`.
    pub fn new(
        meta: ToolMeta,
        max_chars: Option<usize>,
        timeout_seconds: Option<u64>,
        allow_private_networks: bool,
        converter: Converter,
        limits: Limits,
    ) -> Result<Self, String> {
        let timeout = timeout_seconds.map_or(DEFAULT_TIMEOUT, |s| Duration::from_secs(s.max(1)));
        Ok(Self {
            meta,
            max_chars: max_chars.unwrap_or(DEFAULT_MAX_CHARS),
            allow_private: allow_private_networks,
            client: web::client(timeout, allow_private_networks)?,
            converter,
            limits,
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
        let sniffed = String::from_utf8_lossy(&body[..body.len().min(SNIFF_BYTES)]);
        let (title, content, flattened) = match PageKind::of(&content_type, &sniffed) {
            PageKind::Html => {
                let page = self
                    .converter
                    .convert_page(body, &self.limits)
                    .await
                    .map_err(|error| WebError::Unconvertible {
                        url: url.to_string(),
                        error,
                    })?;
                (page.title, page.markdown, page.flattened)
            }
            PageKind::Text => (None, String::from_utf8_lossy(&body).into_owned(), 0),
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
        page.push_str(&format!("Source: {url}\n\n"));
        // Before the content, so a long page's cut does not take it away.
        if flattened > 0 {
            page.push_str(&format!(
                "(the page nests deeper than {MAX_DEPTH} levels; {flattened} deeper elements \
                 were read as plain text)\n\n"
            ));
        }
        page.push_str(content.trim());
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

    fn untrusted_output(&self) -> Option<UntrustedOutput> {
        Some(UntrustedOutput::FromArgument {
            kind: "web_fetch",
            argument: "url",
        })
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
    fn page_kind_follows_content_type_then_body() {
        assert_eq!(PageKind::of("text/html; charset=utf-8", ""), PageKind::Html);
        assert_eq!(PageKind::of("application/json", "{}"), PageKind::Text);
        assert_eq!(PageKind::of("", "<!doctype html>"), PageKind::Html);
        assert_eq!(PageKind::of("image/png", ""), PageKind::Binary);
    }
}
