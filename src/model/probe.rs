//! A cheap reachability check of the default model's endpoint, for `/readyz` and `antler status`.
//!
//! One `GET` of the provider's model list (`{base_url}/models` for OpenAI-compatible servers,
//! `/v1/models` for Anthropic) with a short timeout; the answer is cached for
//! [`PROBE_INTERVAL`], so a busy health checker never turns into load on the model server and a
//! readiness request waits at most [`PROBE_TIMEOUT`]. Readiness never depends on it: a model
//! that is down is reported, the daemon keeps serving.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::config::{ModelConfig, ModelSetting, Provider};
use crate::model::http::{causes, display_endpoint};

/// How long one probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long an answer is reused before the endpoint is asked again.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(30);

/// What `/readyz` says about the default model. Never carries the API key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelReachability {
    /// The configured `models[].name`.
    pub name: String,
    /// `openai` (any OpenAI-compatible server) or `anthropic`.
    pub provider: String,
    /// The provider's model id.
    pub model: String,
    /// `base_url` without credentials, query or fragment.
    pub endpoint: String,
    /// Whether the endpoint answered at all.
    pub reachable: bool,
    /// What is wrong, when something is (unreachable, refused key, unexpected status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The probe with its cache. Cheap to clone; clones share the cache.
#[derive(Clone)]
pub struct ModelProbe {
    /// Built at the first probe: a daemon nobody asks about its model pays nothing for it.
    http: Arc<std::sync::OnceLock<Result<reqwest::Client, String>>>,
    timeout: Duration,
    interval: Duration,
    cache: Arc<tokio::sync::Mutex<Option<Cached>>>,
}

struct Cached {
    /// The probed settings: a config reload that changes them is probed at once.
    model: ModelConfig,
    at: Instant,
    answer: ModelReachability,
}

impl Default for ModelProbe {
    fn default() -> Self {
        Self::new(PROBE_TIMEOUT, PROBE_INTERVAL)
    }
}

impl ModelProbe {
    pub fn new(timeout: Duration, interval: Duration) -> Self {
        Self {
            http: Arc::default(),
            timeout,
            interval,
            cache: Arc::default(),
        }
    }

    /// The model's reachability, from the cache when it is recent, else probed now (bounded by
    /// the timeout). Concurrent callers wait for one probe instead of starting their own.
    pub async fn check(&self, model: &ModelConfig) -> ModelReachability {
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_ref()
            && cached.at.elapsed() < self.interval
            && same_endpoint(&cached.model, model)
        {
            return cached.answer.clone();
        }
        let answer = self.probe(model).await;
        *cache = Some(Cached {
            model: model.clone(),
            at: Instant::now(),
            answer: answer.clone(),
        });
        answer
    }

    async fn probe(&self, model: &ModelConfig) -> ModelReachability {
        let mut answer = ModelReachability {
            name: model.name.clone(),
            provider: provider_name(&model.provider).to_string(),
            model: model.model.clone(),
            endpoint: display_endpoint(&model.base_url),
            reachable: false,
            problem: None,
        };
        // The model calls' own client settings (system proxies honoured), so the probe sees
        // the endpoint the way a run does.
        let http = self.http.get_or_init(|| {
            crate::model::registry::ModelRegistry::http_client().map_err(|e| e.to_string())
        });
        let http = match http {
            Ok(http) => http,
            Err(error) => {
                answer.problem = Some(format!("cannot build an HTTP client: {error}"));
                return answer;
            }
        };
        if model.base_url.trim().is_empty() {
            answer.problem = Some(format!(
                "model '{}' has no base_url; set models[].base_url",
                model.name
            ));
            return answer;
        }
        let key = model
            .api_key
            .as_ref()
            .map(|k| k.expose())
            .filter(|k| !k.is_empty());
        let root = model.base_url.trim().trim_end_matches('/');
        let request = match model.provider {
            Provider::Openai => {
                let request = http.get(format!("{root}/models"));
                match key {
                    Some(key) => request.bearer_auth(key),
                    None => request,
                }
            }
            Provider::Anthropic => {
                let root = root.strip_suffix("/v1").unwrap_or(root);
                let request = http
                    .get(format!("{root}/v1/models"))
                    .header("anthropic-version", "2023-06-01");
                match key {
                    Some(key) => request.header("x-api-key", key),
                    None => request,
                }
            }
        };
        match request.timeout(self.timeout).send().await {
            Ok(response) => {
                answer.reachable = true;
                let status = response.status().as_u16();
                answer.problem = status_problem(model, status);
                if answer.problem.is_none() {
                    // The same request's timeout covers reading the list.
                    let list = response.json::<serde_json::Value>().await.ok();
                    answer.problem = list.and_then(|list| unserved_problem(model, &list));
                }
            }
            Err(error) => answer.problem = Some(send_problem(model, error, self.timeout)),
        }
        answer
    }
}

/// Ids shown when a model is missing from the server's list (the rest are counted).
const SHOWN_IDS: usize = 12;

/// The problem when the server's model list (`{"data": [{"id": …}]}`, OpenAI's and
/// Anthropic's shape) lacks the configured id. `None` when it has it, when the answer is not
/// such a list, or when the list is one page of more (Anthropic pages it). An alias matches
/// the dated ids it stands for (`claude-sonnet-4-5` → `claude-sonnet-4-5-20250929`).
fn unserved_problem(model: &ModelConfig, list: &serde_json::Value) -> Option<String> {
    let ids: Vec<&str> = list["data"]
        .as_array()?
        .iter()
        .filter_map(|entry| entry["id"].as_str())
        .collect();
    let wanted = model.model.as_str();
    let served = |id: &&str| {
        *id == wanted
            || id
                .strip_prefix(wanted)
                .is_some_and(|rest| rest.starts_with('-'))
    };
    if ids.is_empty() || ids.iter().any(served) || list["has_more"].as_bool() == Some(true) {
        return None;
    }
    let mut shown = ids[..ids.len().min(SHOWN_IDS)].join(", ");
    if ids.len() > SHOWN_IDS {
        shown.push_str(&format!(" and {} more", ids.len() - SHOWN_IDS));
    }
    Some(format!(
        "model id '{wanted}' is not served at {}; it serves: {shown}; set {} to one of them",
        display_endpoint(&model.base_url),
        model.sources.fix(&model.name, ModelSetting::Model)
    ))
}

/// The name of a provider as the config spells it.
pub fn provider_name(provider: &Provider) -> &'static str {
    match provider {
        Provider::Openai => "openai",
        Provider::Anthropic => "anthropic",
    }
}

fn same_endpoint(a: &ModelConfig, b: &ModelConfig) -> bool {
    a.name == b.name
        && a.provider == b.provider
        && a.model == b.model
        && a.base_url == b.base_url
        && a.api_key.as_ref().map(|k| k.expose()) == b.api_key.as_ref().map(|k| k.expose())
}

fn status_problem(model: &ModelConfig, status: u16) -> Option<String> {
    let fix = |setting| model.sources.fix(&model.name, setting);
    match status {
        200..=299 => None,
        401 | 403 => Some(format!(
            "the endpoint refused the API key (HTTP {status}); set {} to a key it accepts",
            fix(ModelSetting::ApiKey)
        )),
        300..=399 => Some(format!(
            "the endpoint redirects elsewhere (HTTP {status}); set {} to the address it \
             redirects to",
            fix(ModelSetting::BaseUrl)
        )),
        404 => Some(format!(
            "the endpoint has no model list (HTTP 404); check {} (OpenAI-compatible URLs \
             usually end in /v1)",
            fix(ModelSetting::BaseUrl)
        )),
        _ => Some(format!("the endpoint answered HTTP {status}")),
    }
}

fn send_problem(model: &ModelConfig, error: reqwest::Error, timeout: Duration) -> String {
    let fix = model.sources.fix(&model.name, ModelSetting::BaseUrl);
    if error.is_timeout() {
        return format!(
            "no answer within {} s; is the model server up and reachable from here? (its \
             address is {fix})",
            timeout.as_secs_f64()
        );
    }
    if error.is_builder() {
        return format!(
            "base_url is not a usable URL: {}; set {fix} to the server's address",
            causes(&error.without_url())
        );
    }
    format!(
        "cannot connect: {}; start the model server there, or set {fix} to the address of one \
         that runs",
        causes(&error.without_url())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn model(base_url: &str) -> ModelConfig {
        ModelConfig {
            name: "main".into(),
            model: "m-1".into(),
            base_url: base_url.into(),
            api_key: Some(Secret::new("sk-secret")),
            ..Default::default()
        }
    }

    /// A server that answers every request with `status` and counts them.
    async fn server(status: u16) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                assert_eq!(headers["authorization"], "Bearer sk-secret");
                axum::http::StatusCode::from_u16(status).unwrap()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/v1"), hits)
    }

    #[tokio::test]
    async fn an_answering_endpoint_is_reachable_and_the_answer_is_cached() {
        let (url, hits) = server(200).await;
        let probe = ModelProbe::default();
        let answer = probe.check(&model(&url)).await;
        assert!(answer.reachable && answer.problem.is_none(), "{answer:?}");
        assert_eq!(answer.endpoint, url);
        assert_eq!(answer.provider, "openai");
        probe.check(&model(&url)).await;
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Another endpoint is probed at once, whatever the cache holds.
        let (other, other_hits) = server(401).await;
        let answer = probe.check(&model(&other)).await;
        assert!(answer.reachable, "{answer:?}");
        assert!(answer.problem.unwrap().contains("refused the API key"));
        assert_eq!(other_hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// Runs do not follow redirects (a POST would lose its body), so neither does the probe:
    /// it names the redirect instead of reporting the address it was sent on to as reachable.
    #[tokio::test]
    async fn a_redirecting_endpoint_is_reported_and_not_followed() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let followed = Arc::new(AtomicUsize::new(0));
        let counter = followed.clone();
        let app = axum::Router::new()
            .route(
                "/moved/models",
                axum::routing::get(move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                    async { "{\"data\": []}" }
                }),
            )
            .fallback(|| async {
                (
                    axum::http::StatusCode::FOUND,
                    [(axum::http::header::LOCATION, "/moved/models")],
                )
            });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let answer = ModelProbe::default()
            .check(&model(&format!("http://{addr}/v1")))
            .await;
        assert!(answer.reachable, "{answer:?}");
        let problem = answer.problem.expect("a redirect is a problem");
        assert!(
            problem.contains("redirects elsewhere (HTTP 302)"),
            "{problem}"
        );
        assert!(
            problem.contains("set models[].base_url of 'main'"),
            "{problem}"
        );
        assert_eq!(
            followed.load(Ordering::SeqCst),
            0,
            "the redirect was followed"
        );
    }

    #[tokio::test]
    async fn a_stale_answer_is_probed_again() {
        let (url, hits) = server(200).await;
        let probe = ModelProbe::new(PROBE_TIMEOUT, Duration::ZERO);
        probe.check(&model(&url)).await;
        probe.check(&model(&url)).await;
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn nobody_listening_is_unreachable_and_says_so() {
        // Bind, then close: the port is free and refuses connections.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let answer = ModelProbe::default()
            .check(&model(&format!("http://127.0.0.1:{port}/v1")))
            .await;
        assert!(!answer.reachable);
        let problem = answer.problem.unwrap();
        assert!(problem.starts_with("cannot connect"), "{problem}");
        assert!(!problem.contains("sk-secret"));
    }

    /// On paused time: the clock moves only when nothing else can run, so the elapsed time is
    /// the probe's own waiting, not a loaded machine's.
    #[tokio::test(start_paused = true)]
    async fn a_silent_endpoint_costs_at_most_the_timeout() {
        // Accepts connections but never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _keep = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                open.push(stream);
            }
        });
        let probe = ModelProbe::new(Duration::from_millis(300), PROBE_INTERVAL);
        let started = tokio::time::Instant::now();
        let answer = probe.check(&model(&format!("http://{addr}/v1"))).await;
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        assert!(!answer.reachable);
        assert!(answer.problem.unwrap().starts_with("no answer within"));
    }

    #[test]
    fn a_model_id_missing_from_the_list_is_named_with_what_the_server_serves() {
        use crate::config::ModelSources;
        use serde_json::json;
        let mut main = model("http://127.0.0.1:11434/v1");
        main.model = "qwen9".into();
        main.sources = ModelSources {
            index: Some(0),
            model: Some("ANTLER_MODEL".into()),
            ..Default::default()
        };
        let list = |ids: &[&str]| json!({"data": ids.iter().map(|id| json!({"id": id})).collect::<Vec<_>>()});
        assert_eq!(
            unserved_problem(&main, &list(&["qwen2.5:7b", "llama3"])).as_deref(),
            Some(
                "model id 'qwen9' is not served at http://127.0.0.1:11434/v1; it serves: \
                 qwen2.5:7b, llama3; set ANTLER_MODEL to one of them"
            )
        );
        assert_eq!(unserved_problem(&main, &list(&["qwen9"])), None);
        // An alias stands for its dated ids; a paged list or no list says nothing.
        main.model = "claude-sonnet-4-5".into();
        assert_eq!(
            unserved_problem(&main, &list(&["claude-sonnet-4-5-20250929"])),
            None
        );
        let mut paged = list(&["claude-3-haiku-20240307"]);
        paged["has_more"] = json!(true);
        assert_eq!(unserved_problem(&main, &paged), None);
        assert_eq!(unserved_problem(&main, &json!({"models": []})), None);
        let many: Vec<String> = (0..20).map(|n| format!("m{n}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let problem = unserved_problem(&main, &list(&many)).unwrap();
        assert!(problem.contains("m11 and 8 more"), "{problem}");
    }

    #[test]
    fn endpoints_are_shown_without_credentials() {
        assert_eq!(
            display_endpoint("https://user:pw@gw.example/v1/?key=abc#x"),
            "https://gw.example/v1"
        );
        assert_eq!(
            display_endpoint("http://127.0.0.1:11434/v1"),
            "http://127.0.0.1:11434/v1"
        );
        assert_eq!(display_endpoint("sk-oops"), "(not a valid URL)");
    }
}
