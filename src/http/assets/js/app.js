// The web chat's entry point: wires the page (sidebar, pickers, composer, dialogs) to the
// conversation, the uploads and the token. The open thread's id survives reloads
// (localStorage); the model, agent and bootstrap flag are remembered per thread.

import { ApiError, clearToken, getJson, postJson, setToken, token } from "./api.js";
import { Conversation } from "./chat.js";
import { runCommand, settingsOf, showReply } from "./commands.js";
import { Uploads } from "./files.js";
import { ThreadList } from "./threads.js";

const $ = (id) => document.getElementById(id);
const THREAD_KEY = "antler.thread";
const SETTINGS_KEY = "antler.settings";

const page = {
  log: $("log"), input: $("input"), composer: $("composer"), send: $("send"), stop: $("stop"),
  model: $("model"), agent: $("agent"), banner: $("banner"), status: $("status"),
  sidebar: $("sidebar"), toggle: $("toggle-sidebar"),
};

let threadId = localStorage.getItem(THREAD_KEY) || newThreadId();
let conversation = null;

function newThreadId() {
  const id = "web-" + crypto.randomUUID().replaceAll("-", "").slice(0, 20);
  localStorage.setItem(THREAD_KEY, id);
  return id;
}

function allSettings() {
  try { return JSON.parse(localStorage.getItem(SETTINGS_KEY) || "{}") || {}; } catch { return {}; }
}
function settings(id = threadId) { return allSettings()[id] || {}; }
function saveSettings(patch, id = threadId) {
  const all = allSettings();
  all[id] = { ...(all[id] || {}), ...patch };
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(all));
}
function forgetSettings(id) {
  const all = allSettings();
  delete all[id];
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(all));
}

function banner(text, kind = "error") {
  page.banner.textContent = text;
  page.banner.className = "banner " + kind;
  page.banner.hidden = !text;
}

const uploads = new Uploads({
  list: $("attachments"), input: $("file-input"), dropTarget: $("main"), dropHint: $("drop-hint"),
  status: page.status, threadId: () => threadId,
  ensureThread: () => postJson("/api/threads", { thread_id: threadId }),
  onUnauthorized: askForToken,
});

const threads = new ThreadList($("threads"), {
  current: () => threadId,
  open: (id) => { if (id !== threadId) openThread(id); closeSidebarOnPhone(); },
  deleted: (id) => { forgetSettings(id); if (id === threadId) openThread(newThreadId()); },
  onError: (text) => banner(text),
});

/** The run `context`: the thread's model and agent, and the bootstrap flag while it lasts. */
function runOptions() {
  const chosen = settings();
  const context = {};
  if (chosen.model) context.model_name = chosen.model;
  if (chosen.plan) context.is_plan_mode = true;
  if (chosen.bootstrap) {
    context.is_bootstrap = true;
    context.agent_name = chosen.bootstrap;
  } else if (chosen.agent) {
    context.agent_name = chosen.agent;
  }
  return context;
}

function newConversation() {
  conversation = new Conversation(page.log, threadId, {
    runOptions,
    attachments: () => uploads.pending(),
    clearAttachments: () => uploads.clear(),
    onBusy: (busy) => {
      page.send.hidden = busy;
      page.stop.hidden = !busy;
      page.status.textContent = busy ? "Antler is answering… (Esc to stop)" : "";
      page.status.classList.remove("error");
    },
    onUnauthorized: askForToken,
    onFinished: () => { threads.refresh().catch(() => {}); loadAgents().catch(() => {}); },
    answer: (text) => submit(text),
  });
  return conversation;
}

async function openThread(id) {
  if (conversation && conversation.busy) conversation.cancel();
  threadId = id;
  localStorage.setItem(THREAD_KEY, id);
  page.log.replaceChildren();
  uploads.clear();
  banner("");
  newConversation();
  showSettings();
  threads.render();
  try {
    // A thread the list does not know has no state yet (a new one): nothing to ask for.
    const known = threads.threads.some((t) => t.thread_id === id);
    const found = known && (await conversation.restore());
    if (!found) showWelcome();
  } catch (e) {
    if (e instanceof ApiError && e.unauthorized) return askForToken(e);
    banner("Could not load the conversation: " + e.message);
  }
  page.input.focus();
}

function showWelcome() {
  const chosen = settings();
  const note = document.createElement("div");
  note.className = "note";
  note.textContent = chosen.bootstrap
    ? `Setting up the agent “${chosen.bootstrap}”: describe what it should do, who it serves and how it should talk.`
    : "New conversation. Ask anything; attach files with + or by dropping them here.";
  page.log.append(note);
}

function showSettings() {
  const chosen = settings();
  page.model.value = chosen.model || "";
  page.agent.value = chosen.bootstrap ? "" : chosen.agent || "";
  page.agent.disabled = Boolean(chosen.bootstrap);
  $("plan").checked = Boolean(chosen.plan);
}

async function loadModels() {
  const body = await getJson("/api/models");
  const options = [new Option(`Default${body.default ? ` (${body.default})` : ""}`, "")];
  for (const model of body.models || []) options.push(new Option(model.display_name || model.name, model.name));
  page.model.replaceChildren(...options);
}

async function loadAgents() {
  const body = await getJson("/api/agents");
  const options = [new Option("Default agent", "")];
  for (const agent of body.agents || []) {
    const option = new Option(agent.name, agent.name);
    if (agent.description) option.title = agent.description;
    options.push(option);
  }
  page.agent.replaceChildren(...options);
  showSettings();
}

function submit(text) {
  const trimmed = text.trim();
  if (!trimmed || !conversation || conversation.busy) return;
  banner("");
  if (trimmed.startsWith("/")) command(trimmed);
  else send(trimmed);
}

/** A `/command`: run by the daemon; the reply shows here, the settings it changed are kept. */
async function command(text) {
  let answer;
  try {
    answer = await runCommand(text, threadId, settings());
  } catch (e) {
    if (e instanceof ApiError && e.unauthorized) return askForToken(e);
    return banner(e.message);
  }
  if (!answer) return send(text);
  const next = answer.conversation || {};
  const id = next.thread_id || threadId;
  saveSettings(settingsOf(next), id);
  if (id !== threadId) {
    await openThread(id);
    threads.refresh().catch(() => {});
  } else {
    showSettings();
  }
  showReply(page.log, text, answer.reply);
  if (answer.turn) send(answer.turn.text, { ...runOptions(), is_bootstrap: answer.turn.bootstrap });
}

function send(text, context = null) {
  conversation.send(text, context).then(() => {
    // A bootstrap conversation ends its setup once the agent exists; later messages talk to it.
    const chosen = settings();
    if (chosen.bootstrap && [...page.agent.options].some((o) => o.value === chosen.bootstrap)) {
      saveSettings({ bootstrap: null, agent: chosen.bootstrap });
      showSettings();
    }
  });
}

let tokenWaiters = [];
/** Asks for a token once (a refused one is cleared and asked again), then reloads the page data. */
function askForToken(error) {
  const dialog = $("token-dialog");
  if (token()) {
    clearToken();
    $("token-error").textContent = "That token was refused (HTTP 401). Check it against gateway.api_tokens in the daemon's config.";
  } else {
    $("token-error").textContent = "";
  }
  banner("Antler needs an API token: " + (error ? error.message : "sign in"), "error");
  if (!dialog.open) dialog.showModal();
  return new Promise((resolve) => tokenWaiters.push(resolve));
}

$("token-form").addEventListener("submit", (event) => {
  const value = $("token-input").value.trim();
  if (!value) { event.preventDefault(); return; }
  setToken(value);
  $("token-input").value = "";
  banner("");
  const waiters = tokenWaiters;
  tokenWaiters = [];
  boot().then(() => waiters.forEach((resolve) => resolve()));
});
$("token-dialog").addEventListener("cancel", (event) => event.preventDefault());

async function boot() {
  try {
    await Promise.all([loadModels(), loadAgents(), threads.refresh()]);
  } catch (e) {
    if (e instanceof ApiError && e.unauthorized) return askForToken(e);
    banner(e.message);
    return;
  }
  await openThread(threadId);
}

page.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = page.input.value;
  if (!text.trim() || (conversation && conversation.busy)) return;
  page.input.value = "";
  submit(text);
});
page.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    page.composer.requestSubmit();
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && conversation && conversation.busy && !$("token-dialog").open) {
    event.preventDefault();
    conversation.cancel();
  }
});
page.stop.addEventListener("click", () => conversation && conversation.cancel());
$("new").addEventListener("click", () => { openThread(newThreadId()); closeSidebarOnPhone(); });
page.model.addEventListener("change", () => saveSettings({ model: page.model.value || null }));
page.agent.addEventListener("change", () => saveSettings({ agent: page.agent.value || null }));
$("plan").addEventListener("change", () => saveSettings({ plan: $("plan").checked }));

const agentDialog = $("agent-dialog");
$("create-agent").addEventListener("click", () => { $("agent-name").value = ""; agentDialog.showModal(); });
$("agent-cancel").addEventListener("click", () => agentDialog.close());
$("agent-form").addEventListener("submit", () => {
  const name = $("agent-name").value.trim().toLowerCase();
  const id = newThreadId();
  saveSettings({ bootstrap: name, agent: null }, id);
  openThread(id);
  closeSidebarOnPhone();
});

page.toggle.addEventListener("click", () => {
  const open = page.sidebar.classList.toggle("open");
  page.toggle.setAttribute("aria-expanded", String(open));
});
function closeSidebarOnPhone() {
  page.sidebar.classList.remove("open");
  page.toggle.setAttribute("aria-expanded", "false");
}

boot();
