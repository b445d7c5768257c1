// The HTTP API as the page uses it: the bearer token (kept in this tab's sessionStorage only),
// `{"error": {code, message}}` bodies turned into ApiError, and the run stream's SSE frames.

const TOKEN_KEY = "antler.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
  get unauthorized() { return this.status === 401 && this.code !== "api_locked"; }
}

export function token() { return sessionStorage.getItem(TOKEN_KEY); }
export function setToken(value) { sessionStorage.setItem(TOKEN_KEY, value); }
export function clearToken() { sessionStorage.removeItem(TOKEN_KEY); }

function authHeaders(extra = {}) {
  const headers = { ...extra };
  const current = token();
  if (current) headers.Authorization = "Bearer " + current;
  return headers;
}

async function errorOf(response) {
  const body = await response.json().catch(() => ({}));
  const error = body && body.error;
  const message = (error && error.message) || `the server answered HTTP ${response.status}`;
  return new ApiError(response.status, (error && error.code) || "", message);
}

/** Sends a request; answers other than 2xx become an ApiError with the server's message. */
export async function request(method, path, { json, form, signal, accept } = {}) {
  const init = { method, headers: authHeaders(accept ? { Accept: accept } : {}), signal };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (form) {
    init.body = form;
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "network", "Antler cannot be reached; is the daemon running? (" + e.message + ")");
  }
  if (!response.ok) throw await errorOf(response);
  return response;
}

export async function getJson(path) { return (await request("GET", path)).json(); }
export async function postJson(path, body) { return (await request("POST", path, { json: body })).json(); }

export function threadPath(threadId, rest = "") {
  return "/api/threads/" + encodeURIComponent(threadId) + rest;
}

/** The URL serving a thread's file, one encoded segment per path segment (as the API builds it). */
export function artifactUrl(threadId, virtualPath) {
  const segments = String(virtualPath).split("/").filter(Boolean).map(encodeURIComponent);
  return threadPath(threadId, "/artifacts/" + segments.join("/"));
}

/**
 * Fetches a file with the token and returns an object URL for it: links and images cannot send
 * an Authorization header themselves. Object URLs are cached per URL for the page's life.
 */
const blobUrls = new Map();
export async function blobUrl(url) {
  if (!blobUrls.has(url)) {
    blobUrls.set(url, request("GET", url).then((r) => r.blob()).then((b) => URL.createObjectURL(b)));
  }
  try {
    return await blobUrls.get(url);
  } catch (e) {
    blobUrls.delete(url);
    throw e;
  }
}

/** Whether `response` is an event stream (else JSON): some routes answer either way. */
export function isEventStream(response) {
  return (response.headers.get("Content-Type") || "").startsWith("text/event-stream");
}

/** Reads a `text/event-stream` body and yields `{event, data}` with `data` parsed as JSON. */
export async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith(":")) continue; // keep-alive comment
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let rest = colon < 0 ? "" : line.slice(colon + 1);
        if (rest.startsWith(" ")) rest = rest.slice(1);
        if (field === "event") event = rest;
        else if (field === "data") data.push(rest);
      }
      if (data.length === 0) continue;
      let parsed;
      try { parsed = JSON.parse(data.join("\n")); } catch { parsed = data.join("\n"); }
      yield { event, data: parsed };
    }
  }
}
