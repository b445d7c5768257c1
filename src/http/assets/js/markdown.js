// Model text → safe HTML: marked renders Markdown with raw HTML shown as text (a chat answer
// has no use for markup of its own, and `<img onerror>` then never reaches a parser), DOMPurify
// removes anything active that Markdown itself can produce (javascript: links and the like),
// code blocks get a copy button. Images are kept only when they point at this thread's files.

import { marked } from "../vendor/marked.esm.js";
import DOMPurify from "../vendor/purify.es.mjs";
import { blobUrl, token } from "./api.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

marked.use({
  gfm: true,
  breaks: false,
  renderer: {
    // Raw HTML in the model's text (blocks and inline tags) is shown as the text it is.
    html(token) { return escapeHtml(token.text ?? token.raw ?? ""); },
  },
});

/** Image sources allowed in model text: the API's artifact URLs and inline data images. */
function allowedImage(src) {
  return /^\/api\/threads\/[^/]+\/artifacts\//.test(src) || /^data:image\/(png|jpeg|gif|webp);/i.test(src);
}

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    const href = node.getAttribute("href");
    if (!href.startsWith("/") && !href.startsWith("#")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  }
  // An image from elsewhere would be a tracking pixel (and the CSP refuses it): keep its text.
  if (node.tagName === "IMG" && !allowedImage(node.getAttribute("src") || "")) {
    node.removeAttribute("src");
    node.setAttribute("data-blocked", "");
  }
});

const PURIFY = {
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "option"],
  FORBID_ATTR: ["style", "srcset"],
  RETURN_DOM_FRAGMENT: true,
};

/** Renders `text` into `element`, replacing what it held. */
export function renderMarkdown(element, text) {
  const html = marked.parse(String(text || ""), { async: false });
  const fragment = DOMPurify.sanitize(html, PURIFY);
  for (const img of fragment.querySelectorAll("img[data-blocked]")) {
    const alt = img.getAttribute("alt");
    img.replaceWith(document.createTextNode(alt ? `[image: ${alt}]` : "[image]"));
  }
  if (token()) {
    // With a token, <img src> cannot authenticate: load the file with it instead.
    for (const img of fragment.querySelectorAll("img[src^='/api/']")) {
      const url = img.getAttribute("src");
      img.removeAttribute("src");
      blobUrl(url).then((src) => { img.src = src; }, () => { img.alt = "[image could not be loaded]"; });
    }
  }
  for (const pre of fragment.querySelectorAll("pre")) wrapCode(pre);
  element.replaceChildren(fragment);
}

function wrapCode(pre) {
  const wrapper = document.createElement("div");
  wrapper.className = "code-block";
  pre.replaceWith(wrapper);
  wrapper.append(pre);
  const copy = document.createElement("button");
  copy.type = "button";
  copy.className = "copy";
  copy.textContent = "Copy";
  copy.setAttribute("aria-label", "Copy code");
  copy.addEventListener("click", () => copyText(pre.textContent, copy));
  wrapper.append(copy);
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed: select and copy by hand";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}
