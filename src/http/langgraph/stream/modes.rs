//! The stream modes a request may name, as a set the encoder tests with one AND per event.

use crate::http::ApiError;
use crate::http::langgraph::errors::unsupported;

/// A set of stream modes (one bit each).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Modes(u16);

impl Modes {
    pub(super) const VALUES: Modes = Modes(1);
    pub(super) const UPDATES: Modes = Modes(1 << 1);
    /// `messages-tuple`: `[chunk, metadata]` pairs under the event name `messages`.
    pub(super) const MESSAGES_TUPLE: Modes = Modes(1 << 2);
    /// `messages`: `messages/metadata`, `messages/partial`, `messages/complete`.
    pub(super) const MESSAGES: Modes = Modes(1 << 3);
    pub(super) const CUSTOM: Modes = Modes(1 << 4);
    pub(super) const EVENTS: Modes = Modes(1 << 5);
    pub(super) const DEBUG: Modes = Modes(1 << 6);
    pub(super) const TASKS: Modes = Modes(1 << 7);
    pub(super) const CHECKPOINTS: Modes = Modes(1 << 8);
    pub(super) const TOOLS: Modes = Modes(1 << 9);
    pub(super) const LIFECYCLE: Modes = Modes(1 << 10);

    /// The modes that need a step's new messages kept until the step ends.
    pub(super) const STEP_MESSAGES: Modes = Modes(Self::UPDATES.0 | Self::TASKS.0 | Self::DEBUG.0);
    /// The modes that need the state serialized when a step ends.
    pub(super) const STEP_STATE: Modes = Modes(
        Self::VALUES.0 | Self::UPDATES.0 | Self::CHECKPOINTS.0 | Self::DEBUG.0 | Self::TASKS.0,
    );

    /// Whether any mode of `other` is in this set.
    pub(super) fn any(self, other: Modes) -> bool {
        self.0 & other.0 != 0
    }

    /// The set a request names; an unknown mode is a 422 naming `stream_mode` with the list.
    /// No mode at all (`[]`) means `values`, LangGraph's default.
    pub(super) fn parse(names: &[String]) -> Result<Modes, ApiError> {
        let mut modes = Modes::default();
        for name in names {
            let Some((_, mode)) = ACCEPTED.iter().find(|(accepted, _)| accepted == name) else {
                let list: Vec<&str> = ACCEPTED.iter().map(|(accepted, _)| *accepted).collect();
                return Err(unsupported(
                    "stream_mode",
                    format!(
                        "`{name}` is not a stream mode Antler serves; use any of {}",
                        list.join(", ")
                    ),
                ));
            };
            modes.0 |= mode.0;
        }
        Ok(if names.is_empty() {
            Modes::VALUES
        } else {
            modes
        })
    }

    /// The set of names already parsed: an unknown one is skipped.
    pub(super) fn lenient(names: &[String]) -> Modes {
        let mut modes = Modes::default();
        for name in names {
            if let Some((_, mode)) = ACCEPTED.iter().find(|(accepted, _)| accepted == name) {
                modes.0 |= mode.0;
            }
        }
        if names.is_empty() {
            Modes::VALUES
        } else {
            modes
        }
    }
}

impl std::ops::BitOr for Modes {
    type Output = Modes;

    fn bitor(self, other: Modes) -> Modes {
        Modes(self.0 | other.0)
    }
}

/// Every mode Antler serves, by the name a request uses. The SDKs' `StreamMode` lists exactly
/// these (Python `schema.StreamMode`, JS `types.stream` `StreamMode`).
pub(super) const ACCEPTED: [(&str, Modes); 11] = [
    ("values", Modes::VALUES),
    ("updates", Modes::UPDATES),
    ("messages-tuple", Modes::MESSAGES_TUPLE),
    ("messages", Modes::MESSAGES),
    ("custom", Modes::CUSTOM),
    ("events", Modes::EVENTS),
    ("debug", Modes::DEBUG),
    ("tasks", Modes::TASKS),
    ("checkpoints", Modes::CHECKPOINTS),
    ("tools", Modes::TOOLS),
    ("lifecycle", Modes::LIFECYCLE),
];
