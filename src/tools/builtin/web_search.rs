//! `web_search(query, max_results?)`: web results as plain text, from DuckDuckGo's HTML page,
//! Tavily's search API or Jina's search endpoint, chosen per tool in the config.

use std::rc::Rc;
use std::time::Duration;

use async_trait::async_trait;
use markup5ever_rcdom::Node;
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent_api::shared::truncate_chars;
use crate::agent_api::taint::UntrustedOutput;
use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::config::Secret;
use crate::tools::builtin::ToolMeta;
use crate::tools::builtin::web::{
    self, DEFAULT_TIMEOUT, WebError, attr, find_all, has_class, request_error, tag,
};

/// Results per search when neither the call nor the config says.
pub(crate) const DEFAULT_MAX_RESULTS: usize = 5;
/// Upper bound for `max_results`, whatever the model asks for.
pub(crate) const MAX_RESULTS_CAP: usize = 20;
const SNIPPET_MAX_CHARS: usize = 500;
/// Search pages are small; anything bigger is not a result page.
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// Where `web_search` gets its results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchProvider {
    /// `https://html.duckduckgo.com/html/?q=` (no key; may rate-limit busy servers).
    DuckDuckGo,
    /// `POST https://api.tavily.com/search` (needs `api_key`).
    Tavily,
    /// `https://s.jina.ai/?q=` (`api_key` optional but recommended).
    Jina,
}

impl SearchProvider {
    pub fn parse(name: &str) -> Result<Self, String> {
        match name.trim().to_ascii_lowercase().as_str() {
            "ddg" | "duckduckgo" => Ok(Self::DuckDuckGo),
            "tavily" => Ok(Self::Tavily),
            "jina" => Ok(Self::Jina),
            other => Err(format!(
                "unknown search provider `{other}`; use ddg, tavily or jina"
            )),
        }
    }

    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::DuckDuckGo => "https://html.duckduckgo.com/html/",
            Self::Tavily => "https://api.tavily.com/search",
            Self::Jina => "https://s.jina.ai/",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::DuckDuckGo => "DuckDuckGo",
            Self::Tavily => "Tavily",
            Self::Jina => "Jina",
        }
    }
}

/// Arguments of `web_search`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct WebSearchArgs {
    /// What to search for, as you would type it into a search engine.
    pub(crate) query: String,
    /// How many results to return (1-20; default from the configuration, usually 5).
    #[serde(default)]
    pub(crate) max_results: Option<usize>,
}

/// One search hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchResult {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

pub struct WebSearchTool {
    meta: ToolMeta,
    provider: SearchProvider,
    api_key: Option<Secret>,
    max_results: usize,
    base_url: Url,
    client: reqwest::Client,
}

impl WebSearchTool {
    /// Builds the tool from its config parameters; `Err` says what to fix.
    pub fn from_params(
        meta: ToolMeta,
        provider: Option<String>,
        api_key: Option<String>,
        max_results: Option<usize>,
        base_url: Option<String>,
        timeout_seconds: Option<u64>,
    ) -> Result<Self, String> {
        let provider = match provider {
            Some(name) => SearchProvider::parse(&name)?,
            None => SearchProvider::DuckDuckGo,
        };
        let api_key = api_key.filter(|k| !k.trim().is_empty()).map(Secret::new);
        if provider == SearchProvider::Tavily && api_key.is_none() {
            return Err(
                "provider tavily needs `api_key` (for example `api_key: $TAVILY_API_KEY`)".into(),
            );
        }
        let raw_base = base_url.unwrap_or_else(|| provider.default_base_url().to_string());
        let base_url = web::parse_url(&raw_base).map_err(|e| format!("base_url: {e}"))?;
        let timeout = timeout_seconds.map_or(DEFAULT_TIMEOUT, |s| Duration::from_secs(s.max(1)));
        Ok(Self {
            meta,
            provider,
            api_key,
            max_results: max_results
                .unwrap_or(DEFAULT_MAX_RESULTS)
                .clamp(1, MAX_RESULTS_CAP),
            base_url,
            // The base URL comes from the operator's config, not the model: no address guard.
            client: web::client(timeout, true)?,
        })
    }

    pub fn provider(&self) -> SearchProvider {
        self.provider
    }

    /// Runs one search.
    pub async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchResult>, WebError> {
        let request = match self.provider {
            SearchProvider::DuckDuckGo => self
                .client
                .get(self.base_url.clone())
                .query(&[("q", query)]),
            SearchProvider::Tavily => {
                let key = self
                    .api_key
                    .as_ref()
                    .map(Secret::expose)
                    .unwrap_or_default();
                self.client
                    .post(self.base_url.clone())
                    .bearer_auth(key)
                    .json(&json!({"query": query, "max_results": limit, "api_key": key}))
            }
            SearchProvider::Jina => {
                let request = self
                    .client
                    .get(self.base_url.clone())
                    .query(&[("q", query)])
                    .header(reqwest::header::ACCEPT, "application/json");
                match &self.api_key {
                    Some(key) => request.bearer_auth(key.expose()),
                    None => request,
                }
            }
        };
        let response = request
            .send()
            .await
            .map_err(|e| request_error(&self.base_url, &e))?;
        let status = response.status();
        let final_url = response.url().clone();
        let (body, _) = web::read_capped(response, MAX_BODY_BYTES).await?;
        // DuckDuckGo answers a suspected bot with 202 and a challenge page instead of results.
        if self.provider == SearchProvider::DuckDuckGo && status.as_u16() == 202 {
            return Err(WebError::Request {
                url: self.base_url.to_string(),
                detail: "DuckDuckGo is rate-limiting this server (HTTP 202); an operator can \
                         configure `provider: tavily` or `jina` instead"
                    .into(),
            });
        }
        if !status.is_success() {
            return Err(WebError::Status {
                url: self.base_url.to_string(),
                status: status.as_u16(),
            });
        }
        let body = String::from_utf8_lossy(&body).into_owned();
        let mut results = match self.provider {
            // Up to 2 MiB of HTML: parsed on the blocking pool, not the runtime's worker.
            SearchProvider::DuckDuckGo => {
                tokio::task::spawn_blocking(move || parse_duckduckgo(&body, &final_url))
                    .await
                    .unwrap_or_else(|e| Err(format!("parsing the result page failed: {e}")))
            }
            SearchProvider::Tavily => parse_json_results(&body, "results", "content"),
            SearchProvider::Jina => parse_json_results(&body, "data", "description"),
        }
        .map_err(|detail| WebError::Request {
            url: self.base_url.to_string(),
            detail,
        })?;
        results.truncate(limit);
        Ok(results)
    }
}

#[async_trait]
impl Tool for WebSearchTool {
    fn name(&self) -> &str {
        &self.meta.name
    }

    fn description(&self) -> &str {
        "Search the web. Returns titles, URLs and snippets; use web_fetch to read a page."
    }

    fn parameters(&self) -> Value {
        schema_for::<WebSearchArgs>()
    }

    fn group(&self) -> Option<&str> {
        self.meta.group.as_deref()
    }

    fn untrusted_output(&self) -> Option<UntrustedOutput> {
        Some(UntrustedOutput::FromArgument {
            kind: "web_search",
            argument: "query",
        })
    }

    async fn call(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: WebSearchArgs = parse_args(args)?;
        let query = args.query.trim();
        if query.is_empty() {
            return Ok(ToolOutput::text(
                "Error: the search query is empty; say what to search for.",
            ));
        }
        let limit = args
            .max_results
            .unwrap_or(self.max_results)
            .clamp(1, MAX_RESULTS_CAP);
        match self.search(query, limit).await {
            Ok(results) => Ok(ToolOutput::text(format_results(
                query,
                self.provider,
                &results,
            ))),
            Err(error) => Ok(ToolOutput::text(format!(
                "Error: web search ({}) failed: {error}. Try again later or answer from what you know.",
                self.provider.label()
            ))),
        }
    }
}

/// The model-facing text of a result list.
pub fn format_results(query: &str, provider: SearchProvider, results: &[SearchResult]) -> String {
    if results.is_empty() {
        return format!(
            "No results found for \"{query}\" ({}). Try other keywords.",
            provider.label()
        );
    }
    let mut text = format!("Search results for \"{query}\" ({}):\n", provider.label());
    for (n, result) in results.iter().enumerate() {
        text.push_str(&format!(
            "\n{}. {}\n   {}\n",
            n + 1,
            result.title,
            result.url
        ));
        if !result.snippet.is_empty() {
            text.push_str(&format!("   {}\n", result.snippet));
        }
    }
    text
}

/// Results of DuckDuckGo's HTML page (`.result` blocks; ads skipped; redirect links unwrapped).
pub fn parse_duckduckgo(html: &str, page_url: &Url) -> Result<Vec<SearchResult>, String> {
    // Nesting bounded: the page comes from the network like any other.
    let tree = antler_convert::html::parse(html).document;
    let blocks = find_all(&tree, &|n| {
        has_class(n, "result") && !has_class(n, "result--ad")
    });
    let first = |block: &Rc<Node>, class: &str| {
        find_all(block, &|n| has_class(n, class)).into_iter().next()
    };
    let mut results = Vec::new();
    for block in blocks {
        let Some(link) = first(&block, "result__a").filter(|n| tag(n).as_deref() == Some("a"))
        else {
            continue;
        };
        let Some(url) = attr(&link, "href").and_then(|href| unwrap_ddg_link(&href, page_url))
        else {
            continue;
        };
        let snippet = first(&block, "result__snippet")
            .map(|n| web::text(&n))
            .unwrap_or_default();
        results.push(SearchResult {
            title: web::text(&link),
            url,
            snippet: truncate_chars(&snippet, SNIPPET_MAX_CHARS).to_string(),
        });
    }
    Ok(results)
}

/// `//duckduckgo.com/l/?uddg=<target>&rut=…` → the target; plain links are made absolute.
fn unwrap_ddg_link(href: &str, page_url: &Url) -> Option<String> {
    let url = page_url.join(href).ok()?;
    if url.path() == "/l/"
        && let Some((_, target)) = url.query_pairs().find(|(k, _)| k == "uddg")
    {
        return Some(target.into_owned());
    }
    matches!(url.scheme(), "http" | "https").then(|| url.to_string())
}

/// Results of a JSON API: `{<list_key>: [{title, url, <snippet_key>|content}]}`.
fn parse_json_results(
    body: &str,
    list_key: &str,
    snippet_key: &str,
) -> Result<Vec<SearchResult>, String> {
    let value: Value = serde_json::from_str(body)
        .map_err(|e| format!("the answer was not the expected JSON ({e})"))?;
    let Some(items) = value.get(list_key).and_then(Value::as_array) else {
        return Err(format!("the answer has no `{list_key}` list"));
    };
    let field = |item: &Value, key: &str| {
        item.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    Ok(items
        .iter()
        .filter_map(|item| {
            let url = field(item, "url");
            if url.is_empty() {
                return None;
            }
            let mut snippet = field(item, snippet_key);
            if snippet.is_empty() {
                snippet = field(item, "content");
            }
            let snippet = snippet.split_whitespace().collect::<Vec<_>>().join(" ");
            Some(SearchResult {
                title: field(item, "title"),
                url,
                snippet: truncate_chars(&snippet, SNIPPET_MAX_CHARS).to_string(),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duckduckgo_links_are_unwrapped_and_ads_skipped() {
        let html = r#"<html><body>
          <div class="result results_links result--ad"><a class="result__a" href="https://ads.example/">Ad</a></div>
          <div class="result results_links">
            <h2 class="result__title"><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust-lang.org%2F&amp;rut=abc">Rust <b>Programming</b> Language</a></h2>
            <a class="result__snippet" href="x">A language empowering   everyone.</a>
          </div>
          <div class="result"><a class="result__a" href="https://docs.rs/">Docs.rs</a></div>
        </body></html>"#;
        let page = Url::parse("https://html.duckduckgo.com/html/?q=rust").unwrap();
        let results = parse_duckduckgo(html, &page).unwrap();
        assert_eq!(
            results,
            vec![
                SearchResult {
                    title: "Rust Programming Language".into(),
                    url: "https://www.rust-lang.org/".into(),
                    snippet: "A language empowering everyone.".into(),
                },
                SearchResult {
                    title: "Docs.rs".into(),
                    url: "https://docs.rs/".into(),
                    snippet: String::new(),
                },
            ]
        );
    }

    #[test]
    fn json_results_fall_back_to_content_and_skip_urlless_items() {
        let body = r#"{"data": [{"title": "A", "url": "https://a.example", "content": "body"}, {"title": "no url"}]}"#;
        let results = parse_json_results(body, "data", "description").unwrap();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].snippet, "body");
        assert!(parse_json_results("{}", "results", "content").is_err());
    }

    #[test]
    fn config_is_checked() {
        let meta = || ToolMeta::new("web_search", Some("web"));
        let tavily =
            WebSearchTool::from_params(meta(), Some("tavily".into()), None, None, None, None);
        assert!(tavily.err().unwrap().contains("needs `api_key`"));
        let unknown =
            WebSearchTool::from_params(meta(), Some("bing".into()), None, None, None, None);
        assert!(unknown.err().unwrap().contains("use ddg, tavily or jina"));
        let ddg = WebSearchTool::from_params(meta(), None, None, Some(100), None, None).unwrap();
        assert_eq!(ddg.provider(), SearchProvider::DuckDuckGo);
        assert_eq!(ddg.max_results, MAX_RESULTS_CAP);
        assert_eq!(
            format_results("q", SearchProvider::Jina, &[]),
            "No results found for \"q\" (Jina). Try other keywords."
        );
    }
}
