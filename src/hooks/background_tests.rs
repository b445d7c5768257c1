//! A `thread_only` delivery whose thread is busy with this very delivery (another daemon
//! sharing the store continuing it after a restart) waits, then finds it answered: no second
//! question, no second model call.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use super::run;
use crate::config::{AppConfig, ConfigHandle, ModelConfig};
use crate::harness::Harness;
use crate::hooks::request::run_request;
use crate::hooks::store::{Delivery, DeliveryStatus, DeliveryStore};
use crate::model::{ModelRegistry, ScriptedModel, ScriptedTurn};
use antler_store::{MemoryStore, StoreRef};

#[tokio::test(start_paused = true)]
async fn a_delivery_running_elsewhere_is_waited_for_and_found_answered() {
    let dir = tempfile::tempdir().unwrap();
    let config = AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    };
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            ScriptedTurn::Slow {
                chunks: vec!["Disk".into(), "Full".into()],
                delay: Duration::from_secs(2),
            },
            ScriptedTurn::Text(vec!["a second answer".into()]),
        ],
    ));
    let models = ModelRegistry::new().with_model("scripted", model.clone(), ModelConfig::default());
    let store: StoreRef = Arc::new(MemoryStore::new());
    let harness =
        Harness::with_parts(ConfigHandle::fixed(config), store.clone(), Some(models)).unwrap();
    let deliveries = DeliveryStore::new(store);
    let delivery = Delivery {
        endpoint: "alerts".into(),
        delivery_id: "d-1".into(),
        run_id: "r-1".into(),
        thread_id: "t-alerts".into(),
        user: "alice".into(),
        agent: None,
        prompt: "Alert: disk full".into(),
        chat: None,
        status: DeliveryStatus::Received,
        received_at: Utc::now(),
        detail: None,
    };
    deliveries.insert(&delivery).unwrap();

    // The delivery's own run, already going when this daemon looks at it.
    let elsewhere = harness.start_run(run_request(&delivery)).await.unwrap();
    let waiter = run(
        Arc::new(harness.clone()),
        deliveries.clone(),
        CancellationToken::new(),
        delivery.clone(),
    );
    let (_, outcome) = tokio::join!(waiter, elsewhere.outcome);
    outcome.unwrap();

    assert_eq!(model.requests().len(), 1, "asked once");
    let stored = deliveries.get("alerts", "d-1").unwrap().unwrap();
    assert_eq!(stored.status, DeliveryStatus::Done);
    let state = harness.thread_state("t-alerts").await.unwrap().unwrap();
    let questions = state
        .messages
        .iter()
        .filter(|m| m.is_genuine_human())
        .count();
    assert_eq!(questions, 1, "{:?}", state.messages);
    harness.shutdown(Duration::from_secs(1)).await.unwrap();
}
