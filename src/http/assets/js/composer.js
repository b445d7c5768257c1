// The message box: it grows with its text up to the stylesheet's max-height (then scrolls), and
// its placeholder is the short one where the long one would not fit on one line.

const NARROW = window.matchMedia("(max-width: 720px)");

export function setUpMessageBox(input) {
  const long = input.placeholder;
  const short = input.dataset.shortPlaceholder || long;
  const placeholder = () => { input.placeholder = NARROW.matches ? short : long; };
  NARROW.addEventListener("change", () => { placeholder(); fit(input); });
  placeholder();
  input.addEventListener("input", () => fit(input));
  fit(input);
}

/** Sizes the box to its content; call it after changing the value from a script too. */
export function fit(input) {
  input.style.height = "auto";
  const style = getComputedStyle(input);
  const borders = parseFloat(style.borderTopWidth) + parseFloat(style.borderBottomWidth);
  input.style.height = input.scrollHeight + borders + "px";
}
