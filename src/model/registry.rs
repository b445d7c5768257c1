//! The configured models by name: one shared HTTP client, retries and fallback chains wired in.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{AppConfig, ModelConfig, Provider};
use crate::model::{
    AnthropicModel, ChatModel, FallbackModel, ModelError, OpenAiModel, RetryPolicy, RetryingModel,
};

/// Connection attempts give up after this long; the per-model `timeout` bounds the rest.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const IDLE_CONNECTIONS_PER_HOST: usize = 16;
const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// Models ready to call, in config order; the first one is the default.
#[derive(Clone, Default)]
pub struct ModelRegistry {
    order: Vec<String>,
    entries: HashMap<String, Entry>,
}

#[derive(Clone)]
struct Entry {
    model: Arc<dyn ChatModel>,
    config: ModelConfig,
}

impl ModelRegistry {
    /// An empty registry, to be filled with [`ModelRegistry::with_model`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds every `models[]` entry with a shared client that honours the system proxy settings.
    pub fn from_config(config: &AppConfig) -> Result<Self, ModelError> {
        Self::from_config_with_client(config, Self::http_client()?)
    }

    /// Like [`ModelRegistry::from_config`] with a caller-built client (tests, custom TLS).
    pub fn from_config_with_client(
        config: &AppConfig,
        client: reqwest::Client,
    ) -> Result<Self, ModelError> {
        let policy = RetryPolicy::from_config(&config.llm_call);
        let mut base: HashMap<&str, Arc<dyn ChatModel>> = HashMap::new();
        for model in &config.models {
            if model.name.is_empty() {
                return Err(ModelError::Config(
                    "a models[] entry has no name; give every model a unique name".into(),
                ));
            }
            if base.contains_key(model.name.as_str()) {
                return Err(ModelError::Config(format!(
                    "two models are named '{}'; model names must be unique",
                    model.name
                )));
            }
            if model.base_url.trim().is_empty() {
                return Err(ModelError::Config(format!(
                    "model '{}' has no base_url; set models[].base_url",
                    model.name
                )));
            }
            let provider: Arc<dyn ChatModel> = match model.provider {
                Provider::Openai => Arc::new(OpenAiModel::new(model, client.clone())),
                Provider::Anthropic => Arc::new(AnthropicModel::new(model, client.clone())),
            };
            base.insert(
                &model.name,
                Arc::new(RetryingModel::new(provider, policy.clone())),
            );
        }
        let mut registry = Self::new();
        for model in &config.models {
            let chain = fallback_chain(config, &model.name)?;
            // Fold from the last fallback backwards: each model falls back to the rest of its chain.
            let mut wired: Option<Arc<dyn ChatModel>> = None;
            for name in chain.iter().rev() {
                let Some(own) = base.get(name.as_str()).cloned() else {
                    continue;
                };
                wired = Some(match wired {
                    None => own,
                    Some(rest) => Arc::new(FallbackModel::new(own, rest)),
                });
            }
            if let Some(wired) = wired {
                registry = registry.with_model(&model.name, wired, model.clone());
            }
        }
        Ok(registry)
    }

    /// The production HTTP client: rustls, system proxies honoured, bounded connect time.
    pub fn http_client() -> Result<reqwest::Client, ModelError> {
        reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("antler/", env!("CARGO_PKG_VERSION")))
            // A burst of runs opens a connection each; keeping them all idle for reqwest's
            // default 90 s held ~16 KiB of buffers apiece after the burst. A few warm ones
            // are enough to skip the TLS handshake on the next turns.
            .pool_max_idle_per_host(IDLE_CONNECTIONS_PER_HOST)
            .pool_idle_timeout(IDLE_CONNECTION_TIMEOUT)
            // Followed, a 301/302 turns the POST into a bodiless GET and a 307/308 needs the
            // body kept to resend (see `http::unkept_body`); `Endpoint::send` names the new
            // address instead, and the probe reports the redirect a run would meet.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| ModelError::Config(format!("cannot build the HTTP client: {error}")))
    }

    /// Registers (or replaces) a model, e.g. an in-process `ScriptedModel` in tests and benches.
    /// The first model registered is the default.
    pub fn with_model(
        mut self,
        name: &str,
        model: Arc<dyn ChatModel>,
        mut config: ModelConfig,
    ) -> Self {
        config.name = name.to_string();
        if !self.entries.contains_key(name) {
            self.order.push(name.to_string());
        }
        self.entries
            .insert(name.to_string(), Entry { model, config });
        self
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn ChatModel>> {
        self.entries.get(name).map(|entry| entry.model.clone())
    }

    pub fn default_name(&self) -> Option<&str> {
        self.order.first().map(String::as_str)
    }

    pub fn names(&self) -> Vec<String> {
        self.order.clone()
    }

    pub fn config(&self, name: &str) -> Option<&ModelConfig> {
        self.entries.get(name).map(|entry| &entry.config)
    }

    /// The requested model, or the default when none was requested or the name is unknown.
    pub fn resolve(&self, requested: Option<&str>) -> Option<(String, Arc<dyn ChatModel>)> {
        if let Some(name) = requested {
            if let Some(model) = self.get(name) {
                return Some((name.to_string(), model));
            }
            tracing::warn!(
                requested = name,
                default = self.default_name().unwrap_or(""),
                "Unknown model requested, using the default model"
            );
        }
        let name = self.default_name()?;
        Some((name.to_string(), self.get(name)?))
    }
}

impl std::fmt::Debug for ModelRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRegistry")
            .field("models", &self.order)
            .finish()
    }
}

/// `name` followed by its fallbacks, in order, each model at most once.
fn fallback_chain(config: &AppConfig, name: &str) -> Result<Vec<String>, ModelError> {
    let mut chain = vec![name.to_string()];
    let mut seen: HashSet<&str> = HashSet::from([name]);
    let mut current = config.model(name);
    while let Some(next) = current.and_then(|m| m.fallback.as_deref()) {
        if config.model(next).is_none() {
            return Err(ModelError::Config(format!(
                "model '{}' falls back to '{next}', which is not in models[]; fix models[].fallback",
                current.map(|m| m.name.as_str()).unwrap_or(name)
            )));
        }
        if !seen.insert(next) {
            tracing::warn!(
                model = name,
                fallback = next,
                "Fallback chain loops, cutting it here"
            );
            break;
        }
        chain.push(next.to_string());
        current = config.model(next);
    }
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ScriptedModel;

    fn model(name: &str, fallback: Option<&str>) -> ModelConfig {
        ModelConfig {
            name: name.into(),
            model: "m".into(),
            base_url: "http://127.0.0.1:9/v1".into(),
            fallback: fallback.map(str::to_string),
            ..Default::default()
        }
    }

    fn app(models: Vec<ModelConfig>) -> AppConfig {
        AppConfig {
            models,
            ..Default::default()
        }
    }

    #[test]
    fn chains_follow_fallbacks_and_stop_at_cycles() {
        let config = app(vec![
            model("a", Some("b")),
            model("b", Some("c")),
            model("c", Some("a")),
        ]);
        assert_eq!(fallback_chain(&config, "a").unwrap(), ["a", "b", "c"]);
        assert_eq!(fallback_chain(&config, "c").unwrap(), ["c", "a", "b"]);
        let registry = ModelRegistry::from_config(&config).unwrap();
        assert_eq!(registry.names(), ["a", "b", "c"]);
        assert_eq!(registry.default_name(), Some("a"));
        assert_eq!(registry.get("b").unwrap().name(), "b");
    }

    #[test]
    fn bad_model_lists_are_config_errors() {
        let unknown = app(vec![model("a", Some("ghost"))]);
        let error = ModelRegistry::from_config(&unknown).err().unwrap();
        assert!(error.to_string().contains("ghost"), "{error}");
        let duplicate = app(vec![model("a", None), model("a", None)]);
        assert!(ModelRegistry::from_config(&duplicate).is_err());
    }

    #[test]
    fn resolve_falls_back_to_the_default() {
        let registry = ModelRegistry::new()
            .with_model(
                "first",
                Arc::new(ScriptedModel::text("first", "1")),
                ModelConfig::default(),
            )
            .with_model(
                "second",
                Arc::new(ScriptedModel::text("second", "2")),
                ModelConfig::default(),
            );
        assert_eq!(registry.resolve(Some("second")).unwrap().0, "second");
        assert_eq!(registry.resolve(Some("nope")).unwrap().0, "first");
        assert_eq!(registry.resolve(None).unwrap().0, "first");
        assert_eq!(registry.config("second").unwrap().name, "second");
        assert!(ModelRegistry::new().resolve(None).is_none());
    }
}
