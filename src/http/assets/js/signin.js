// Signing in on a daemon with `gateway.api_tokens`: the token dialog over an empty page, and the
// note about conversations made earlier without a token. Those belong to the user `local` and
// are not listed for a token of another user, which would otherwise look like they were lost.

import { clearToken, setToken, token } from "./api.js";

const LOCAL_THREADS_KEY = "antler.localThreads";
const LOCAL_USER = "local";

export class SignIn {
  /** `signedIn()` reloads the page's data once a token was entered; it resolves when done. */
  constructor({ dialog, form, input, error, signedIn }) {
    Object.assign(this, { dialog, form, input, error, signedIn });
    this.waiters = [];
    form.addEventListener("submit", (event) => this.submit(event));
    // The page has nothing to show without a token: the dialog cannot be dismissed.
    dialog.addEventListener("cancel", (event) => event.preventDefault());
  }

  get asking() { return this.dialog.open; }

  /** Asks for a token (again, saying so, when the one in use was refused); resolves once in. */
  ask() {
    if (token()) {
      clearToken();
      this.error.textContent = "That token was not accepted. Check it for typing mistakes, or ask whoever runs this Antler for a new one.";
    } else {
      this.error.textContent = "";
    }
    document.body.classList.add("signed-out");
    if (!this.dialog.open) this.dialog.showModal();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  submit(event) {
    const value = this.input.value.trim();
    if (!value) { event.preventDefault(); return; }
    setToken(value);
    this.input.value = "";
    document.body.classList.remove("signed-out");
    const waiters = this.waiters;
    this.waiters = [];
    this.signedIn().then(() => waiters.forEach((resolve) => resolve()));
  }
}

/**
 * After the thread list loaded, as `user` (whom the daemon says the page acts as): the local
 * user's count of conversations is remembered; for another user, while the local user had
 * some, `note` says where they are.
 */
export function noteLocalThreads(threads, user, note) {
  if (!user) return;
  if (user === LOCAL_USER) {
    localStorage.setItem(LOCAL_THREADS_KEY, String(threads.length));
    note.hidden = true;
    return;
  }
  const earlier = Number(localStorage.getItem(LOCAL_THREADS_KEY) || 0);
  if (!earlier) {
    note.hidden = true;
    return;
  }
  const text = document.createElement("p");
  const one = earlier === 1;
  text.append(
    one ? "1 conversation made without a token is not listed: it belongs to the user “local”. It is kept; to see it here, "
      : `${earlier} conversations made without a token are not listed: they belong to the user “local”. They are kept; to see them here, `,
    "sign in with a token for that user (", code("user: local"), " under ", code("gateway.api_tokens"), ").",
  );
  const dismiss = document.createElement("button");
  dismiss.type = "button";
  dismiss.textContent = "Got it";
  dismiss.addEventListener("click", () => {
    localStorage.removeItem(LOCAL_THREADS_KEY);
    note.hidden = true;
  });
  note.replaceChildren(text, dismiss);
  note.hidden = false;
}

function code(text) {
  const node = document.createElement("code");
  node.textContent = text;
  return node;
}
