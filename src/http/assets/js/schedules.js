// The open conversation's scheduled tasks (`GET /api/schedules?thread_id=`), one line each
// under the header: name, next fire in the schedule's timezone, status, and Pause/Resume and
// Remove (a second click confirms, as deleting a conversation does). Hidden when there are none.

import { getJson, request } from "./api.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function schedulePath(id) {
  return "/api/schedules/" + encodeURIComponent(id);
}

/** What a schedule's line says about when it runs next. */
export function nextText(schedule) {
  if (schedule.status === "paused") return "paused";
  if (schedule.status === "done") return "done";
  return schedule.next_fire_local ? "next " + schedule.next_fire_local : "nothing left to run";
}

export class SchedulePanel {
  /** `threadId()` is the open thread; `onError(text)` shows a failure; `onUnauthorized(e)`. */
  constructor(root, { threadId, onError, onUnauthorized }) {
    Object.assign(this, { root, threadId, onError, onUnauthorized });
    this.schedules = [];
  }

  /** Reloads the open thread's schedules; a thread that does not exist yet has none. */
  async refresh() {
    const thread = this.threadId();
    const body = await getJson("/api/schedules?thread_id=" + encodeURIComponent(thread));
    if (thread !== this.threadId()) return; // another conversation opened meanwhile
    this.schedules = body.schedules || [];
    this.render();
  }

  render() {
    this.root.replaceChildren();
    this.root.hidden = this.schedules.length === 0;
    if (this.root.hidden) return;
    const title = el("h2", "schedules-title", "Scheduled in this conversation");
    const list = el("ul", "schedule-list");
    for (const schedule of this.schedules) list.append(this.item(schedule));
    this.root.append(title, list);
  }

  item(schedule) {
    const li = el("li", "schedule " + schedule.status);
    li.dataset.schedule = schedule.id;
    li.append(el("span", "schedule-name", schedule.name || schedule.id));
    li.append(el("span", "schedule-next", nextText(schedule)));
    if (schedule.last && schedule.last.outcome !== "ran") {
      li.append(el("span", "schedule-last", "last: " + schedule.last.outcome.replace("_", " ")));
    }
    const actions = el("span", "schedule-actions");
    if (schedule.status === "active" || schedule.status === "paused") {
      const resume = schedule.status === "paused";
      const toggle = el("button", "", resume ? "Resume" : "Pause");
      toggle.type = "button";
      toggle.dataset.action = resume ? "resume" : "pause";
      toggle.setAttribute("aria-label", `${toggle.textContent} schedule: ${schedule.name}`);
      toggle.addEventListener("click", () =>
        this.act(toggle, () => request("PATCH", schedulePath(schedule.id), {
          json: { status: resume ? "active" : "paused" },
        })));
      actions.append(toggle);
    }
    const remove = el("button", "remove", "Remove");
    remove.type = "button";
    remove.dataset.action = "remove";
    remove.setAttribute("aria-label", `Remove schedule: ${schedule.name}`);
    remove.addEventListener("click", () => {
      if (!remove.classList.contains("confirm")) {
        remove.classList.add("confirm");
        remove.textContent = "Remove?";
        return;
      }
      this.act(remove, () => request("DELETE", schedulePath(schedule.id)));
    });
    actions.append(remove);
    li.append(actions);
    return li;
  }

  /** Runs a button's request, then shows the list as the daemon now has it. */
  async act(button, send) {
    button.disabled = true;
    try {
      await send();
      await this.refresh();
    } catch (e) {
      button.disabled = false;
      if (e.unauthorized) return this.onUnauthorized(e);
      this.onError("Could not change the schedule: " + e.message);
    }
  }
}
