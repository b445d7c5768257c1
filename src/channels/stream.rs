//! The status message of a turn: "Working on it…", then the growing answer with a cursor,
//! under the plan and sub-task board (todo list, running sub-tasks) when the run has one.
//!
//! Only assistant text deltas and the board are shown (never tool output, reminders or memory). Edits are
//! throttled to the chat's interval and drawn from the rate budget with `try_acquire`: under
//! pressure an edit is skipped and the next one carries the latest text (coalescing).

use std::time::Duration;

use antler_channel::{ChannelError, ChatKey};
use tokio::time::Instant;

use crate::agent_api::RunEvent;
use crate::channels::board::Board;
use crate::channels::deliver::secs;
use crate::channels::markdown::{FileFate, for_chat};
use crate::channels::runtime::ChannelRuntime;

pub const WORKING_TEXT: &str = "Working on it…";
pub const CURSOR: &str = " ▉";

pub(crate) struct StatusStream<'a> {
    runtime: &'a ChannelRuntime,
    chat: &'a ChatKey,
    is_group: bool,
    status_id: Option<String>,
    min_interval: Duration,
    show_progress: bool,
    message_id: Option<String>,
    text: String,
    progress: Option<String>,
    board: Board,
    shown: String,
    last_edit: Option<Instant>,
    /// Edits sent (for tests and logs).
    pub(crate) edits: usize,
}

impl<'a> StatusStream<'a> {
    pub(crate) fn new(
        runtime: &'a ChannelRuntime,
        chat: &'a ChatKey,
        is_group: bool,
        status_id: Option<String>,
        min_interval: Duration,
        show_progress: bool,
    ) -> Self {
        Self {
            runtime,
            chat,
            is_group,
            status_id,
            min_interval,
            show_progress,
            message_id: None,
            text: String::new(),
            progress: None,
            board: Board::default(),
            shown: WORKING_TEXT.into(),
            last_edit: Some(Instant::now()),
            edits: 0,
        }
    }

    /// Appends assistant text; a new AI message starts a fresh display.
    pub(crate) fn push_text(&mut self, message_id: &str, delta: &str) {
        if self.message_id.as_deref() != Some(message_id) {
            self.message_id = Some(message_id.to_string());
            self.text.clear();
        }
        self.text.push_str(delta);
    }

    pub(crate) fn set_progress(&mut self, progress: Option<String>) {
        if self.show_progress {
            self.progress = progress;
        }
    }

    /// A run event: todo lists and sub-task progress update the board.
    pub(crate) fn apply_progress(&mut self, event: &RunEvent) {
        self.board.apply(event);
    }

    /// The text the answer has reached so far.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Edits the status message if the interval passed and there is something new to show.
    pub(crate) async fn tick(&mut self) {
        let Some(status_id) = self.status_id.clone() else {
            return;
        };
        let Some(edit) = &self.runtime.parts.edit else {
            return;
        };
        let wanted = self.render();
        if wanted == self.shown {
            return;
        }
        if self
            .last_edit
            .is_some_and(|at| at.elapsed() < self.min_interval)
        {
            return;
        }
        if !self
            .runtime
            .budget
            .try_acquire(&self.chat.chat_id, self.is_group)
        {
            return;
        }
        self.last_edit = Some(Instant::now());
        self.edits += 1;
        crate::metrics::outbound_edit(&self.chat.channel);
        match edit.edit_text(self.chat, &status_id, &wanted).await {
            Ok(()) | Err(ChannelError::NotModified) => self.shown = wanted,
            Err(ChannelError::RateLimited { retry_after_secs }) => {
                crate::metrics::rate_limited(&self.chat.channel, secs(retry_after_secs));
                self.runtime
                    .budget
                    .pause(Some(&self.chat.chat_id), secs(retry_after_secs));
            }
            Err(error) => {
                tracing::debug!(%error, chat = %self.chat, "Streaming edit failed; the final answer will replace it")
            }
        }
    }

    fn render(&self) -> String {
        let max = self.runtime.profile.max_text_len.max(16);
        let board = if self.board.is_empty() {
            String::new()
        } else {
            // The board never takes more than half the message: the answer needs room too.
            let board: String = self.board.render().chars().take(max / 2).collect();
            format!("{board}\n\n")
        };
        if self.text.trim().is_empty() {
            return match &self.progress {
                Some(progress) => format!("{board}{WORKING_TEXT}\n{progress}"),
                None => format!("{board}{WORKING_TEXT}"),
            };
        }
        // As the final answer will read, minus what is known only once the run is over.
        let text = for_chat(&self.text, |_| FileFate::Pending);
        let budget = max - CURSOR.chars().count() - 1 - board.chars().count();
        let mut shown: String = text.chars().take(budget).collect();
        if shown.len() < text.len() {
            shown.push('…');
        }
        // A delta often ends in a space; the cursor brings its own.
        shown.truncate(shown.trim_end().len());
        shown.push_str(CURSOR);
        format!("{board}{shown}")
    }
}

/// Sends the typing indicator at most every `every`, when the budget has room.
pub(crate) struct Typing<'a> {
    runtime: &'a ChannelRuntime,
    chat: &'a ChatKey,
    is_group: bool,
    every: Duration,
    last: Option<Instant>,
}

impl<'a> Typing<'a> {
    pub(crate) fn new(runtime: &'a ChannelRuntime, chat: &'a ChatKey, is_group: bool) -> Self {
        Self {
            runtime,
            chat,
            is_group,
            every: runtime.profile.typing_interval.of(is_group),
            last: None,
        }
    }

    pub(crate) async fn tick(&mut self) {
        let Some(typing) = &self.runtime.parts.typing else {
            return;
        };
        if self.last.is_some_and(|at| at.elapsed() < self.every) {
            return;
        }
        if !self
            .runtime
            .budget
            .try_acquire(&self.chat.chat_id, self.is_group)
        {
            return;
        }
        self.last = Some(Instant::now());
        if let Err(ChannelError::RateLimited { retry_after_secs }) = typing.typing(self.chat).await
        {
            self.runtime
                .budget
                .pause(Some(&self.chat.chat_id), secs(retry_after_secs));
        }
    }
}
