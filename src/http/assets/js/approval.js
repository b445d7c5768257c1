// A tool call waiting for a person's yes (`approval_requested`): what it would do, why it asks,
// and the three answers. A click hands the decision to the conversation, which posts it and
// streams the resumed run; once decided, the buttons give way to the decision and who made it.

const DECISIONS = [
  { value: "approve", label: "Approve", className: "primary" },
  { value: "approve_conversation", label: "Approve for this conversation", className: "" },
  { value: "deny", label: "Deny", className: "danger" },
];

const OUTCOMES = {
  approved: "Approved",
  denied: "Denied",
  timed_out: "Timed out (denied)",
  superseded: "Superseded by a newer message (not run)",
};

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Why the call needs approval, in words. */
export function reasonText(reason) {
  if (!reason || reason.kind === "always") return "This tool always needs approval.";
  const sources = Array.isArray(reason.sources) ? reason.sources : [];
  return sources.length
    ? `The conversation holds untrusted content (${sources.join(", ")}).`
    : "The conversation holds untrusted content.";
}

/** The card of `request`; `onDecide(request, decision)` runs on a click (pending only). */
export function createApprovalCard(request, onDecide) {
  const card = el("div", "approval");
  card.dataset.approval = request.id;
  card.setAttribute("role", "group");
  card.setAttribute("aria-label", "Approval request " + request.id);
  const head = el("p", "ask");
  head.append("Approve ", el("code", "", request.tool), "?");
  card.append(head);
  if (request.summary) card.append(el("pre", "summary", request.summary));
  card.append(el("p", "why", reasonText(request.reason)));
  if (request.status && request.status !== "pending") {
    settleApprovalCard(card, request);
    return card;
  }
  const row = el("div", "options");
  for (const { value, label, className } of DECISIONS) {
    const button = el("button", className, label);
    button.type = "button";
    button.dataset.decision = value;
    button.addEventListener("click", () => {
      for (const b of row.querySelectorAll("button")) b.disabled = true;
      onDecide(request, value);
    });
    row.append(button);
  }
  card.append(row);
  card.append(el("p", "turn-note", `Or type /approve ${request.id} or /deny ${request.id} [reason].`));
  return card;
}

/** Replaces the card's buttons by the decision `request` records and who made it. */
export function settleApprovalCard(card, request) {
  for (const node of card.querySelectorAll(".options, .turn-note, .decision")) node.remove();
  const decision = request.decision || null;
  let text = OUTCOMES[request.status] || request.status || "Decided";
  if (request.status === "approved" && decision && decision.decision === "approve_conversation") {
    text = "Approved for this conversation";
  }
  const by = decision && (decision.by_name || decision.by);
  if (by && by !== "system") text += " by " + by;
  if (decision && decision.reason) text += ": " + decision.reason;
  const line = el("p", "decision " + (request.status || ""), text + ".");
  line.setAttribute("role", "status");
  card.append(line);
}

/** Lets the buttons be clicked again (the decision could not be sent). */
export function reopenApprovalCard(card) {
  for (const button of card.querySelectorAll(".options button")) button.disabled = false;
}

/** Every card of request `id` under `root` (a request may show in a turn and after a reload). */
export function approvalCards(root, id) {
  return root.querySelectorAll(`.approval[data-approval="${CSS.escape(id)}"]`);
}
