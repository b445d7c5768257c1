// Uploads: the + button and drag-and-drop put files into the thread's uploads
// (`POST /api/threads/{id}/uploads`, limits enforced and explained by the API); they are listed
// above the message box and go with the next message (`additional_kwargs.files`).

import { ApiError, request, threadPath } from "./api.js";
import { formatSize } from "./artifact.js";

export class Uploads {
  /** `threadId()` names the current thread; `ensureThread()` creates it before the first upload. */
  constructor({ list, input, dropTarget, dropHint, status, threadId, ensureThread, onUnauthorized }) {
    Object.assign(this, { list, input, dropTarget, dropHint, status, threadId, ensureThread, onUnauthorized });
    this.files = [];
    input.addEventListener("change", () => {
      const chosen = [...input.files];
      input.value = "";
      if (chosen.length) this.upload(chosen);
    });
    let depth = 0;
    dropTarget.addEventListener("dragenter", (e) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      depth++;
      dropHint.hidden = false;
    });
    dropTarget.addEventListener("dragover", (e) => { if (hasFiles(e)) e.preventDefault(); });
    dropTarget.addEventListener("dragleave", () => { if (--depth <= 0) { depth = 0; dropHint.hidden = true; } });
    dropTarget.addEventListener("drop", (e) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      depth = 0;
      dropHint.hidden = true;
      const dropped = [...e.dataTransfer.files];
      if (dropped.length) this.upload(dropped);
    });
  }

  say(text, isError = false) {
    this.status.textContent = text;
    this.status.classList.toggle("error", isError);
  }

  async upload(files) {
    const names = files.map((f) => f.name).join(", ");
    this.say(`Uploading ${names}…`);
    try {
      await this.ensureThread();
      const form = new FormData();
      for (const file of files) form.append("files", file, file.name);
      const response = await request("POST", threadPath(this.threadId(), "/uploads"), { form });
      const body = await response.json();
      for (const stored of body.files || []) {
        this.files = this.files.filter((f) => f.filename !== stored.filename);
        const entry = { filename: stored.filename, size: stored.size, path: stored.virtual_path || stored.path };
        // The agent is told about the Markdown copy of a document, or why there is none.
        if (stored.markdown_path) entry.markdown_path = stored.markdown_path;
        if (stored.conversion_error) entry.conversion_error = stored.conversion_error;
        this.files.push(entry);
      }
      this.render();
      const failed = (body.files || []).some((f) => f.conversion_error);
      this.say(body.message || `Uploaded ${names}.`, failed);
    } catch (e) {
      if (e instanceof ApiError && e.unauthorized) { this.onUnauthorized(e); return; }
      const why = e instanceof ApiError && e.status === 413 ? "too large: " : "";
      this.say(`Upload failed (${why}${e.message})`, true);
    }
  }

  async remove(file) {
    try {
      await request("DELETE", threadPath(this.threadId(), "/uploads/" + encodeURIComponent(file.filename)));
      this.files = this.files.filter((f) => f !== file);
      this.render();
      this.say(`Removed ${file.filename}.`);
    } catch (e) {
      this.say(`Could not remove ${file.filename}: ${e.message}`, true);
    }
  }

  render() {
    this.list.replaceChildren(...this.files.map((file) => {
      const item = document.createElement("li");
      item.append(document.createTextNode(`${file.filename} (${formatSize(file.size) || "?"})`));
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "×";
      remove.setAttribute("aria-label", `Remove ${file.filename}`);
      remove.addEventListener("click", () => this.remove(file));
      item.append(remove);
      return item;
    }));
  }

  /** The files for the next message. */
  pending() { return this.files.slice(); }

  clear() {
    this.files = [];
    this.render();
  }
}

function hasFiles(event) {
  return event.dataTransfer && [...event.dataTransfer.types].includes("Files");
}
