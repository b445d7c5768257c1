// Builders for what a turn shows besides text: collapsible steps (tool calls, sub-agent tasks,
// other progress events), the plan-mode todo list and clarification questions (presented files
// are `artifact.js`).
// Everything from the model or a tool is set as text, never as HTML.

const PREVIEW = 2000;
const STATE_ICON = { running: "⋯", done: "✓", failed: "✗", info: "•" };
const STATE_LABEL = { running: "running", done: "done", failed: "failed", info: "" };

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function shorten(text, limit) {
  const flat = String(text).replace(/\s+/g, " ").trim();
  return flat.length > limit ? flat.slice(0, limit - 1) + "…" : flat;
}

/** A one-line summary of tool arguments: the values, not the JSON. */
export function shortArgs(args) {
  if (args === null || args === undefined) return "";
  if (typeof args !== "object") return shorten(args, 90);
  const parts = Object.entries(args).map(([key, value]) =>
    `${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`);
  return shorten(parts.join(", "), 90);
}

function pretty(value) {
  if (typeof value === "string") return value;
  try { return JSON.stringify(value, null, 2); } catch { return String(value); }
}

/** A collapsible step: `<details>` whose summary shows state, name and short arguments. */
export function createStep({ kind, name, detail, args }) {
  const step = el("details", "step running");
  step.dataset.kind = kind;
  const summary = el("summary");
  const state = el("span", "state", STATE_ICON.running);
  state.setAttribute("aria-label", STATE_LABEL.running);
  summary.append(state, el("span", "name", name));
  if (detail) summary.append(el("span", "args", detail));
  step.append(summary);
  const body = el("div", "body");
  if (args !== undefined && args !== null && !(typeof args === "object" && Object.keys(args).length === 0)) {
    body.append(el("div", "label", "Arguments"), el("pre", "", pretty(args)));
  }
  step.append(body);
  return step;
}

/** Moves a step to `state` ("running", "done", "failed", "info"), with an optional output. */
export function setStepState(step, state, output, outputLabel = "Result") {
  step.classList.remove("running", "done", "failed", "info");
  step.classList.add(state);
  const icon = step.querySelector(".state");
  icon.textContent = STATE_ICON[state] || "•";
  icon.setAttribute("aria-label", STATE_LABEL[state] || state);
  if (output !== undefined && output !== null && output !== "") {
    const body = step.querySelector(".body");
    body.querySelector(".output")?.remove();
    const text = pretty(output);
    const block = el("div", "output");
    block.append(el("div", "label", outputLabel),
      el("pre", "", text.length > PREVIEW ? text.slice(0, PREVIEW) + "\n… (" + text.length + " characters)" : text));
    body.append(block);
  }
}

/** The todo list as ☐ (pending) / ▶ (in progress) / ☑ (completed), updated in place. */
export function renderTodos(container, todos) {
  const list = el("ul");
  for (const todo of todos) {
    const status = typeof todo === "object" && todo ? String(todo.status || "pending") : "pending";
    const content = typeof todo === "object" && todo ? (todo.content ?? todo.title ?? todo.text ?? "") : String(todo);
    const mark = status === "completed" ? "☑" : status === "in_progress" ? "▶" : "☐";
    const item = el("li", status.replace(/[^a-z_]/g, ""), `${mark} ${content}`);
    list.append(item);
  }
  const heading = el("h3", "", "Plan");
  container.replaceChildren(heading, list);
}

/**
 * A clarification question with its options as buttons; choosing one sends it as the answer.
 * `payload` is the `human_input_request` artifact; `fallback` the tool's text when it is absent.
 */
export function createQuestion(payload, fallback, onAnswer, answerable) {
  const box = el("div", "question");
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", "Question from the agent");
  if (payload && typeof payload === "object" && payload.question) {
    if (payload.context) box.append(el("p", "context", payload.context));
    box.append(el("p", "ask", payload.question));
    const options = Array.isArray(payload.options) ? payload.options : [];
    if (options.length) {
      const row = el("div", "options");
      for (const option of options) {
        const button = el("button", "", String(option));
        button.type = "button";
        button.disabled = !answerable;
        button.addEventListener("click", () => {
          for (const b of row.querySelectorAll("button")) b.disabled = true;
          onAnswer(String(option));
        });
        row.append(button);
      }
      box.append(row);
      if (answerable) box.append(el("p", "turn-note", "Or type another answer below."));
    }
  } else {
    box.append(el("p", "ask", fallback || ""));
  }
  return box;
}

/** Disables the option buttons of every earlier question (a later message answered them). */
export function closeQuestions(root) {
  for (const button of root.querySelectorAll(".question .options button")) button.disabled = true;
}
