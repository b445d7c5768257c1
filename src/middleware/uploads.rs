//! `UploadsMiddleware`: tells the model which files came with the user's message.
//!
//! The files are listed in the human message's `meta.extra["files"]` (`[{filename, size, path}]`);
//! a `<current_uploads>` block naming them and their virtual paths is prepended to that message in
//! the request only, so the stored message stays what the user typed.
//!
//! A document converted from an upload is text from outside (anyone could have written it), and
//! so is a file another member uploaded into a shared conversation (one member's file is
//! another's untrusted input; the speaker's own are not): `before_agent` adds them to the
//! thread's untrusted sources (`agent_api::taint`).

use async_trait::async_trait;
use serde_json::Value;

use crate::agent_api::taint::{self, TaintSource};
use crate::agent_api::{HookResult, Middleware, MiddlewareError, ModelNext, RunContext};
use crate::files::uploads::convert::{CONVERSION_ERROR, MARKDOWN_PATH};
use crate::model::{ModelError, ModelRequest};
use crate::paths::VIRTUAL_UPLOADS;
use antler_store::messages::{AiMessage, Message};
use antler_store::state::ThreadState;

/// Files listed per message; more are summarised as a count.
pub const MAX_LISTED_UPLOADS: usize = 10;

#[derive(Debug, Default)]
pub struct UploadsMiddleware;

impl UploadsMiddleware {
    pub fn new() -> Self {
        Self
    }
}

/// One listed file: its name, size, and its Markdown copy or why it has none.
struct Listed<'a> {
    name: &'a str,
    size: u64,
    markdown: Option<&'a str>,
    conversion_error: Option<&'a str>,
}

/// The `<current_uploads>` block for a message's `files` list, if it names any file. A
/// converted document names its Markdown copy; one whose conversion failed says why.
pub fn uploads_block(files: &Value) -> Option<String> {
    let files: Vec<Listed<'_>> = files
        .as_array()?
        .iter()
        .filter_map(|f| {
            let name = f.get("filename")?.as_str()?;
            let name = name.rsplit(['/', '\\']).next().unwrap_or(name);
            let text = |key: &str| f.get(key).and_then(Value::as_str);
            (!name.is_empty()).then_some(Listed {
                name,
                size: f.get("size").and_then(Value::as_u64).unwrap_or(0),
                markdown: text(MARKDOWN_PATH),
                conversion_error: text(CONVERSION_ERROR),
            })
        })
        .collect();
    if files.is_empty() {
        return None;
    }
    let mut block = String::from(
        "<current_uploads>\nThe user uploaded these files with this message (read them from the listed paths):\n\n",
    );
    for file in files.iter().take(MAX_LISTED_UPLOADS) {
        block.push_str(&format!(
            "- {} ({:.1} KB)\n  Path: {VIRTUAL_UPLOADS}/{}\n",
            file.name,
            file.size as f64 / 1024.0,
            file.name
        ));
        if let Some(markdown) = file.markdown {
            block.push_str(&format!("  Markdown copy: {markdown}\n"));
        } else if let Some(error) = file.conversion_error {
            block.push_str(&format!("  No Markdown copy: {error}\n"));
        }
    }
    if files.len() > MAX_LISTED_UPLOADS {
        block.push_str(&format!(
            "- … and {} more in {VIRTUAL_UPLOADS}/\n",
            files.len() - MAX_LISTED_UPLOADS
        ));
    }
    block.push_str("</current_uploads>\n\n");
    Some(block)
}

/// The untrusted sources among a message's `files`: converted documents (`document`), and every
/// file when someone other than the speaker uploaded it into a shared conversation (`upload`).
pub fn upload_sources(files: &Value, someone_else: bool) -> Vec<TaintSource> {
    let mut sources = Vec::new();
    for file in files.as_array().into_iter().flatten() {
        let Some(name) = file.get("filename").and_then(Value::as_str) else {
            continue;
        };
        let name = name.rsplit(['/', '\\']).next().unwrap_or(name);
        if name.is_empty() {
            continue;
        }
        if someone_else {
            sources.push(TaintSource::new("upload", name));
        }
        if file.get(MARKDOWN_PATH).and_then(Value::as_str).is_some() {
            sources.push(TaintSource::new("document", name));
        }
    }
    sources
}

#[async_trait]
impl Middleware for UploadsMiddleware {
    fn name(&self) -> &str {
        "UploadsMiddleware"
    }

    async fn before_agent(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        // The turn's own files are the speaker's: only a converted document is outside text.
        // In a shared conversation the files other members uploaded earlier are too.
        let mut humans = state
            .messages
            .iter()
            .rev()
            .filter(|message| message.is_genuine_human())
            .filter_map(Message::as_human);
        let mut sources = humans
            .next()
            .and_then(|human| human.meta.extra.get("files"))
            .map(|files| upload_sources(files, false))
            .unwrap_or_default();
        if ctx.users.shared {
            for human in humans {
                let someone_else = human
                    .shared_sender()
                    .is_none_or(|sender| sender.user_id != ctx.users.speaker);
                if let Some(files) = human.meta.extra.get("files") {
                    sources.extend(upload_sources(files, someone_else));
                }
            }
        }
        Ok(match taint::mark(state, sources) {
            Some(update) => HookResult::update(update),
            None => HookResult::proceed(),
        })
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        _state: &ThreadState,
        _ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        // Looked up on the shared history: changing it copies it, so only a turn with
        // uploads does.
        let last_human = request.messages.iter().rposition(Message::is_genuine_human);
        let block = last_human.and_then(|i| match &request.messages[i] {
            Message::Human(human) => human.meta.extra.get("files").and_then(uploads_block),
            _ => None,
        });
        if let (Some(i), Some(block)) = (last_human, block)
            && let Message::Human(human) = &mut request.messages[i]
        {
            human.content = format!("{block}{}", human.content).into();
        }
        next.call(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn converted_documents_and_other_members_uploads_are_untrusted() {
        let files = json!([
            {"filename": "notes.txt", "size": 10},
            {"filename": "../report.pdf", "size": 2048, "markdown_path": "/mnt/user-data/uploads/report.md"},
        ]);
        let alone: Vec<String> = upload_sources(&files, false)
            .iter()
            .map(TaintSource::label)
            .collect();
        assert_eq!(alone, ["document report.pdf"], "one's own text file is not");
        let others: Vec<String> = upload_sources(&files, true)
            .iter()
            .map(TaintSource::label)
            .collect();
        assert_eq!(
            others,
            [
                "upload notes.txt",
                "upload report.pdf",
                "document report.pdf"
            ]
        );
    }

    #[test]
    fn lists_name_size_and_virtual_path() {
        let block = uploads_block(&json!([
            {"filename": "report.pdf", "size": 12800, "path": "/mnt/user-data/uploads/report.pdf"},
            {"filename": "../x.txt", "size": 0},
        ]))
        .unwrap();
        assert!(block.starts_with("<current_uploads>\n"));
        assert!(
            block.contains("- report.pdf (12.5 KB)\n  Path: /mnt/user-data/uploads/report.pdf\n")
        );
        assert!(block.contains("- x.txt (0.0 KB)\n  Path: /mnt/user-data/uploads/x.txt\n"));
        assert!(block.ends_with("</current_uploads>\n\n"));
    }

    #[test]
    fn documents_name_their_markdown_copy_or_why_there_is_none() {
        let block = uploads_block(&json!([
            {"filename": "a.docx", "size": 1024, "markdown_path": "/mnt/user-data/uploads/a.md"},
            {"filename": "b.pdf", "size": 2048, "conversion_error": "the conversion stopped: it needed more than 512 MiB of memory (conversion.memory_mb)"},
        ]))
        .unwrap();
        assert!(block.contains(
            "- a.docx (1.0 KB)\n  Path: /mnt/user-data/uploads/a.docx\n  Markdown copy: /mnt/user-data/uploads/a.md\n"
        ), "{block}");
        assert!(block.contains(
            "- b.pdf (2.0 KB)\n  Path: /mnt/user-data/uploads/b.pdf\n  No Markdown copy: the conversion stopped: it needed more than 512 MiB"
        ), "{block}");
    }

    #[tokio::test]
    async fn prepends_the_block_to_the_last_user_message_in_the_request_only() {
        use std::sync::Arc;

        use crate::config::AppConfig;
        use crate::model::{ScriptedModel, ScriptedTurn};

        let mut upload = Message::human("summarise this");
        if let Message::Human(h) = &mut upload {
            h.meta
                .extra
                .insert("files".into(), json!([{"filename": "a.csv", "size": 2048}]));
        }
        let state = ThreadState {
            messages: vec![Message::human("earlier"), Message::ai("ok"), upload].into(),
            ..Default::default()
        };
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let model = ScriptedModel::new("m", [ScriptedTurn::Text(vec!["ok".into()])]);
        let request = ModelRequest {
            messages: state.messages.clone(),
            ..Default::default()
        };
        UploadsMiddleware
            .wrap_model_call(
                request,
                &state,
                &ctx,
                ModelNext::new(&[], &model, &state, &ctx),
            )
            .await
            .unwrap();
        let sent = model.requests().pop().unwrap();
        let content = sent.messages[2].content();
        assert!(content.starts_with("<current_uploads>"));
        assert!(content.contains("- a.csv (2.0 KB)\n  Path: /mnt/user-data/uploads/a.csv"));
        assert!(content.ends_with("summarise this"));
        assert_eq!(sent.messages[0].content(), "earlier");
        assert_eq!(state.messages[2].content(), "summarise this");
    }

    /// In a group, the speaker's own upload is theirs; a file another member uploaded earlier
    /// taints the speaker's turn.
    #[tokio::test]
    async fn only_other_members_uploads_taint_a_shared_turn() {
        use std::sync::Arc;

        use crate::agent_api::RunUsers;
        use crate::config::AppConfig;

        let with_file = |text: &str, sender: &str, file: &str| {
            let mut message = Message::human(text);
            if let Message::Human(h) = &mut message {
                h.set_shared_sender(sender, sender);
                h.meta
                    .extra
                    .insert("files".into(), json!([{"filename": file, "size": 1}]));
            }
            message
        };
        let mut ctx = RunContext::new("t", "chat-x", Arc::new(AppConfig::default()));
        ctx.users = RunUsers {
            owner: "chat-x".into(),
            speaker: "alice".into(),
            shared: true,
        };
        async fn labels(state: &ThreadState, ctx: &RunContext) -> Vec<String> {
            let result = UploadsMiddleware.before_agent(state, ctx).await.unwrap();
            let mut marked = state.clone();
            marked.apply(result.update).unwrap();
            taint::sources(&marked)
                .iter()
                .map(TaintSource::label)
                .collect()
        }
        let own = ThreadState {
            messages: vec![with_file("look", "alice", "mine.png")].into(),
            ..Default::default()
        };
        assert!(
            labels(&own, &ctx).await.is_empty(),
            "the speaker's own file"
        );
        let after_bob = ThreadState {
            messages: vec![
                with_file("here", "bob", "bobs.txt"),
                Message::ai("ok"),
                with_file("look", "alice", "mine.png"),
            ]
            .into(),
            ..Default::default()
        };
        assert_eq!(labels(&after_bob, &ctx).await, ["upload bobs.txt"]);
    }

    #[test]
    fn no_files_no_block() {
        assert!(uploads_block(&json!([])).is_none());
        assert!(uploads_block(&json!("x")).is_none());
    }
}
