// The sidebar as a drawer at phone width: ☰ opens it over the page with a backdrop; the
// backdrop, its ✕ and Esc close it, and focus goes back to ☰. On wider screens it is always
// shown and none of this applies (the CSS hides ☰, ✕ and the backdrop).

export class Sidebar {
  constructor({ sidebar, toggle, close, backdrop }) {
    Object.assign(this, { sidebar, toggle, close, backdrop });
    toggle.addEventListener("click", () => (this.isOpen ? this.hide() : this.show()));
    close.addEventListener("click", () => this.hide());
    backdrop.addEventListener("click", () => this.hide());
  }

  get isOpen() { return this.sidebar.classList.contains("open"); }

  show() {
    this.sidebar.classList.add("open");
    this.backdrop.hidden = false;
    this.toggle.setAttribute("aria-expanded", "true");
    this.close.focus();
  }

  /** Closes the drawer; returns whether it was open (so Esc closes it before anything else). */
  hide() {
    const wasOpen = this.isOpen;
    this.sidebar.classList.remove("open");
    this.backdrop.hidden = true;
    this.toggle.setAttribute("aria-expanded", "false");
    if (wasOpen && this.sidebar.contains(document.activeElement)) this.toggle.focus();
    return wasOpen;
  }
}
