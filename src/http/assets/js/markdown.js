// Model text → safe HTML: marked renders Markdown with raw HTML shown as text (a chat answer
// has no use for markup of its own, and `<img onerror>` then never reaches a parser), DOMPurify
// removes anything active that Markdown itself can produce (javascript: links and the like),
// code blocks get a copy button. `[citation:Title](URL)` is a link titled Title. Images and
// links naming the thread's files by their sandbox path (`/mnt/user-data/outputs/chart.png`)
// point at the file's artifact URL; other images are kept only when they point at this thread's
// files, and a picture that cannot be shown says why in its place.

import { marked } from "../vendor/marked.esm.js";
import DOMPurify from "../vendor/purify.es.mjs";
import { artifactUrl, request, token } from "./api.js";
import { pictureSource, saveWithToken } from "./artifact.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

const CITATION = /^\s*citation:\s*/i;
/** The sandbox folders the API serves a thread's files from. */
const SHOWN_ROOTS = ["/mnt/user-data/outputs/", "/mnt/user-data/uploads/"];
const NOT_SHOWN = "not shown, only files in /mnt/user-data/outputs can be shown here";

/** The thread whose files a rendering's paths name: set for one synchronous parse. */
let renderThread = null;

marked.use({
  gfm: true,
  breaks: false,
  renderer: {
    // Raw HTML in the model's text (blocks and inline tags) is shown as the text it is.
    html(token) { return escapeHtml(token.text ?? token.raw ?? ""); },
    link(token) {
      const path = filePath(token.href, false);
      if (path !== null) return fileLink(this.parser.parseInline(withoutCitation(token.tokens)), path);
      if (!isCitation(token.tokens)) return false;
      const href = escapeHtml(cleanUrl(token.href));
      const title = this.parser.parseInline(withoutCitation(token.tokens)) || href;
      return `<a class="citation" href="${href}" title="${href}">${title}</a>`;
    },
    image(token) {
      const path = filePath(token.href, true);
      if (path === null) return false;
      const alt = token.text || "";
      const name = baseName(path);
      if (!renderThread || !shown(path)) return pictureNote(alt, name, NOT_SHOWN);
      const src = escapeHtml(artifactUrl(renderThread, path));
      return `<img src="${src}" alt="${escapeHtml(alt)}" data-file="${escapeHtml(name)}">`;
    },
  },
});

/** Whether a link's text starts with `citation:`. */
function isCitation(tokens) {
  const first = tokens && tokens[0];
  return !!first && first.type === "text" && CITATION.test(first.text);
}

/** The link text's tokens with a leading `citation:` dropped. */
function withoutCitation(tokens) {
  if (!isCitation(tokens)) return tokens || [];
  const [first, ...rest] = tokens;
  return [{ ...first, raw: first.raw.replace(CITATION, ""), text: first.text.replace(CITATION, "") }, ...rest];
}

/** A URL as marked itself writes it into an attribute. */
function cleanUrl(href) {
  try { return encodeURI(href).replace(/%25/g, "%"); } catch { return ""; }
}

/**
 * The file path a link or image target names, without a `sandbox:` or `file://` prefix and
 * percent-decoded, or null for a URL (and, for a link, a relative target: it may be anything).
 */
export function filePath(href, image) {
  const target = String(href || "").trim();
  let path;
  const prefixed = /^(sandbox:|file:\/\/)/i.exec(target);
  if (prefixed) path = target.slice(prefixed[0].length);
  // The API's own URLs (an artifact's) are URLs too.
  else if (!target || /^[a-z][a-z0-9+.-]*:/i.test(target) || /^[#?]|^\/\/|^\/api\//.test(target)) return null;
  else if (!image && !target.startsWith("/")) return null;
  else path = target;
  try { return decodeURIComponent(path); } catch { return path; }
}

/** Whether the API serves `path`: inside outputs or uploads, without `..`. */
function shown(path) {
  return SHOWN_ROOTS.some((root) => path.startsWith(root) && path.length > root.length)
    && !path.split("/").some((segment) => segment === "..");
}

function baseName(path) {
  return path.split("/").filter(Boolean).pop() || path;
}

/** A link to one of the thread's files; a path the API does not serve stays text, with why. */
function fileLink(inner, path) {
  const name = baseName(path);
  if (!renderThread || !shown(path)) {
    return `${inner} <span class="file-note">(${escapeHtml(name)}: not available here, only files in /mnt/user-data/outputs can be opened)</span>`;
  }
  const href = escapeHtml(artifactUrl(renderThread, path));
  return `<a class="file-link" href="${href}" data-file="${escapeHtml(name)}">${inner}</a>`;
}

/** What stands where a picture cannot be shown. */
function pictureNote(alt, name, why) {
  const label = alt && alt !== name ? `${alt} (${name})` : name;
  return `<span class="file-note">${escapeHtml(`[image: ${label}: ${why}]`)}</span>`;
}

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

/** Renders `text` into `element`, replacing what it held; `threadId` owns the files it names. */
export function renderMarkdown(element, text, threadId = null) {
  renderThread = threadId;
  let html;
  try {
    html = marked.parse(String(text || ""), { async: false });
  } finally {
    renderThread = null;
  }
  const fragment = DOMPurify.sanitize(html, PURIFY);
  for (const img of fragment.querySelectorAll("img[data-blocked]")) {
    const alt = img.getAttribute("alt");
    img.replaceWith(document.createTextNode(alt ? `[image: ${alt}]` : "[image]"));
  }
  for (const img of fragment.querySelectorAll("img[src^='/api/']")) showPicture(img);
  for (const link of fragment.querySelectorAll("a.file-link")) openFile(link);
  for (const pre of fragment.querySelectorAll("pre")) wrapCode(pre);
  element.replaceChildren(fragment);
}

/** Loads one of the thread's pictures (see `pictureSource`); if it cannot, says why instead. */
function showPicture(img) {
  const url = img.getAttribute("src");
  const name = img.dataset.file || baseName(decodeURIComponent(url));
  const fail = (why) => {
    const note = document.createElement("span");
    note.className = "file-note";
    const alt = img.getAttribute("alt");
    note.textContent = `[image: ${alt && alt !== name ? `${alt} (${name})` : name}: ${why}]`;
    img.replaceWith(note);
  };
  img.removeAttribute("src");
  img.addEventListener("error", () => whyNotLoaded(url).then(fail), { once: true });
  pictureSource(url, name).then((src) => { img.src = src; }, (e) => fail(reason(e)));
}

/** Why a picture did not load, asked once per URL (a streaming answer renders it many times). */
const failures = new Map();
function whyNotLoaded(url) {
  if (!failures.has(url)) {
    failures.set(url, request("HEAD", url).then(() => "could not be shown", reason));
  }
  return failures.get(url);
}

function reason(error) {
  if (error && error.status === 404) return "the file does not exist";
  if (error && error.status === 403) return NOT_SHOWN;
  return `could not be loaded (${(error && error.message) || error})`;
}

/** A link to a thread's file opens in a new tab; with a token it is fetched and saved. */
function openFile(link) {
  link.setAttribute("target", "_blank");
  link.setAttribute("rel", "noopener noreferrer");
  if (!token()) return;
  const name = link.dataset.file || "file";
  link.addEventListener("click", async (event) => {
    event.preventDefault();
    try {
      await saveWithToken(link.getAttribute("href"), name);
    } catch (e) {
      link.after(` (${name} ${reason(e)})`);
    }
  });
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
