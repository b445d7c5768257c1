// Chat commands typed in the composer (`/plan on`, `/model NAME`, `/agent NAME`, `/new`,
// `/memory`, `/usage`, …): the daemon runs them (`POST /api/commands`, the implementation the
// chat platforms and `antler chat` share) with this thread's settings, and answers with a
// reply, the settings as the command left them, and for some a new thread or a turn to run.
// Text the daemon does not know as a command (a skill's `/name task`) is sent as a message.
// `/approve ID` and `/deny ID` answer with the run they resume, as an event stream.

import { ApiError, isEventStream, request } from "./api.js";

/** Runs `text` for the thread `threadId` with the page's `chosen` settings; `null` when it is
 * not a command, `{stream}` (the response) when it resumed a run. */
export async function runCommand(text, threadId, chosen) {
  const conversation = {
    thread_id: threadId,
    model: chosen.model || null,
    agent: chosen.agent || null,
    plan_mode: Boolean(chosen.plan),
    bootstrap: bootstrapOf(chosen),
  };
  try {
    const response = await request("POST", "/api/commands", {
      json: { command: text, conversation }, accept: "text/event-stream, application/json",
    });
    return isEventStream(response) ? { stream: response } : await response.json();
  } catch (e) {
    if (e instanceof ApiError && e.code === "not_a_command") return null;
    throw e;
  }
}

/** The page's settings for the conversation an answer describes. A bootstrap is the name of
 * the agent being set up, or `true` while the person has yet to name it. */
export function settingsOf(conversation) {
  const bootstrap = conversation.bootstrap;
  return {
    model: conversation.model || null,
    agent: conversation.agent || null,
    plan: Boolean(conversation.plan_mode),
    bootstrap: bootstrap ? bootstrap.agent || true : null,
  };
}

/** The conversation's bootstrap as the daemon spells it. */
function bootstrapOf(chosen) {
  if (!chosen.bootstrap) return null;
  return { agent: typeof chosen.bootstrap === "string" ? chosen.bootstrap : null };
}

/** Shows a command and its reply in the conversation (not sent to the model, not kept). */
export function showReply(log, command, reply) {
  const note = document.createElement("div");
  note.className = "command-reply";
  const asked = document.createElement("div");
  asked.className = "command";
  asked.textContent = command;
  note.append(asked);
  if (reply) {
    const text = document.createElement("div");
    text.textContent = reply;
    note.append(text);
  }
  log.append(note);
  log.scrollTop = log.scrollHeight;
}
