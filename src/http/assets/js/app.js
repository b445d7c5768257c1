// The web chat's entry point: wires the page (sidebar, pickers, composer, dialogs) to the
// conversation, the uploads and the token. The open thread's id survives reloads
// (localStorage); the model, agent and bootstrap flag are remembered per thread.

import { ApiError, getJson, postJson } from "./api.js";
import { Conversation } from "./chat.js";
import { fit, setUpMessageBox } from "./composer.js";
import { runCommand, settingsOf, showReply } from "./commands.js";
import { Uploads } from "./files.js";
import { SchedulePanel } from "./schedules.js";
import { Sidebar } from "./sidebar.js";
import { SignIn, noteLocalThreads } from "./signin.js";
import { ThreadList } from "./threads.js";

const $ = (id) => document.getElementById(id);
const THREAD_KEY = "antler.thread";
const SETTINGS_KEY = "antler.settings";
const USER_KEY = "antler.user";

const page = {
  log: $("log"), input: $("input"), composer: $("composer"), send: $("send"), stop: $("stop"),
  model: $("model"), agent: $("agent"), banner: $("banner"), status: $("status"),
};
const sidebar = new Sidebar({
  sidebar: $("sidebar"), toggle: $("toggle-sidebar"), close: $("close-sidebar"), backdrop: $("backdrop"),
});
const signIn = new SignIn({
  dialog: $("token-dialog"), form: $("token-form"), input: $("token-input"), error: $("token-error"),
  signedIn: () => boot(),
});
setUpMessageBox(page.input);

let threadId = localStorage.getItem(THREAD_KEY) || newThreadId();
let conversation = null;
let defaultModel = null;
/** Whom the daemon says this page acts as (`local` without a token), from `/api/agents`. */
let currentUser = null;

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
  open: (id) => { if (id !== threadId) openThread(id); sidebar.hide(); },
  deleted: (id) => { forgetSettings(id); if (id === threadId) openThread(newThreadId()); },
  onError: (text) => banner(text),
  listed: (list) => noteLocalThreads(list, currentUser, $("local-notice")),
});

const schedules = new SchedulePanel($("schedules"), {
  threadId: () => threadId,
  onError: (text) => banner(text),
  onUnauthorized: askForToken,
});

/** The run `context`: the thread's model and agent, and the bootstrap flag while it lasts. */
function runOptions() {
  const chosen = settings();
  const context = {};
  if (chosen.model) context.model_name = chosen.model;
  if (chosen.plan) context.is_plan_mode = true;
  if (chosen.bootstrap) {
    context.is_bootstrap = true;
    if (typeof chosen.bootstrap === "string") context.agent_name = chosen.bootstrap;
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
    onFinished: () => {
      threads.refresh().catch(() => {});
      loadAgents().catch(() => {});
      // A run may have created or changed a schedule here (`schedule_task`).
      schedules.refresh().catch(() => {});
    },
    answer: (text) => submit(text),
  });
  return conversation;
}

async function openThread(id) {
  if (conversation && conversation.busy) conversation.cancel();
  threadId = id;
  localStorage.setItem(THREAD_KEY, id);
  page.log.replaceChildren();
  schedules.schedules = [];
  schedules.render();
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
    await schedules.refresh();
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
  const agent = typeof chosen.bootstrap === "string" ? `the agent “${chosen.bootstrap}”` : "a new agent";
  note.textContent = chosen.bootstrap
    ? `Setting up ${agent}: describe what it should do, who it serves and how it should talk.`
    : "New conversation. Ask anything; attach files with + or by dropping them here.";
  page.log.append(note);
}

function showSettings() {
  const chosen = settings();
  // A model chosen by name that is (now) the default, or no longer configured, shows the default.
  page.model.value = chosen.model && chosen.model !== defaultModel ? chosen.model : "";
  if (page.model.selectedIndex < 0) page.model.value = "";
  page.agent.value = chosen.bootstrap ? "" : chosen.agent || "";
  page.agent.disabled = Boolean(chosen.bootstrap);
  $("plan").checked = Boolean(chosen.plan);
}

/**
 * One option per configured model, by name and the model id it runs ("default — qwen2.5:7b").
 * The default model's value is "" (no `model_name` sent), so a thread on the default follows
 * the config when the default changes.
 */
async function loadModels() {
  const body = await getJson("/api/models");
  const models = body.models || [];
  const options = models.map((model) => {
    const name = model.display_name || model.name;
    const isDefault = model.name === body.default;
    let label = model.model && model.model !== name ? `${name} — ${model.model}` : name;
    if (isDefault && models.length > 1 && model.name !== "default") label += " (default)";
    const option = new Option(label, isDefault ? "" : model.name);
    option.title = isDefault ? "The default model" : `Model ${model.name}`;
    return option;
  });
  if (options.length === 0) options.push(new Option("Default model", ""));
  page.model.replaceChildren(...options);
  defaultModel = body.default || null;
  showSettings();
}

async function loadAgents() {
  const body = await getJson("/api/agents");
  currentUser = body.user || null;
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
  // `/approve ID`, `/deny ID`: the decision's reply opens the run it resumed.
  if (answer.stream) {
    showReply(page.log, text, "");
    return conversation.resumeFrom(answer.stream);
  }
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
  // `/bootstrap`'s turn: the conversation's settings now carry the bootstrap.
  if (answer.turn) send(answer.turn.text);
}

function send(text, context = null) {
  const sent = conversation;
  sent.send(text, context).then(() => {
    // A bootstrap conversation ends its setup once the agent exists; later messages talk to it.
    const created = sent.createdAgent;
    if (settings(sent.threadId).bootstrap && created) {
      saveSettings({ bootstrap: null, agent: created === "default" ? null : created }, sent.threadId);
      if (sent === conversation) showSettings();
    }
  });
}

/** Asks for a token (the dialog says why), then reloads the page's data. */
function askForToken() {
  banner("");
  return signIn.ask();
}

async function boot() {
  try {
    await Promise.all([loadModels(), loadAgents(), threads.refresh()]);
    noteLocalThreads(threads.threads, currentUser, $("local-notice"));
    // Signed in as someone else than last time: the open conversation was theirs, start anew.
    const lastUser = localStorage.getItem(USER_KEY);
    if (currentUser && lastUser && lastUser !== currentUser) threadId = newThreadId();
    if (currentUser) localStorage.setItem(USER_KEY, currentUser);
  } catch (e) {
    if (e instanceof ApiError && e.unauthorized) return askForToken(e);
    banner(e.message);
    return;
  }
  await openThread(threadId);
}

// Pictures load after the text around them: a log that was at its end stays at its end.
let logAtEnd = true;
page.log.addEventListener("scroll", () => {
  logAtEnd = page.log.scrollHeight - page.log.scrollTop - page.log.clientHeight < 80;
});
page.log.addEventListener("load", () => { if (logAtEnd) page.log.scrollTop = page.log.scrollHeight; }, true);

page.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = page.input.value;
  if (!text.trim() || (conversation && conversation.busy)) return;
  page.input.value = "";
  fit(page.input);
  submit(text);
});
page.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    page.composer.requestSubmit();
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || signIn.asking || agentDialog.open) return;
  // Esc closes the drawer first; with nothing to close, it stops the answer.
  if (sidebar.hide()) event.preventDefault();
  else if (conversation && conversation.busy) {
    event.preventDefault();
    conversation.cancel();
  }
});
page.stop.addEventListener("click", () => conversation && conversation.cancel());
$("new").addEventListener("click", () => { openThread(newThreadId()); sidebar.hide(); });
page.model.addEventListener("change", () => saveSettings({ model: page.model.value || null }));
page.agent.addEventListener("change", () => saveSettings({ agent: page.agent.value || null }));
$("plan").addEventListener("change", () => saveSettings({ plan: $("plan").checked }));

const agentDialog = $("agent-dialog");
$("create-agent").addEventListener("click", () => { $("agent-name").value = ""; agentDialog.showModal(); });
$("agent-cancel").addEventListener("click", () => agentDialog.close());
$("agent-form").addEventListener("submit", () => {
  const name = $("agent-name").value.trim().toLowerCase();
  if ([...page.agent.options].some((o) => o.value === name)) {
    return banner(`You already have an agent named ${name}: choose it in the agent list, or pick another name.`);
  }
  const id = newThreadId();
  saveSettings({ bootstrap: name, agent: null }, id);
  openThread(id);
  sidebar.hide();
});

boot();
