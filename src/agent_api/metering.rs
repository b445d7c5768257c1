//! Every model call is metered where it is made: the account that pays (a [`CallMeter`], bound
//! to a user, a custom agent and a thread) is asked before the call whether its budget allows
//! one more, and told the usage of the completed answer with the call's [`UsageKind`].
//!
//! The run's own calls (lead agent, sub-agents) go through the innermost step of the model-call
//! chain (`stream_model`), which reads the meter from the `RunContext`; calls made beside a
//! run (title, summary, memory update) wrap their model in [`MeteredModel`]. The contract lives
//! here, below `usage`, so the loop and the middlewares need not know how usage is stored.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;

use crate::agent_api::UsageKind;
use crate::model::{ChatModel, ModelError, ModelEvent, ModelRequest, ModelStream};
use antler_store::messages::Usage;

/// The name of the run event that carries a budget warning (`{"message": …}`): surfaces show
/// it as a short note in the conversation.
pub const BUDGET_WARNING_EVENT: &str = "budget_warning";

/// Who pays for a model call, and the budgets that apply to them.
pub trait CallMeter: Send + Sync {
    /// `Err(ModelError::BudgetExceeded)` when a budget of the account is spent: the call must
    /// not be made.
    fn admit(&self, kind: UsageKind) -> Result<(), ModelError>;

    /// Records one completed call. `warn`: the caller can show a warning in the conversation,
    /// so the account may claim its once-per-period 80 % warning and return its text.
    fn record(&self, kind: UsageKind, model: &str, usage: &Usage, warn: bool) -> Option<String>;
}

pub type CallMeterRef = Arc<dyn CallMeter>;

/// A model whose calls are admitted and recorded by a meter: what a call beside the run (a
/// title, a summary, a memory update) uses, so it is counted like the run's own calls.
pub struct MeteredModel {
    inner: Arc<dyn ChatModel>,
    meter: CallMeterRef,
    kind: UsageKind,
}

impl MeteredModel {
    pub fn new(inner: Arc<dyn ChatModel>, meter: CallMeterRef, kind: UsageKind) -> Self {
        Self { inner, meter, kind }
    }

    /// `model` metered for a run's account (`RunContext::meter`) as `kind`; `model` itself
    /// when the run has no meter.
    pub fn for_run(
        model: Arc<dyn ChatModel>,
        meter: Option<&CallMeterRef>,
        kind: UsageKind,
    ) -> Arc<dyn ChatModel> {
        match meter {
            Some(meter) => Arc::new(Self::new(model, meter.clone(), kind)),
            None => model,
        }
    }
}

#[async_trait]
impl ChatModel for MeteredModel {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        self.meter.admit(self.kind)?;
        let stream = self.inner.stream(request).await?;
        let (meter, kind) = (self.meter.clone(), self.kind);
        let name = self.inner.name().to_string();
        Ok(stream
            .inspect(move |event| {
                if let Ok(ModelEvent::Completed(message)) = event
                    && let Some(usage) = &message.usage
                {
                    let model = message.model.as_deref().unwrap_or(&name);
                    meter.record(kind, model, usage, false);
                }
            })
            .boxed())
    }
}
