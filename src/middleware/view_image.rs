//! `ViewImageMiddleware` (vision models): shows the model the images it just viewed.
//!
//! `view_image` only records image metadata in `state.viewed_images`; right after such calls the
//! images are read, base64-encoded and attached to a hidden human message for that one model
//! call. The bytes are never persisted in the thread, and `after_model` clears the metadata so
//! an image is shown once, not again with every later `view_image` call.

use std::collections::BTreeMap;

use async_trait::async_trait;
use base64::Engine;

use crate::agent_api::RunContext;
use crate::agent_api::shared::{MAX_IMAGE_BYTES, VIEW_IMAGE, sniff_image};
use crate::agent_api::{HookResult, Middleware, MiddlewareError, ModelNext};
use crate::middleware::support::hidden_human;
use crate::model::{ModelError, ModelRequest};
use antler_store::messages::{AiMessage, ImageData, Message};
use antler_store::state::{StateUpdate, ThreadState};

pub const VIEWED_IMAGES_NAME: &str = "viewed_images";

#[derive(Debug, Default)]
pub struct ViewImageMiddleware;

impl ViewImageMiddleware {
    pub fn new() -> Self {
        Self
    }
}

/// Whether the request ends with the results of a step that called `view_image`.
fn just_viewed(messages: &[Message]) -> bool {
    messages
        .iter()
        .rev()
        .take_while(|m| matches!(m, Message::Tool(_)))
        .any(|m| m.as_tool().is_some_and(|t| t.name == VIEW_IMAGE))
}

/// The hidden message carrying every viewed image; unreadable files are named, not attached.
pub async fn images_message(state: &ThreadState) -> Message {
    let mut lines = vec!["Here are the images you viewed:".to_string()];
    let mut images = Vec::new();
    for (path, image) in &state.viewed_images {
        // The file may have changed since `view_image` checked it; check it again.
        let read = tokio::fs::read(&image.actual_path).await.and_then(|bytes| {
            if bytes.len() as u64 > MAX_IMAGE_BYTES || sniff_image(&bytes).is_none() {
                Err(std::io::Error::other(
                    "it is no longer an image of at most 5 MiB",
                ))
            } else {
                Ok(bytes)
            }
        });
        match read {
            Ok(bytes) => {
                lines.push(format!("- {path} ({})", image.mime_type));
                images.push(ImageData {
                    mime_type: image.mime_type.clone(),
                    base64: base64::engine::general_purpose::STANDARD.encode(bytes),
                });
            }
            Err(error) => {
                tracing::warn!(path, %error, "Could not read a viewed image");
                lines.push(format!("- {path} (could not be read: {error})"));
            }
        }
    }
    let mut message = hidden_human(VIEWED_IMAGES_NAME, lines.join("\n"));
    message.images = images;
    Message::Human(message)
}

#[async_trait]
impl Middleware for ViewImageMiddleware {
    fn name(&self) -> &str {
        "ViewImageMiddleware"
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        state: &ThreadState,
        _ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        if !state.viewed_images.is_empty() && just_viewed(&request.messages) {
            request.messages.push(images_message(state).await);
        }
        next.call(request).await
    }

    async fn after_model(
        &self,
        state: &ThreadState,
        _ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        // Images recorded by the last tool step were shown in the call that just finished.
        if state.viewed_images.is_empty() {
            return Ok(HookResult::proceed());
        }
        Ok(HookResult::update(StateUpdate {
            viewed_images: Some(BTreeMap::new()),
            ..Default::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use antler_store::messages::{ToolCall, ToolMessage};
    use antler_store::state::ViewedImage;
    use serde_json::json;

    #[tokio::test]
    async fn attaches_viewed_images_after_view_image_results() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a.png");
        std::fs::write(&file, b"\x89PNG\r\n\x1a\n").unwrap();
        let mut state = ThreadState::default();
        state.viewed_images.insert(
            "/mnt/user-data/uploads/a.png".into(),
            ViewedImage {
                mime_type: "image/png".into(),
                size: 3,
                actual_path: file.to_string_lossy().into_owned(),
            },
        );
        let call = ToolCall {
            id: "c".into(),
            name: VIEW_IMAGE.into(),
            args: json!({}),
            args_error: None,
        };
        let messages = vec![Message::Tool(ToolMessage::success(&call, "ok"))];
        assert!(just_viewed(&messages));
        assert!(!just_viewed(&[Message::human("x")]));
        let Message::Human(human) = images_message(&state).await else {
            panic!("expected a human message");
        };
        assert!(human.meta.hide_from_ui);
        assert_eq!(human.images[0].base64, "iVBORw0KGgo=");
    }
}
