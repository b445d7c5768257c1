//! Approvals in the chats: the request a parked run posts (what, why, who decides, its id, the
//! buttons), the decisions that come back (a click, or a typed `/approve ID` / `/deny ID`), and
//! the journalled entry that resumes a decided request in its chat exactly once.
//!
//! A button's value is `ap:{id}:{a|c|d}` (approve, approve for this conversation, deny), well
//! within [`BUTTON_VALUE_MAX`]. Resuming goes through one synthetic journal entry per request,
//! `approval:{id}` in the request's chat (`resume`), whoever decided: a click, a typed command,
//! the HTTP API or the timeout. The journal records an id once, so however many clicks,
//! redeliveries, daemons or restarts meet one decision, the buttons are settled and the run
//! continues once.

mod decide;
mod post;
mod resume;
mod text;

pub(crate) use decide::{on_click, on_command};
pub(crate) use post::{plan_request, send_planned, send_request};
pub(crate) use resume::{resume_entry, resume_of, settle_overtaken, waiting_in};
pub(crate) use text::settled_text;

use antler_channel::{BUTTON_VALUE_MAX, Button, ButtonStyle};

use crate::agent_api::approval::Decision;

const VALUE_PREFIX: &str = "ap:";

/// What a button's value (or a resume entry's) asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Decide(Decision),
    /// The synthetic entry that resumes a decided request.
    Resume,
}

/// The three buttons under a request.
pub(crate) fn buttons(approval_id: &str) -> Vec<Button> {
    let button = |label: &str, code: char, style| Button {
        label: label.into(),
        value: value(approval_id, code),
        style,
    };
    vec![
        button("Approve", 'a', ButtonStyle::Primary),
        button("Approve for this conversation", 'c', ButtonStyle::Default),
        button("Deny", 'd', ButtonStyle::Danger),
    ]
}

fn value(approval_id: &str, code: char) -> String {
    format!("{VALUE_PREFIX}{approval_id}:{code}")
}

/// Whether a request id fits a button's value (ids are short; a longer one gets the typed
/// fallback instead of buttons the platform would refuse).
pub(crate) fn fits_buttons(approval_id: &str) -> bool {
    value(approval_id, 'a').len() <= BUTTON_VALUE_MAX
}

/// `(request id, action)` of a button value; `None` for anything else.
pub(crate) fn parse_value(value: &str) -> Option<(String, Action)> {
    let rest = value.strip_prefix(VALUE_PREFIX)?;
    let (id, code) = rest.rsplit_once(':')?;
    if id.is_empty() {
        return None;
    }
    let action = match code {
        "a" => Action::Decide(Decision::Approve),
        "c" => Action::Decide(Decision::ApproveConversation),
        "d" => Action::Decide(Decision::Deny),
        "r" => Action::Resume,
        _ => return None,
    };
    Some((id.to_string(), action))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn button_values_round_trip_and_fit() {
        let id = "k3x9Qa7mZt2p";
        assert!(fits_buttons(id));
        let parsed: Vec<_> = buttons(id)
            .iter()
            .map(|button| {
                assert!(button.value.len() <= BUTTON_VALUE_MAX);
                parse_value(&button.value).expect("ours")
            })
            .collect();
        assert_eq!(
            parsed,
            vec![
                (id.to_string(), Action::Decide(Decision::Approve)),
                (
                    id.to_string(),
                    Action::Decide(Decision::ApproveConversation)
                ),
                (id.to_string(), Action::Decide(Decision::Deny)),
            ]
        );
        assert_eq!(
            parse_value(&value(id, 'r')),
            Some((id.to_string(), Action::Resume))
        );
        for foreign in ["", "ap:", "ap::a", "ap:x:z", "xx:id:a", "ap:id"] {
            assert_eq!(parse_value(foreign), None, "{foreign:?}");
        }
        assert!(!fits_buttons(&"x".repeat(BUTTON_VALUE_MAX)));
    }
}
