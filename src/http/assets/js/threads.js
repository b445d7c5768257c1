// The sidebar: the user's threads (`GET /api/threads`, newest first, by title), switching, and
// deleting with a second click to confirm (no modal dialog).

import { getJson, request, threadPath } from "./api.js";

export class ThreadList {
  /**
   * `current()` is the open thread's id; `open(id)` switches; `deleted(id)` after a delete;
   * `listed(threads)` after every refresh.
   */
  constructor(list, { current, open, deleted, onError, listed }) {
    Object.assign(this, { list, current, open, deleted, onError, listed });
    this.threads = [];
  }

  async refresh() {
    const body = await getJson("/api/threads");
    this.threads = (body.threads || []).slice().sort((a, b) =>
      String(b.updated_at || "").localeCompare(String(a.updated_at || "")));
    this.render();
    this.listed(this.threads);
  }

  render() {
    const current = this.current();
    const items = this.threads.map((thread) => this.item(thread, thread.thread_id === current));
    if (!this.threads.some((t) => t.thread_id === current)) {
      items.unshift(this.item({ thread_id: current, title: "New conversation" }, true));
    }
    this.list.replaceChildren(...items);
  }

  item(thread, isCurrent) {
    const li = document.createElement("li");
    li.dataset.thread = thread.thread_id;
    if (isCurrent) li.className = "current";
    const open = document.createElement("button");
    open.type = "button";
    open.className = "open";
    const title = thread.title || untitled(thread);
    open.textContent = title;
    open.title = title;
    if (isCurrent) open.setAttribute("aria-current", "true");
    open.addEventListener("click", () => this.open(thread.thread_id));
    li.append(open);
    if (thread.created_at) {
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "remove";
      remove.textContent = "×";
      remove.setAttribute("aria-label", `Delete conversation: ${title}`);
      remove.addEventListener("click", () => this.confirmDelete(thread, remove, title));
      li.append(remove);
    }
    return li;
  }

  confirmDelete(thread, button, title) {
    if (!button.classList.contains("confirm")) {
      button.classList.add("confirm");
      button.textContent = "Delete?";
      button.setAttribute("aria-label", `Click again to delete: ${title}`);
      setTimeout(() => {
        if (!button.isConnected) return;
        button.classList.remove("confirm");
        button.textContent = "×";
        button.setAttribute("aria-label", `Delete conversation: ${title}`);
      }, 4000);
      return;
    }
    request("DELETE", threadPath(thread.thread_id))
      .then(() => {
        this.threads = this.threads.filter((t) => t.thread_id !== thread.thread_id);
        this.deleted(thread.thread_id);
        this.render();
        this.listed(this.threads);
      })
      .catch((e) => this.onError(`Could not delete the conversation: ${e.message}`));
  }
}

function untitled(thread) {
  if (!thread.created_at) return "Untitled conversation";
  const when = new Date(thread.created_at);
  return "Conversation of " + when.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}
