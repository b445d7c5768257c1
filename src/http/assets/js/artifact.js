// A presented file as a card: a badge with its extension, its name, type and size (a HEAD
// request: Content-Type and Content-Length), a download button, and the picture itself for
// images. An SVG is shown only as an image, from its bytes turned into a data: URL typed
// image/svg+xml: inside <img> an SVG never runs script, the artifact URL itself is served as a
// download, and a data: URL opened on its own has no origin to act in.

import { artifactUrl, blobUrl, request, token } from "./api.js";

const RASTER = /\.(png|jpe?g|gif|webp|bmp|avif)$/i;
const SVG = /\.svg$/i;
/** Larger SVGs are only offered as downloads: the preview holds its bytes in the page. */
const SVG_PREVIEW_LIMIT = 2 * 1024 * 1024;

const TYPE_NAMES = {
  "application/pdf": "PDF document",
  "application/json": "JSON",
  "application/zip": "ZIP archive",
  "application/gzip": "gzip archive",
  "application/x-tar": "tar archive",
  "application/xml": "XML",
  "application/msword": "Word document",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "Word document",
  "application/vnd.ms-excel": "Excel workbook",
  "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "Excel workbook",
  "application/vnd.ms-powerpoint": "PowerPoint presentation",
  "application/vnd.openxmlformats-officedocument.presentationml.presentation": "PowerPoint presentation",
  "image/svg+xml": "SVG image",
  "text/plain": "Text",
  "text/markdown": "Markdown",
  "text/csv": "CSV table",
  "text/html": "HTML page",
  "text/xml": "XML",
};

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function extension(name) {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : "";
}

/** "12.3 KB": sizes as people read them (1 KB = 1024 bytes, as file managers count). */
export function formatSize(bytes) {
  if (!Number.isFinite(bytes) || bytes < 0) return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  if (bytes < 1024 ** 3) return `${(bytes / 1024 ** 2).toFixed(1)} MB`;
  return `${(bytes / 1024 ** 3).toFixed(1)} GB`;
}

/** A type name people know ("PNG image", "Markdown"), from the Content-Type and the name. */
export function typeName(contentType, name) {
  const essence = String(contentType || "").split(";")[0].trim().toLowerCase();
  if (TYPE_NAMES[essence]) return TYPE_NAMES[essence];
  const [major, minor] = essence.split("/");
  if (["image", "audio", "video"].includes(major) && minor) {
    return `${minor.replace(/^x-/, "").toUpperCase()} ${major}`;
  }
  const ext = extension(name);
  return ext ? `${ext.toUpperCase()} file` : "File";
}

/** The card of a presented file. */
export function createArtifact(threadId, virtualPath) {
  const url = artifactUrl(threadId, virtualPath);
  const name = String(virtualPath).split("/").filter(Boolean).pop() || "file";
  const box = el("div", "artifact");
  box.dataset.path = virtualPath;
  const head = el("div", "artifact-head");
  const kind = el("span", "kind", (extension(name) || "file").slice(0, 4).toUpperCase());
  kind.setAttribute("aria-hidden", "true");
  const info = el("div", "info");
  const title = el("span", "name", name);
  title.title = name;
  const meta = el("span", "meta", "…");
  info.append(title, meta);
  head.append(kind, info, downloadLink(url, name));
  box.append(head);
  describe(url, name, meta, box);
  return box;
}

/** Fills in type and size, then adds the picture when the file is one. */
async function describe(url, name, meta, box) {
  let type = "";
  let size = NaN;
  try {
    const response = await request("HEAD", url);
    type = response.headers.get("content-type") || "";
    size = Number(response.headers.get("content-length"));
    meta.textContent = [typeName(type, name), formatSize(size)].filter(Boolean).join(" · ");
  } catch (e) {
    meta.textContent = `${typeName("", name)} · could not be read (${e.message})`;
    return;
  }
  const essence = type.split(";")[0].trim().toLowerCase();
  if (SVG.test(name) || essence === "image/svg+xml") {
    if (size <= SVG_PREVIEW_LIMIT) box.append(await svgPreview(url, name));
  } else if (RASTER.test(name)) {
    box.append(rasterPreview(url, name));
  }
}

function rasterPreview(url, name) {
  const img = el("img", "preview");
  img.alt = name;
  pictureSource(url, name).then((src) => { img.src = src; }, () => { img.alt = name + " (could not be loaded)"; });
  return img;
}

async function svgPreview(url, name) {
  const img = el("img", "preview");
  img.alt = name;
  try {
    img.src = await pictureSource(url, name);
  } catch {
    img.alt = name + " (could not be loaded)";
  }
  return img;
}

/**
 * What an <img> showing the thread's file at `url` loads: an SVG's bytes as a data: URL, with
 * a token the bytes fetched with it (<img src> cannot authenticate), else the URL itself.
 * Rejects with the API's error when the file cannot be fetched.
 */
export async function pictureSource(url, name) {
  if (SVG.test(name)) {
    const bytes = await (await request("GET", url)).arrayBuffer();
    return dataUrl(new Blob([bytes], { type: "image/svg+xml" }));
  }
  return token() ? blobUrl(url) : url;
}

function dataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

/** The download button; with a token the file is fetched with it and saved from memory. */
function downloadLink(url, name) {
  const link = el("a", "download", "⬇ Download");
  link.href = url + "?download=true";
  link.setAttribute("download", name);
  link.setAttribute("aria-label", `Download ${name}`);
  if (token()) {
    link.addEventListener("click", async (event) => {
      event.preventDefault();
      try {
        await saveWithToken(link.href, name);
      } catch (e) {
        link.textContent = `⬇ Download failed: ${e.message}`;
      }
    });
  }
  return link;
}

/**
 * Saves the thread's file at `url` as `name`, fetched with the token (a link cannot send it).
 * Always a download, never a page: a blob: URL opened as one would run in this origin.
 */
export async function saveWithToken(url, name) {
  const temp = document.createElement("a");
  temp.href = await blobUrl(url);
  temp.download = name;
  temp.click();
}
