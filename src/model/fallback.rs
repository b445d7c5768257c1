//! A primary model with a fallback: the fallback answers when the primary cannot start a reply.

use std::sync::Arc;

use async_trait::async_trait;

use crate::model::{ChatModel, ModelError, ModelRequest, ModelStream};

/// Tries `primary` (normally a [`RetryingModel`](crate::model::RetryingModel), so its retries
/// are spent first), then `fallback`. Only failures of `stream()` switch models; an error in
/// the middle of a stream propagates, since part of the answer was already delivered.
pub struct FallbackModel {
    primary: Arc<dyn ChatModel>,
    fallback: Arc<dyn ChatModel>,
}

impl FallbackModel {
    pub fn new(primary: Arc<dyn ChatModel>, fallback: Arc<dyn ChatModel>) -> Self {
        Self { primary, fallback }
    }
}

#[async_trait]
impl ChatModel for FallbackModel {
    fn name(&self) -> &str {
        self.primary.name()
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        match self.primary.stream(request).await {
            Ok(stream) => Ok(stream),
            Err(ModelError::Cancelled) => Err(ModelError::Cancelled),
            Err(error) => {
                tracing::warn!(
                    model = self.primary.name(),
                    fallback = self.fallback.name(),
                    %error,
                    "Model call failed, trying the fallback model"
                );
                self.fallback.stream(request).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::model::{ModelErrorKind, ModelEvent, ScriptedModel, ScriptedTurn};

    #[tokio::test]
    async fn the_fallback_answers_when_the_primary_fails() {
        let primary = Arc::new(ScriptedModel::new(
            "primary",
            [ScriptedTurn::Fail(ModelErrorKind::Status(503))],
        ));
        let backup = Arc::new(ScriptedModel::text("backup", "from backup"));
        let model = FallbackModel::new(primary.clone(), backup.clone());
        assert_eq!(model.name(), "primary");
        let events: Vec<_> = model
            .stream(&ModelRequest::default())
            .await
            .unwrap()
            .collect()
            .await;
        assert!(matches!(&events[0], Ok(ModelEvent::TextDelta(t)) if t == "from backup"));
        assert_eq!(primary.requests().len(), 1);
        assert_eq!(backup.requests().len(), 1);
    }

    #[tokio::test]
    async fn a_working_primary_never_touches_the_fallback() {
        let primary = Arc::new(ScriptedModel::text("primary", "hi"));
        let backup = Arc::new(ScriptedModel::text("backup", "unused"));
        let model = FallbackModel::new(primary, backup.clone());
        assert!(model.stream(&ModelRequest::default()).await.is_ok());
        assert_eq!(backup.remaining(), 1);
    }
}
