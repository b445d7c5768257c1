//! The memory updater: one model call with the current memory and a filtered conversation,
//! answered as JSON updates that are parsed strictly and applied in one transaction.
//!
//! Malformed output changes nothing. New facts are deduplicated by normalized content (also
//! against facts the user deleted), kept only at or above `fact_confidence_threshold`, capped
//! at `max_facts` (least confident evicted, corrections last), and mentions of uploaded files
//! are stripped (they are gone by the next thread).

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use serde::Deserialize;

use crate::config::MemoryConfig;
use crate::memory::MemoryError;
pub use crate::memory::conversation::ConversationMessage;
use crate::memory::document::{Fact, FactCategory, MemoryDocument, normalize, now};
use crate::memory::history::WriteSource;
use crate::memory::repo::{MemoryRepo, MemoryScope};
use crate::memory::settings::MemorySettings;
use crate::model::{ChatModel, ModelError, ModelEvent, ModelRequest};
use antler_store::messages::Message;

/// A memory update must not hang the queue forever.
pub const UPDATE_TIMEOUT: Duration = Duration::from_secs(120);

/// What the memory model is told: the reference's reflection step, each section's length and
/// content, fact categories and confidence, `shouldUpdate` discipline, keeping specifics, and
/// the conversation's language, for the JSON shape [`parse_update`] accepts. Starts with
/// `model::background::MEMORY_PROMPT_START`, by which test doubles recognise the call (checked
/// by a test).
const SYSTEM_PROMPT: &str = "You are a memory management system. From a conversation, update \
what is worth remembering about the user for future conversations.

First reflect on the conversation:
1. Errors and retries: did the agent fail, retry or give a wrong result? If the cause is a \
lasting pattern in how this user works, record the right approach.
2. Corrections: did the user correct the agent's direction, understanding or output? A \
correction of how to work with this user is a `correction` fact; a fix to this task's facts or \
files is not memory.
3. Constraints of one project or task belong to it, not to the user's memory.

Sections (rewrite a section as a whole, merging what it says with what is new):
- user.workContext: role, company, key projects, main technologies (2-3 sentences).
- user.personalContext: languages, communication preferences, interests beyond the work at \
hand (1-2 sentences).
- user.topOfMind: the 3-5 things the user is focused on now, as one detailed paragraph (3-5 \
sentences); updated most often: add new focus areas, drop finished or abandoned ones.
- history.recentMonths: what the user did and explored in the last 1-3 months (4-6 sentences).
- history.earlierContext: patterns from 3-12 months ago that still matter (3-5 sentences).
- history.longTermBackground: lasting expertise, interests and working style (2-4 sentences).
Put new information into the history section of its period.

Facts are durable, specific statements about the user, useful in unrelated future conversations.
- Keep the specifics: numbers and metrics (\"16k+ GitHub stars\"), proper nouns (companies, \
projects, people), technologies and versions, in their original form.
- Categories: preference (tools, styles, approaches liked or disliked), knowledge (expertise, \
technologies mastered), context (job, projects, places, languages), behavior (working and \
communication habits), goal (stated objectives), correction (a mistake the agent made or the \
user corrected, with the right approach: \"When X, do Y, not Z\"; confidence 0.95 or more when \
explicit).
- Confidence: 0.9-1.0 stated explicitly (\"I work on X\"), 0.7-0.8 strongly implied by what the \
user does, 0.5-0.6 an inferred pattern (rarely). Only add facts of 0.7 or more.
- No facts about this task alone: its goals, current files, errors or commits, one-time \
permissions or instructions (\"you may delete the branch\").
- Never record uploaded files or upload events: they are gone in the next conversation.
- Do not repeat a fact the current memory already has. Remove a fact (factsToRemove, its id and \
why) only when the user contradicts or retracts it or the conversation shows it is outdated; \
add the replacement as a new fact.

Discipline:
- shouldUpdate is true only for a section with meaningful new information, which then gets its \
complete new summary; leave the other sections out. Small talk changes nothing: answer \
{\"user\": {}, \"history\": {}, \"newFacts\": [], \"factsToRemove\": []}.
- Write summaries and facts in the language the user writes in.

Answer with ONE JSON object and nothing else (no Markdown fence, no explanation):
{\"user\": {\"workContext\"|\"personalContext\"|\"topOfMind\": {\"summary\": str, \"shouldUpdate\": bool}},
 \"history\": {\"recentMonths\"|\"earlierContext\"|\"longTermBackground\": {\"summary\": str, \"shouldUpdate\": bool}},
 \"newFacts\": [{\"content\": str, \"category\": \"preference|knowledge|context|behavior|goal|correction\", \"confidence\": 0..1}],
 \"factsToRemove\": [{\"id\": str, \"reason\": str}]}";

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SectionUpdate {
    #[serde(default)]
    pub summary: String,
    #[serde(default, rename = "shouldUpdate")]
    pub should_update: bool,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct NewFact {
    pub content: String,
    pub category: FactCategory,
    pub confidence: f64,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct FactRemoval {
    pub id: String,
    #[serde(default)]
    pub reason: String,
}

/// The model's answer, typed: a field of the wrong shape rejects the whole answer.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct MemoryUpdate {
    #[serde(default)]
    pub user: std::collections::BTreeMap<String, SectionUpdate>,
    #[serde(default)]
    pub history: std::collections::BTreeMap<String, SectionUpdate>,
    #[serde(default, rename = "newFacts")]
    pub new_facts: Vec<NewFact>,
    #[serde(default, rename = "factsToRemove")]
    pub facts_to_remove: Vec<FactRemoval>,
}

/// What an applied update changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApplyReport {
    pub added: usize,
    pub removed: usize,
    pub summaries: usize,
}

/// Parses the model's text: a JSON object, optionally inside a Markdown code fence.
pub fn parse_update(text: &str) -> Result<MemoryUpdate, MemoryError> {
    let trimmed = text.trim();
    let body = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.trim_end().strip_suffix("```"))
        .unwrap_or(trimmed);
    let update: MemoryUpdate = serde_json::from_str(body.trim())
        .map_err(|e| MemoryError::MalformedUpdate(e.to_string()))?;
    for (group, sections) in [("user", &update.user), ("history", &update.history)] {
        for name in sections.keys() {
            if MemoryDocument::default()
                .section_mut(&format!("{group}.{name}"))
                .is_none()
            {
                return Err(MemoryError::MalformedUpdate(format!(
                    "unknown section {group}.{name}"
                )));
            }
        }
    }
    if let Some(fact) = update
        .new_facts
        .iter()
        .find(|f| !(0.0..=1.0).contains(&f.confidence))
    {
        return Err(MemoryError::MalformedUpdate(format!(
            "confidence {} of a new fact is outside 0-1",
            fact.confidence
        )));
    }
    Ok(update)
}

/// Applies `update` to `doc` (pure: the repo runs it inside its transaction). New facts of a
/// thread whose context held `untrusted` content wait for the user's confirmation.
pub fn apply_update(
    doc: &mut MemoryDocument,
    forgotten: &[String],
    update: &MemoryUpdate,
    (thread_id, untrusted): (&str, &[String]),
    config: &MemoryConfig,
) -> ApplyReport {
    let mut report = ApplyReport::default();
    let stamp = now();
    for (group, sections) in [("user", &update.user), ("history", &update.history)] {
        for (name, change) in sections {
            if !change.should_update || change.summary.trim().is_empty() {
                continue;
            }
            if let Some(section) = doc.section_mut(&format!("{group}.{name}")) {
                section.summary = strip_upload_mentions(&change.summary);
                section.updated_at = stamp.clone();
                report.summaries += 1;
            }
        }
    }
    let removals: HashSet<&str> = update
        .facts_to_remove
        .iter()
        .map(|r| r.id.as_str())
        .collect();
    let before = doc.facts.len();
    doc.facts.retain(|f| !removals.contains(f.id.as_str()));
    report.removed = before - doc.facts.len();

    let mut known: HashSet<String> = doc.facts.iter().map(|f| normalize(&f.content)).collect();
    known.extend(forgotten.iter().cloned());
    for new in &update.new_facts {
        let content = strip_upload_mentions(&new.content);
        let key = normalize(&content);
        if new.confidence < config.fact_confidence_threshold || key.is_empty() || !known.insert(key)
        {
            continue;
        }
        let fact = Fact::new(&content, new.category, new.confidence, thread_id);
        doc.facts.push(if untrusted.is_empty() {
            fact
        } else {
            fact.unconfirmed(thread_id, untrusted)
        });
        report.added += 1;
    }
    if doc.facts.len() > config.max_facts {
        // Most confident first; corrections win ties so they are evicted last.
        doc.facts.sort_by(|a, b| {
            b.confidence.total_cmp(&a.confidence).then_with(|| {
                (b.category == FactCategory::Correction)
                    .cmp(&(a.category == FactCategory::Correction))
            })
        });
        doc.facts.truncate(config.max_facts);
    }
    report
}

/// Drops sentences about uploaded files; they do not exist in the next thread.
pub fn strip_upload_mentions(text: &str) -> String {
    let mentions_upload = |sentence: &str| {
        let lower = sentence.to_lowercase();
        lower.contains("/mnt/user-data/uploads") || lower.contains("upload")
    };
    // A sentence ends at `.`, `!` or `?` before whitespace (not inside `report.pdf`), or a newline.
    let mut kept = String::new();
    let mut sentence = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        sentence.push(c);
        let at_end = c == '\n'
            || (matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|n| n.is_whitespace()));
        if at_end || chars.peek().is_none() {
            if !mentions_upload(&sentence) {
                kept.push_str(&sentence);
            }
            sentence.clear();
        }
    }
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Runs memory updates against a repo.
#[derive(Clone)]
pub struct MemoryUpdater {
    repo: MemoryRepo,
    settings: MemorySettings,
}

impl MemoryUpdater {
    pub fn new(repo: MemoryRepo, settings: impl Into<MemorySettings>) -> Self {
        Self {
            repo,
            settings: settings.into(),
        }
    }

    /// The settings the updater (and its queue) read at use time.
    pub fn settings(&self) -> &MemorySettings {
        &self.settings
    }

    /// Asks `model` for updates from `conversation` and applies them; memory is unchanged on
    /// any error. `untrusted` is what outside content the thread's context held (labels of
    /// `agent_api::taint` sources): the facts learned then wait for confirmation.
    pub async fn update(
        &self,
        model: &dyn ChatModel,
        scope: &MemoryScope,
        (thread_id, untrusted): (&str, &[String]),
        conversation: &[ConversationMessage],
    ) -> Result<ApplyReport, MemoryError> {
        let current = self.repo.load(scope)?;
        let request = build_request(&current, conversation)?;
        let text = tokio::time::timeout(UPDATE_TIMEOUT, complete(model, &request))
            .await
            .map_err(|_| ModelError::Stream {
                model: model.name().to_string(),
                detail: "the memory update took too long".into(),
            })??;
        let update = parse_update(&text)?;
        let source = WriteSource::Updater {
            thread_id: thread_id.to_string(),
        };
        // Read now, not when the update was queued: a reload applies to the next update.
        let config = self.settings.current();
        let (_, report) = self.repo.update(scope, &source, |doc, forgotten| {
            Ok(apply_update(
                doc,
                forgotten,
                &update,
                (thread_id, untrusted),
                &config,
            ))
        })?;
        Ok(report)
    }
}

fn build_request(
    current: &MemoryDocument,
    conversation: &[ConversationMessage],
) -> Result<ModelRequest, MemoryError> {
    let memory = serde_json::to_string_pretty(current)
        .map_err(|e| MemoryError::InvalidDocument(e.to_string()))?;
    let mut text = format!("<current_memory>\n{memory}\n</current_memory>\n\n<conversation>\n");
    for message in conversation {
        text.push_str(&format!("{}: {}\n\n", message.role, message.content.trim()));
    }
    text.push_str("</conversation>\n\nUpdate the memory from this conversation.");
    Ok(ModelRequest {
        system: Some(SYSTEM_PROMPT.into()),
        messages: vec![Message::human(text)].into(),
        ..Default::default()
    })
}

async fn complete(model: &dyn ChatModel, request: &ModelRequest) -> Result<String, ModelError> {
    let mut stream = model.stream(request).await?;
    while let Some(event) = stream.next().await {
        if let ModelEvent::Completed(message) = event? {
            return Ok(message.content.to_string());
        }
    }
    Err(ModelError::Stream {
        model: model.name().to_string(),
        detail: "the stream ended before the memory update was complete".into(),
    })
}

#[cfg(test)]
#[path = "updater_tests.rs"]
mod tests;
