//! What the model reads about a gated call that did not run: who denied it and why, a timeout,
//! a conversation that moved on, a sub-agent that cannot ask. Each says what to do next, so
//! the model neither retries the same call nor stops.

use crate::agent_api::approval::{ApprovalRequest, ApprovalStatus};

/// The tool result of a settled request whose call does not run; `None` when it was approved.
pub fn not_run(request: &ApprovalRequest) -> Option<String> {
    let call = call_label(&request.tool, &request.summary);
    let decision = request.decision.as_ref();
    let by = decision
        .map(|d| d.by_name.clone().unwrap_or_else(|| d.by.clone()))
        .unwrap_or_else(|| "the approver".into());
    let why = decision
        .and_then(|d| d.reason.as_deref())
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map_or_else(|| " (no reason given)".to_string(), |r| format!(": {r}"));
    Some(match request.status {
        ApprovalStatus::Pending | ApprovalStatus::Approved => return None,
        ApprovalStatus::Denied => format!(
            "Denied: {by} did not approve {call}{why}. Do not retry the same call; continue \
             without it, or ask {by} how to proceed."
        ),
        ApprovalStatus::TimedOut => format!(
            "Denied: nobody approved {call} before the request timed out, so it did not run. \
             Do not retry the same call; continue without it, or ask the person whether they \
             still want it."
        ),
        ApprovalStatus::Superseded => format!(
            "Not run: a new message arrived before anyone approved {call}. Do not retry it \
             unless the person asks for it again."
        ),
    })
}

/// An approved call whose run was marked as started but whose result never reached the thread
/// (the daemon stopped mid-call): it is not run a second time.
pub fn ran_already(tool: &str, summary: &str) -> String {
    format!(
        "{} was approved and started once already, but its result was lost when the run \
         stopped. It will not run again; check its effects before doing anything that depends \
         on it.",
        capitalised(&call_label(tool, summary))
    )
}

/// A gated call inside a sub-agent: only the lead agent's run can park and ask a person.
pub fn needs_lead(tool: &str, summary: &str, why: &str) -> String {
    format!(
        "Not run: {} needs a person's approval ({why}), and a sub-agent cannot ask for it. Do \
         not retry it here; finish what you can without it and report that this step is left to \
         the lead agent, which can ask for approval.",
        call_label(tool, summary)
    )
}

/// The store could not be read or written: the gated call does not run (fail closed).
pub fn unavailable(tool: &str, detail: &str) -> String {
    format!(
        "Not run: the call to `{tool}` needs approval, but the approvals store failed \
         ({detail}). Tell the person; they can try again once the store is back."
    )
}

fn call_label(tool: &str, summary: &str) -> String {
    if summary.is_empty() {
        format!("the call to `{tool}`")
    } else {
        format!("the call to `{tool}` (`{summary}`)")
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Why a request was made, in words (the chat's "why" line uses the same).
pub fn reason_label(reason: &crate::agent_api::approval::ApprovalReason) -> String {
    use crate::agent_api::approval::ApprovalReason;
    match reason {
        ApprovalReason::Always => "this tool always needs approval".into(),
        ApprovalReason::Untrusted { sources } => format!(
            "the conversation holds untrusted content from {}",
            sources.join(", ")
        ),
    }
}
