// The SDK scenario in JS: the real `@langchain/langgraph-sdk` drives a running Antler daemon.
//
// Run by `tests/it/langgraph/sdk.rs` with node. Every call is the SDK's documented one,
// unpatched. Each step prints `PASS <step>: <result>` or `FAIL <step>: <error>` with the
// server's answer; the script goes on where it can and exits 1 when any step failed.
//
// Environment: as scenario.py, plus ANTLER_LANGGRAPH_SDK_DIR (where `.ci/run` installed the
// SDK: `js/node_modules/@langchain/langgraph-sdk`), imported from there by path because an ES
// module resolves packages next to itself, not through NODE_PATH.

import { randomUUID } from "node:crypto";
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.ANTLER_LANGGRAPH_SDK_DIR;
const entry = path.join(sdkDir, "js/node_modules/@langchain/langgraph-sdk/dist/index.js");
const { Client } = await import(pathToFileURL(entry).href);

const URL = process.env.ANTLER_URL;
const TOKEN = process.env.ANTLER_TOKEN;
const BASE = process.env.ANTLER_BASE ?? "/api/langgraph";
const OTHER_BASE = process.env.ANTLER_OTHER_BASE ?? "/api";
const AGENT = process.env.ANTLER_AGENT;
const TAG = process.env.ANTLER_TAG ?? "js";
const MODES = ["values", "messages-tuple", "updates", "custom"];

// No retries: a refusal is reported at once instead of after the caller's backoff.
const options = (base) => ({
  apiUrl: URL + base,
  apiKey: null,
  defaultHeaders: { Authorization: `Bearer ${TOKEN}` },
  callerOptions: { maxRetries: 0 },
});
const client = new Client(options(BASE));
const other = new Client(options(OTHER_BASE));

const failures = [];

class Skip extends Error {}

function need(value, what) {
  if (value === undefined || value === null) throw new Skip(`needs ${what}`);
  return value;
}

function short(value, limit = 1500) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch {
    text = String(value);
  }
  text = text ?? String(value);
  return text.length <= limit ? text : `${text.slice(0, limit)}…`;
}

function check(condition, what, got) {
  if (!condition) throw new Error(`assertion failed: ${what}; got ${short(got)}`);
}

async function step(name, action) {
  try {
    const value = await action();
    console.log(`PASS ${name}: ${short(value, 300)}`);
    return value;
  } catch (error) {
    failures.push(name);
    if (error instanceof Skip) {
      console.log(`FAIL ${name}: skipped, ${error.message}`);
    } else {
      // HTTPError's message carries the status and the server's body.
      console.log(`FAIL ${name}: ${error?.name}: ${error?.message}`);
      if (error?.status) console.log(`     server answered: HTTP ${error.status} ${error.text ?? ""}`);
    }
    return null;
  }
}

const human = (text) => ({ messages: [{ role: "user", content: text }] });

function lastAiText(values) {
  const messages = values?.messages ?? [];
  for (const message of [...messages].reverse()) {
    if (message.type === "ai" && typeof message.content === "string" && message.content) {
      return message.content;
    }
  }
  return null;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Assistants.
await step("assistants.search", async () => {
  const found = await client.assistants.search({ limit: 50 });
  const ids = found.map((a) => a.assistant_id);
  check(ids.includes("lead_agent") && ids.includes(AGENT), `lead_agent and ${AGENT} among assistants`, ids);
  for (const assistant of found) {
    for (const key of ["assistant_id", "graph_id", "config", "metadata", "created_at", "updated_at"]) {
      check(key in assistant, `assistant field ${key}`, assistant);
    }
  }
  return ids;
});

await step("assistants.get", async () => {
  const lead = await client.assistants.get("lead_agent");
  check(lead.assistant_id === "lead_agent", "lead_agent by id", lead);
  const custom = await client.assistants.get(AGENT);
  check(custom.assistant_id === AGENT, "custom agent by id", custom);
  check(JSON.stringify(custom).includes("scenario agent"), "its description in the assistant", custom);
  return [lead.assistant_id, custom.assistant_id];
});

// Threads.
const thread = await step("threads.create", async () => {
  const created = await client.threads.create({ metadata: { sdk: TAG, topic: "scenario" } });
  check(created.thread_id, "a thread_id", created);
  check(created.status === "idle", "status idle", created);
  check(created.metadata?.sdk === TAG, "metadata kept", created);
  return created;
});
const threadId = thread?.thread_id;

const namedId = await step("threads.create(threadId, ifExists)", async () => {
  const wanted = randomUUID();
  const first = await client.threads.create({ threadId: wanted, metadata: { sdk: TAG, named: true } });
  const again = await client.threads.create({ threadId: wanted, ifExists: "do_nothing" });
  check(first.thread_id === wanted && again.thread_id === wanted, "the named thread", [first, again]);
  return wanted;
});

await step("threads.update", async () => {
  const updated = await client.threads.update(need(threadId, "a thread"), { metadata: { stage: "updated" } });
  check(updated.metadata?.stage === "updated" && updated.metadata?.sdk === TAG, "metadata merged", updated);
  return updated.metadata;
});

await step("threads.search", async () => {
  const found = await client.threads.search({
    metadata: { sdk: TAG, stage: "updated" },
    status: "idle",
    limit: 10,
    offset: 0,
    sortBy: "created_at",
    sortOrder: "desc",
  });
  const ids = found.map((t) => t.thread_id);
  check(ids.length === 1 && ids[0] === threadId, "exactly the updated thread", ids);
  const page = await client.threads.search({ metadata: { sdk: TAG }, limit: 1, offset: 0 });
  check(page.length === 1, "limit 1 gives one thread", page);
  return ids;
});

await step("threads.get", async () => {
  const got = await client.threads.get(need(threadId, "a thread"));
  check(got.thread_id === threadId, "same thread", got);
  check(got.metadata?.stage === "updated", "updated metadata", got);
  return got.status;
});

// A background run, joined.
const run = await step("runs.create", async () => {
  const created = await client.runs.create(need(threadId, "a thread"), "lead_agent", { input: human("hello background") });
  check(created.run_id && created.thread_id === threadId, "a run record on the thread", created);
  check(["pending", "running", "success"].includes(created.status), "a live status", created);
  check(created.assistant_id === "lead_agent", "its assistant", created);
  return created;
});
const runId = run?.run_id;

await step("runs.join", async () => {
  const values = await client.runs.join(threadId, need(runId, "a run"));
  const text = lastAiText(values);
  check(text?.includes("hello background"), "the answer in the joined values", values);
  return text;
});

await step("runs.get", async () => {
  const got = await client.runs.get(threadId, need(runId, "a run"));
  check(got.status === "success", "status success", got);
  return got.status;
});

// A streamed run with a tool step.
await step("runs.stream", async () => {
  const events = [];
  for await (const part of client.runs.stream(need(threadId, "a thread"), "lead_agent", {
    input: human("please use a tool"),
    streamMode: MODES,
    context: { is_plan_mode: true },
  })) {
    events.push([part.event, part.data]);
  }
  const names = events.map(([name]) => name);
  check(names[0] === "metadata", "metadata first", names);
  check(events[0][1]?.run_id, "run_id in metadata", events[0][1]);
  for (const mode of ["values", "messages", "updates", "custom"]) {
    check(names.includes(mode), `a ${mode} event`, [...new Set(names)]);
  }
  check(!names.some((n) => n.startsWith("messages/")), "no messages/* events in messages-tuple mode", names);
  const pieces = {};
  for (const [name, data] of events) {
    if (name === "messages") {
      check(Array.isArray(data) && data.length === 2, "a [chunk, metadata] pair", data);
      const [chunk, metadata] = data;
      check(metadata && typeof metadata === "object", "metadata object", data);
      check(["AIMessageChunk", "ai", "tool"].includes(chunk.type), "a message chunk type", chunk);
      check(chunk.id, "a message id", chunk);
      if (chunk.type !== "tool" && typeof chunk.content === "string") {
        pieces[chunk.id] = (pieces[chunk.id] ?? "") + chunk.content;
      }
    } else if (name === "updates") {
      check(data && typeof data === "object" && Object.keys(data).length > 0, "updates keyed by node", data);
    } else if (name === "custom") {
      check(data && typeof data === "object" && data.type, "a typed custom event", data);
    }
  }
  const customs = events.filter(([name]) => name === "custom").map(([, data]) => data.type);
  check(customs.includes("todos_updated"), "the plan as a custom event", customs);
  check(Object.values(pieces).includes("Wrote the file."), "the answer's chunks joined by message id", pieces);
  const finals = events.filter(([name]) => name === "values").map(([, data]) => data);
  const final = finals[finals.length - 1];
  const types = (final.messages ?? []).map((m) => m.type);
  check(JSON.stringify(types.slice(-5)) === JSON.stringify(["ai", "tool", "ai", "tool", "ai"]), "both tool steps and the answer in the final values", types);
  check(lastAiText(final) === "Wrote the file.", "the final answer", final);
  return [...new Set(names)].sort();
});

await step("runs.wait", async () => {
  const values = await client.runs.wait(need(threadId, "a thread"), "lead_agent", { input: human("wait for me") });
  const text = lastAiText(values);
  check(text?.includes("wait for me"), "the answer in the values", values);
  return text;
});

await step("runs.list", async () => {
  const runs = await client.runs.list(need(threadId, "a thread"), { limit: 10, offset: 0 });
  check(runs.length >= 3, "three runs or more", runs);
  check(runs.some((r) => r.run_id === runId), "the background run listed", runs);
  check(runs.every((r) => r.status === "success"), "all succeeded", runs.map((r) => r.status));
  return runs.map((r) => r.status);
});

await step("threads.getState + getHistory", async () => {
  const state = await client.threads.getState(need(threadId, "a thread"));
  for (const key of ["values", "next", "tasks", "checkpoint", "metadata", "created_at"]) {
    check(key in state, `state field ${key}`, state);
  }
  check(Array.isArray(state.next) && state.next.length === 0, "nothing next on an idle thread", state.next);
  check(state.checkpoint?.checkpoint_id, "a checkpoint id", state.checkpoint);
  check(lastAiText(state.values)?.includes("wait for me"), "latest answer", state.values);
  const history = await client.threads.getHistory(threadId, { limit: 3 });
  check(history.length >= 1 && history.length <= 3, "one to three checkpoints", history);
  check(history[0].checkpoint.checkpoint_id === state.checkpoint.checkpoint_id, "newest first", history[0]);
  return { next: state.next, history: history.length };
});

// A follow-up from the latest checkpoint, as `useStream` (DeerFlow's UI) sends it; an
// earlier one is refused with 422 naming the field.
await step("runs.wait(checkpoint)", async () => {
  const state = await client.threads.getState(need(threadId, "a thread"));
  const values = await client.runs.wait(threadId, "lead_agent", { input: human("from the checkpoint"), checkpoint: state.checkpoint });
  check(lastAiText(values)?.includes("from the checkpoint"), "the answer", values);
  try {
    await client.runs.wait(threadId, "lead_agent", { input: human("too old"), checkpoint: state.checkpoint });
  } catch (error) {
    check(error?.status === 422 && String(error?.text).includes("checkpoint"), "422 naming the field", error?.message);
    return 422;
  }
  throw new Error("a run from an earlier checkpoint was accepted");
});

await step("runs.cancel", async () => {
  const slow = await client.runs.create(need(threadId, "a thread"), "lead_agent", { input: human("be slow") });
  const deadline = Date.now() + 20000;
  for (;;) {
    const got = await client.runs.get(threadId, slow.run_id);
    if (got.status === "running") break;
    check(Date.now() < deadline && got.status === "pending", "the run running within 20 s", got);
    await sleep(50);
  }
  await client.runs.cancel(threadId, slow.run_id, true);
  const got = await client.runs.get(threadId, slow.run_id);
  check(got.status === "interrupted", "status interrupted after cancel", got);
  const now = await client.threads.get(threadId);
  check(now.status !== "busy", "thread no longer busy", now);
  return got.status;
});

// Stateless runs.
await step("runs.wait(threadId=null)", async () => {
  const values = await client.runs.wait(null, "lead_agent", { input: human("stateless hello") });
  const text = lastAiText(values);
  check(text?.includes("stateless hello"), "the answer", values);
  return text;
});

await step("runs.stream(threadId=null)", async () => {
  const names = [];
  let final = null;
  for await (const part of client.runs.stream(null, "lead_agent", { input: human("stateless stream"), streamMode: "values" })) {
    names.push(part.event);
    if (part.event === "values") final = part.data;
  }
  check(names.includes("values"), "values events", names);
  check(lastAiText(final)?.includes("stateless stream"), "the answer", final);
  return names[names.length - 1];
});

// A clarification leaves the thread interrupted; a follow-up resumes it.
await step("clarification (interrupted, then resumed)", async () => {
  const asked = await client.threads.create({ metadata: { sdk: TAG, topic: "clarification" } });
  await client.runs.wait(asked.thread_id, "lead_agent", { input: human("ask me which format") });
  let got = await client.threads.get(asked.thread_id);
  check(got.status === "interrupted", "thread interrupted by the question", got);
  const state = await client.threads.getState(asked.thread_id);
  const values = await client.runs.wait(asked.thread_id, "lead_agent", { input: human("PDF please") });
  check(lastAiText(values)?.includes("PDF please"), "the follow-up answered", values);
  got = await client.threads.get(asked.thread_id);
  check(got.status === "idle", "idle after the follow-up", got);
  return { interruptedNext: state.next, after: got.status };
});

// A custom agent as assistantId.
await step("runs.wait(assistantId=custom agent)", async () => {
  const own = await client.threads.create({ metadata: { sdk: TAG, topic: "agent" } });
  const values = await client.runs.wait(own.thread_id, AGENT, { input: human("who are you") });
  const text = lastAiText(values);
  check(text === "I am the scenario agent.", "the custom agent's answer", values);
  const runs = await client.runs.list(own.thread_id);
  check(runs[0]?.assistant_id === AGENT, "the run names the agent", runs);
  return text;
});

await step("other base", async () => {
  const lead = await other.assistants.get("lead_agent");
  const got = await other.threads.get(need(threadId, "a thread"));
  const runs = await other.runs.list(threadId);
  check(lead.assistant_id === "lead_agent" && got.thread_id === threadId && runs.length > 0, "same answers", [lead, got, runs]);
  return OTHER_BASE;
});

await step("threads.delete", async () => {
  const gone = need(namedId, "the named thread");
  await client.threads.delete(gone);
  try {
    await client.threads.get(gone);
  } catch (error) {
    check(error?.status === 404, "404 after delete", error?.message);
    return 404;
  }
  throw new Error("the deleted thread is still there");
});

console.log(`SUMMARY js: ${failures.length} failed: ${JSON.stringify(failures)}`);
process.exit(failures.length ? 1 : 0);
