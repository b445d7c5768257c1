//! `AgentModelSettingsMiddleware`: applies a custom agent's `model_settings` (temperature,
//! max_tokens) to each model request of its runs.

use async_trait::async_trait;

use crate::agent_api::RunContext;
use crate::agent_api::{Middleware, ModelNext};
use crate::custom_agents::ModelSettings;
use crate::model::{ModelError, ModelRequest};
use antler_store::messages::AiMessage;
use antler_store::state::ThreadState;

pub const AGENT_MODEL_SETTINGS: &str = "AgentModelSettingsMiddleware";

pub(crate) struct AgentModelSettingsMiddleware {
    settings: ModelSettings,
}

impl AgentModelSettingsMiddleware {
    pub(crate) fn new(settings: ModelSettings) -> Self {
        Self { settings }
    }
}

#[async_trait]
impl Middleware for AgentModelSettingsMiddleware {
    fn name(&self) -> &str {
        AGENT_MODEL_SETTINGS
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        _state: &ThreadState,
        _ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        // A value another middleware already set for this one call stays.
        request.temperature = request.temperature.or(self.settings.temperature);
        request.max_tokens = request.max_tokens.or(self.settings.max_tokens);
        next.call(request).await
    }
}
