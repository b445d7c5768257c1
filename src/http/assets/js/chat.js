// One conversation on screen: rebuilt from `/state`, extended by streaming runs
// (`/runs/stream`, LangGraph event names), stopped with the cancel route.

import { ApiError, getJson, isEventStream, request, sseEvents, threadPath } from "./api.js";
import {
  approvalCards, createApprovalCard, reopenApprovalCard, settleApprovalCard,
} from "./approval.js";
import { closeQuestions } from "./steps.js";
import { Turn } from "./turn.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export class Conversation {
  /**
   * `hooks`: `runOptions()` → the run's `context`, `onBusy(busy)`, `onUnauthorized(error)`,
   * `onFinished()` (refresh the sidebar), `attachments()` / `clearAttachments()`.
   */
  constructor(log, threadId, hooks) {
    this.log = log;
    this.threadId = threadId;
    this.hooks = hooks;
    this.artifactsShown = new Set();
    this.busy = false;
    this.runId = null;
    this.turn = null;
    this.controller = null;
  }

  scroll() { this.log.scrollTop = this.log.scrollHeight; }

  /** A person's message; `sender`, in a shared conversation (a group chat's thread), is the
   * name of whoever wrote it. */
  human(text, files = [], sender = null) {
    const bubble = el("div", "human", text);
    if (sender) bubble.prepend(el("div", "who", sender));
    if (files.length) {
      const list = el("div", "files");
      for (const file of files) list.append(el("span", "file", "Attached: " + (file.filename || file.path)));
      bubble.append(list);
    }
    this.log.append(bubble);
  }

  /** Rebuilds the conversation from the thread's state; false when the thread does not exist. */
  async restore() {
    let body;
    try {
      body = await getJson(threadPath(this.threadId, "/state"));
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return false;
      throw e;
    }
    const values = body.values || {};
    const messages = values.messages || [];
    const artifacts = values.artifacts || [];
    let turn = null;
    const lastVisible = messages.filter((m) => !(m.meta && m.meta.hide_from_ui)).at(-1);
    for (const message of messages) {
      if (message.meta && message.meta.hide_from_ui) continue;
      if (message.type === "human") {
        if (message.name) continue; // a note the harness wrote for the model
        const extra = (message.meta && message.meta.extra) || {};
        const sender = extra.sender_id ? (extra.sender || extra.sender_id) : null;
        this.human(message.content, extra.files || [], sender);
        turn = null;
        continue;
      }
      if (!turn) turn = new Turn(this.log, this);
      if (message.type === "ai") turn.aiMessage(message);
      else if (message.type === "tool") {
        turn.toolResult(message, { answerable: message === lastVisible });
        if (message.name === "present_files") turn.artifacts(turn.presentedAmong(artifacts));
      }
    }
    if (turn) {
      turn.finish();
      turn.artifacts(artifacts);
      if (values.todos && values.todos.length) turn.showTodos(values.todos);
    }
    turn = await this.restoreApprovals(turn);
    this.turn = turn;
    if (body.status === "busy") {
      const note = el("div", "note", "A reply is still being written; it appears here when it is done.");
      this.log.append(note);
      this.pollUntilIdle(note);
    }
    this.scroll();
    return true;
  }

  /** Requests still waiting for a decision, with their buttons, at the end of the history. */
  async restoreApprovals(turn) {
    const body = await getJson(threadPath(this.threadId, "/approvals")).catch(() => null);
    const pending = ((body && body.approvals) || []).filter((r) => r.status === "pending");
    if (pending.length === 0) return turn;
    if (!turn) turn = new Turn(this.log, this);
    // Newest first from the API; shown in the order they were asked.
    for (const request of pending.reverse()) this.showApproval(turn, request);
    turn.awaitApproval();
    return turn;
  }

  async pollUntilIdle(note) {
    for (let i = 0; i < 600 && this.log.isConnected; i++) {
      await new Promise((r) => setTimeout(r, 2000));
      if (!note.isConnected) return;
      const body = await getJson(threadPath(this.threadId)).catch(() => null);
      if (body && body.status !== "busy") {
        this.log.replaceChildren();
        this.artifactsShown.clear();
        await this.restore();
        return;
      }
    }
  }

  /** Sends a person's message (or a chosen option) and streams the run into a new turn;
   * `context` replaces the thread's run options (a command's turn). */
  async send(text, context = null) {
    if (this.busy) return;
    const files = this.hooks.attachments();
    closeQuestions(this.log);
    this.human(text, files);
    const message = { role: "user", content: text };
    if (files.length) message.additional_kwargs = { files };
    await this.stream(async (signal) => {
      const response = await request("POST", threadPath(this.threadId, "/runs/stream"), {
        json: { input: { messages: [message] }, context: context || this.hooks.runOptions() },
        signal,
      });
      this.hooks.clearAttachments();
      return response;
    });
  }

  /** A click on an approval card: the decision is posted and the run it resumes streams into
   * a new turn. A repeat, or a request a chat continues, answers JSON: the cards settle. */
  async decide(approval, decision) {
    const cards = () => approvalCards(this.log, approval.id);
    if (this.busy) {
      for (const card of cards()) reopenApprovalCard(card);
      return;
    }
    const path = threadPath(this.threadId, "/approvals/" + encodeURIComponent(approval.id));
    const settled = await this.stream(async (signal) => request("POST", path, {
      json: { decision }, signal, accept: "text/event-stream",
    }), (body) => {
      if (body && body.approval) for (const card of cards()) settleApprovalCard(card, body.approval);
    });
    if (!settled) for (const card of cards()) if (!card.querySelector(".decision")) reopenApprovalCard(card);
  }

  /** A command's answer that is a resumed run (`/approve ID` typed): streamed like a turn, its
   * reply first. */
  async resumeFrom(response) {
    await this.stream(async () => response);
  }

  /**
   * Streams a run into a new turn: `open(signal)` sends the request. An answer that is JSON
   * rather than a stream goes to `onJson` and the turn goes away. False when nothing was
   * decided (the request failed).
   */
  async stream(open, onJson = null) {
    const turn = new Turn(this.log, this);
    this.turn = turn;
    turn.wait();
    this.scroll();
    this.setBusy(true);
    this.controller = new AbortController();
    let stop = null;
    let ok = true;
    try {
      const response = await open(this.controller.signal);
      if (!isEventStream(response)) {
        const body = await response.json().catch(() => null);
        turn.root.remove();
        if (onJson) onJson(body);
        return true;
      }
      for await (const { event, data } of sseEvents(response)) {
        stop = this.handle(turn, event, data) ?? stop;
        if (event === "end") break;
      }
    } catch (e) {
      ok = false;
      if (e.name === "AbortError") stop = "cancelled";
      else if (e instanceof ApiError && e.unauthorized) this.hooks.onUnauthorized(e);
      else turn.error(e instanceof ApiError ? e.message : "The stream broke off: " + e.message + ". Reload to see what was saved.");
    } finally {
      turn.finish(stop);
      this.setBusy(false);
      this.runId = null;
      this.controller = null;
      this.scroll();
      this.hooks.onFinished();
    }
    return ok;
  }

  /** Applies one SSE event; returns the stop reason on `end`. */
  handle(turn, event, data) {
    const pinned = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 80;
    let stop;
    if (event === "metadata" && data) {
      this.runId = data.run_id;
    } else if (event === "messages" && Array.isArray(data) && data[0]) {
      const chunk = data[0];
      const reasoning = chunk.additional_kwargs && chunk.additional_kwargs.reasoning_content;
      if (reasoning) turn.reasoning(chunk.id, reasoning);
      if (chunk.content) turn.delta(chunk.id, chunk.content);
    } else if (event === "custom" && data && typeof data === "object") {
      this.custom(turn, data);
    } else if (event === "values" && data && typeof data === "object") {
      // The agent a bootstrap created (`setup_agent`); the page switches the thread to it.
      if (data.extra && data.extra.created_agent_name) this.createdAgent = data.extra.created_agent_name;
      if (Array.isArray(data.artifacts)) turn.artifacts(data.artifacts);
      if (Array.isArray(data.todos)) turn.showTodos(data.todos);
    } else if (event === "error" && data) {
      turn.error(data.message || String(data));
    } else if (event === "end") {
      stop = (data && data.stop_reason) || "completed";
    }
    if (pinned) this.scroll();
    return stop;
  }

  custom(turn, data) {
    switch (data.type) {
      case "message": {
        const message = data.message || {};
        if (message.meta && message.meta.hide_from_ui) return;
        if (message.type === "ai") turn.aiMessage(message);
        else if (message.type === "tool") turn.toolResult(message);
        return;
      }
      case "tool_started": if (data.call) turn.toolStarted(data.call); return;
      case "tool_finished": if (data.result) turn.toolResult(data.result); return;
      case "approval_requested": if (data.data) this.showApproval(turn, data.data); return;
      case "approval_decided": {
        // The first frame of a resumed run: the decision (and a typed command's reply).
        const lead = data.data || {};
        if (lead.approval) for (const card of approvalCards(this.log, lead.approval.id)) settleApprovalCard(card, lead.approval);
        if (lead.reply) turn.note(lead.reply);
        return;
      }
      // A budget at 80 % (`budgets:`): a note in the conversation, like a command's reply.
      case "budget_warning": if (data.data && data.data.message) turn.note(data.data.message); return;
      default: turn.custom(String(data.type || "event"), data.data);
    }
  }

  /** Shows a request's card in `turn`, once per request. */
  showApproval(turn, approval) {
    if (approvalCards(turn.root, approval.id).length) return;
    turn.settle();
    turn.add(createApprovalCard(approval, (request, decision) => this.decide(request, decision)));
  }

  /** Asks the daemon to stop the run; the stream then ends with `cancelled`. */
  async cancel() {
    if (!this.busy) return;
    const controller = this.controller;
    if (this.runId) {
      try {
        await request("POST", threadPath(this.threadId, `/runs/${encodeURIComponent(this.runId)}/cancel`));
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 404)) this.turn?.error("Could not stop the run: " + e.message);
      }
    }
    // A run that does not end promptly is left to finish on its own; the page stops waiting.
    setTimeout(() => { if (this.controller === controller) controller.abort(); }, 5000);
  }

  answer(text) { this.hooks.answer(text); }

  setBusy(busy) {
    this.busy = busy;
    this.hooks.onBusy(busy);
  }
}
