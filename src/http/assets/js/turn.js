// One agent turn on screen, in the order things happened: text blocks (one per AI message),
// tool steps, sub-agent task steps, the todo list, a clarification question, presented files.
// The live stream and the history from `/state` drive the same methods, so a reloaded
// conversation looks as it did while it streamed. While a live turn waits for the model (before
// its first words, and again after its tools ran) a "Thinking" placeholder ends it.

import { createArtifact } from "./artifact.js";
import { renderMarkdown } from "./markdown.js";
import {
  createQuestion, createStep, renderTodos, setStepState, shortArgs,
} from "./steps.js";

const CLARIFY = "ask_clarification";
const TASK_END = {
  task_completed: "done", task_failed: "failed", task_timed_out: "failed", task_cancelled: "failed",
};
const EVENT_LABELS = { summarization: "Earlier messages summarized" };

export class Turn {
  /**
   * `view` is the conversation: `{threadId, artifactsShown: Set, answer(text)}`.
   */
  constructor(log, view) {
    this.view = view;
    this.root = document.createElement("div");
    this.root.className = "turn";
    log.append(this.root);
    this.texts = new Map();
    this.steps = new Map();
    this.calls = new Map();
    this.todos = null;
    this.pending = new Set();
    this.frame = 0;
    this.live = false;
    this.marker = null;
  }

  /** Adds `node` at the end of the turn, before the placeholder while it shows. */
  add(node) {
    if (this.marker && this.marker.isConnected) this.marker.before(node);
    else this.root.append(node);
  }

  /** A live turn waits for the model: the placeholder goes (back) to the end of the turn. */
  wait() {
    this.live = true;
    if (!this.marker) {
      this.marker = document.createElement("div");
      this.marker.className = "thinking";
      this.marker.setAttribute("role", "status");
      const dots = document.createElement("span");
      dots.className = "dots";
      dots.setAttribute("aria-hidden", "true");
      dots.append(document.createElement("span"), document.createElement("span"), document.createElement("span"));
      this.marker.append("Thinking", dots);
    }
    this.root.append(this.marker);
  }

  /** Something of the answer arrived: the placeholder goes. */
  settle() { this.marker?.remove(); }

  textBlock(id) {
    let block = this.texts.get(id);
    if (!block) {
      const element = document.createElement("div");
      element.className = "answer";
      this.add(element);
      block = { element, text: "", reasoning: null };
      this.texts.set(id, block);
    }
    return block;
  }

  /** Appends streamed text; rendering is batched to one pass per animation frame. */
  delta(id, text) {
    this.settle();
    const block = this.textBlock(id);
    block.text += text;
    block.element.classList.add("streaming");
    this.pending.add(block);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  reasoning(id, text) {
    this.settle();
    const block = this.textBlock(id);
    if (!block.reasoning) {
      const details = document.createElement("details");
      details.className = "reasoning";
      const summary = document.createElement("summary");
      summary.textContent = "Thinking";
      const pre = document.createElement("pre");
      details.append(summary, pre);
      block.element.before(details);
      block.reasoning = pre;
    }
    block.reasoning.textContent += text;
  }

  flush() {
    this.frame = 0;
    for (const block of this.pending) renderMarkdown(block.element, block.text, this.view.threadId);
    this.pending.clear();
  }

  /** A complete AI message: its final text wins over the streamed one; its calls become steps. */
  aiMessage(message) {
    const content = typeof message.content === "string" ? message.content : "";
    const block = this.texts.get(message.id);
    if (content) {
      this.settle();
      const target = this.textBlock(message.id);
      target.text = content;
      target.element.classList.remove("streaming");
      this.pending.delete(target);
      renderMarkdown(target.element, content, this.view.threadId);
    } else if (block && !block.text) {
      block.element.remove();
      this.texts.delete(message.id);
    }
    if (message.reasoning && !(block && block.reasoning)) this.reasoning(message.id, message.reasoning);
    for (const call of message.tool_calls || []) this.toolStarted(call);
  }

  toolStarted(call) {
    this.calls.set(call.id, call);
    if (call.name === CLARIFY || this.steps.has(call.id)) return;
    this.settle();
    const step = createStep({ kind: "tool", name: call.name, detail: shortArgs(call.args), args: call.args });
    if (call.args_error) setStepState(step, "failed", call.args_error, "Arguments refused");
    this.steps.set(call.id, step);
    this.add(step);
  }

  /** A tool's result: the step's state and preview, a question, or presented files. */
  toolResult(message, { answerable = true } = {}) {
    if (message.name === CLARIFY) {
      if (this.root.querySelector(`[data-question="${CSS.escape(message.id)}"]`)) return;
      const question = createQuestion(message.artifact, message.content, (text) => this.view.answer(text), answerable);
      question.dataset.question = message.id;
      this.settle();
      this.add(question);
      return;
    }
    let step = this.steps.get(message.tool_call_id);
    if (!step) {
      this.toolStarted(this.calls.get(message.tool_call_id) || { id: message.tool_call_id, name: message.name, args: {} });
      step = this.steps.get(message.tool_call_id);
    }
    if (step.dataset.finished) return;
    step.dataset.finished = "1";
    const failed = message.status === "error" || /^Error:/.test(message.content || "");
    setStepState(step, failed ? "failed" : "done", message.content);
    if (message.name === "present_files" && !failed) {
      const call = this.calls.get(message.tool_call_id);
      this.presented = (call && call.args && call.args.filepaths) || [];
    }
    // The tools of this step are done: the model is asked again.
    if (this.live && !this.root.querySelector(".step.running")) this.wait();
  }

  /** Custom events: sub-agent tasks and todo lists by name, anything else as a quiet step. */
  custom(name, data) {
    const payload = data && typeof data === "object" ? data : {};
    if (Array.isArray(payload.todos) || /todo/i.test(name)) {
      const todos = Array.isArray(payload.todos) ? payload.todos : Array.isArray(data) ? data : null;
      if (todos) this.showTodos(todos);
      return;
    }
    if (name.startsWith("task_")) {
      this.task(name, payload);
      return;
    }
    const step = createStep({ kind: "event", name: EVENT_LABELS[name] || name, detail: "" });
    setStepState(step, "info", data, "Details");
    this.add(step);
  }

  task(name, data) {
    const id = "task:" + String(data.task_id ?? data.id ?? data.tool_call_id ?? data.description ?? "?");
    let step = this.steps.get(id);
    if (!step) {
      const description = data.description || data.subagent_type || "sub-agent task";
      step = createStep({ kind: "task", name: "Task", detail: String(description), args: data.prompt });
      this.steps.set(id, step);
      this.settle();
      this.add(step);
    }
    if (name in TASK_END) {
      const reason = { task_timed_out: "timed out", task_cancelled: "cancelled" }[name];
      const output = data.result ?? data.error ?? data.message ?? reason;
      setStepState(step, TASK_END[name], reason && output !== reason ? `${reason}: ${output}` : output);
    } else if (name === "task_running" && (data.message || data.status)) {
      setStepState(step, "running", data.message ?? data.status, "Progress");
    }
  }

  showTodos(todos) {
    if (!this.todos) {
      this.todos = document.createElement("section");
      this.todos.className = "todos";
      this.todos.setAttribute("aria-label", "Plan");
      this.root.prepend(this.todos);
    }
    if (todos.length === 0) {
      this.todos.remove();
      this.todos = null;
      return;
    }
    renderTodos(this.todos, todos);
  }

  /** Shows files the thread presented that this page has not shown yet. */
  artifacts(paths) {
    for (const path of paths) {
      if (this.view.artifactsShown.has(path)) continue;
      this.view.artifactsShown.add(path);
      let box = [...this.root.children].filter((n) => n !== this.marker).at(-1);
      if (!box || !box.classList.contains("artifacts")) {
        box = document.createElement("div");
        box.className = "artifacts";
        this.add(box);
      }
      box.append(createArtifact(this.view.threadId, path));
    }
  }

  /** From history: the artifacts among `all` that the latest present_files call named. */
  presentedAmong(all) {
    const named = this.presented || [];
    this.presented = null;
    const base = (p) => String(p).split("/").filter(Boolean).pop();
    return all.filter((path) => named.some((n) => n === path || base(n) === base(path)));
  }

  error(text) {
    const box = document.createElement("div");
    box.className = "turn-error";
    box.setAttribute("role", "alert");
    box.textContent = text;
    this.settle();
    this.add(box);
  }

  note(text) {
    const box = document.createElement("div");
    box.className = "turn-note";
    box.textContent = text;
    this.add(box);
  }

  /** The run parked: its open steps wait for a person's decision (the card below says whose). */
  awaitApproval() {
    for (const step of this.root.querySelectorAll(".step.running")) {
      setStepState(step, "info", "Waiting for approval", "Status");
    }
  }

  /** The run ended: final rendering, open steps closed as interrupted when it was stopped. */
  finish(stopReason) {
    this.live = false;
    this.settle();
    if (this.frame) cancelAnimationFrame(this.frame);
    this.flush();
    for (const block of this.texts.values()) block.element.classList.remove("streaming");
    for (const [id, block] of this.texts) {
      if (!block.text) { block.element.remove(); this.texts.delete(id); }
    }
    if (stopReason === "awaiting_approval") this.awaitApproval();
    if (stopReason === "cancelled") {
      for (const step of this.root.querySelectorAll(".step.running")) setStepState(step, "failed", "stopped");
      this.note("Stopped.");
    }
  }
}
