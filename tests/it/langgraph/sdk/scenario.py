"""The SDK scenario in Python: the real `langgraph-sdk` drives a running Antler daemon.

Run by `tests/it/langgraph/sdk.rs` with PYTHONPATH set to the installed SDK. Every call is
the SDK's documented one, unpatched. Each step prints `PASS <step>: <result>` or
`FAIL <step>: <error>` with the server's answer; the script goes on where it can, so one run
shows every broken call, and exits 1 when any step failed.

Environment: ANTLER_URL (the daemon's http://host:port), ANTLER_TOKEN, ANTLER_BASE (the API
base path, `/api` or `/api/langgraph`), ANTLER_OTHER_BASE (the other one), ANTLER_AGENT (a
custom agent the test created), ANTLER_TAG (a metadata value unique to this run).
"""

import asyncio
import json
import os
import sys
import time
import traceback
import uuid

from langgraph_sdk import get_client

URL = os.environ["ANTLER_URL"]
TOKEN = os.environ["ANTLER_TOKEN"]
BASE = os.environ.get("ANTLER_BASE", "/api")
OTHER_BASE = os.environ.get("ANTLER_OTHER_BASE", "/api/langgraph")
AGENT = os.environ["ANTLER_AGENT"]
TAG = os.environ.get("ANTLER_TAG", "python")
MODES = ["values", "messages-tuple", "updates", "custom"]

failures = []


class Skip(Exception):
    """A step that cannot run because one it needs failed."""


def need(value, what):
    if value is None:
        raise Skip(f"needs {what}")
    return value


def check(condition, what, got=None):
    if not condition:
        raise AssertionError(f"{what}; got {short(got)}")


def short(value, limit=1500):
    try:
        text = json.dumps(value, default=str)
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def server_answer(error):
    """What the server said, from whichever error type the SDK raised."""
    parts = []
    response = getattr(error, "response", None)
    if response is not None:
        parts.append(f"HTTP {response.status_code} {response.request.method} {response.request.url}")
        try:
            parts.append(response.text)
        except Exception:  # a streamed body that was not read
            pass
    body = getattr(error, "body", None)
    if body is not None:
        parts.append(short(body))
    parts.extend(getattr(error, "__notes__", []))
    return " | ".join(p for p in parts if p)


async def step(name, action):
    """Runs one step; returns its value, or None when it failed or was skipped."""
    try:
        value = await action()
    except Skip as skip:
        failures.append(name)
        print(f"FAIL {name}: skipped, {skip}", flush=True)
        return None
    except Exception as error:  # every failure is reported, the script goes on
        failures.append(name)
        print(f"FAIL {name}: {type(error).__name__}: {error}", flush=True)
        answer = server_answer(error)
        if answer:
            print(f"     server answered: {answer}", flush=True)
        if isinstance(error, AssertionError):
            traceback.print_exc(limit=2, file=sys.stdout)
        return None
    print(f"PASS {name}: {short(value, 300)}", flush=True)
    return value


def human(text):
    return {"messages": [{"role": "user", "content": text}]}


def last_ai_text(values):
    messages = (values or {}).get("messages") or []
    for message in reversed(messages):
        if message.get("type") == "ai" and isinstance(message.get("content"), str) and message["content"]:
            return message["content"]
    return None


async def main():
    client = get_client(url=URL + BASE, api_key=None, headers={"Authorization": f"Bearer {TOKEN}"})
    other = get_client(url=URL + OTHER_BASE, api_key=None, headers={"Authorization": f"Bearer {TOKEN}"})

    # Assistants: the default agent and the caller's custom agent.
    async def assistants_search():
        found = await client.assistants.search(limit=50)
        ids = [a["assistant_id"] for a in found]
        check("lead_agent" in ids and AGENT in ids, f"lead_agent and {AGENT} among assistants", ids)
        for assistant in found:
            for key in ("assistant_id", "graph_id", "config", "metadata", "created_at", "updated_at"):
                check(key in assistant, f"assistant field {key}", assistant)
        return ids

    await step("assistants.search", assistants_search)

    async def assistants_get():
        lead = await client.assistants.get("lead_agent")
        check(lead["assistant_id"] == "lead_agent", "lead_agent by id", lead)
        custom = await client.assistants.get(AGENT)
        check(custom["assistant_id"] == AGENT, "custom agent by id", custom)
        check("scenario agent" in short(custom, 100000), "its description in the assistant", custom)
        return [lead["assistant_id"], custom["assistant_id"]]

    await step("assistants.get", assistants_get)

    # Threads.
    async def threads_create():
        thread = await client.threads.create(metadata={"sdk": TAG, "topic": "scenario"})
        check(thread.get("thread_id"), "a thread_id", thread)
        check(thread.get("status") == "idle", "status idle", thread)
        check((thread.get("metadata") or {}).get("sdk") == TAG, "metadata kept", thread)
        return thread

    thread = await step("threads.create", threads_create)
    thread_id = thread["thread_id"] if thread else None

    async def threads_create_named():
        wanted = str(uuid.uuid4())
        first = await client.threads.create(thread_id=wanted, metadata={"sdk": TAG, "named": True})
        again = await client.threads.create(thread_id=wanted, if_exists="do_nothing")
        check(first["thread_id"] == wanted and again["thread_id"] == wanted, "the named thread", [first, again])
        return wanted

    named_id = await step("threads.create(thread_id, if_exists)", threads_create_named)

    async def threads_update():
        updated = await client.threads.update(need(thread_id, "a thread"), metadata={"stage": "updated"})
        metadata = updated.get("metadata") or {}
        check(metadata.get("stage") == "updated" and metadata.get("sdk") == TAG, "metadata merged", updated)
        return metadata

    await step("threads.update", threads_update)

    async def threads_search():
        found = await client.threads.search(
            metadata={"sdk": TAG, "stage": "updated"},
            status="idle",
            limit=10,
            offset=0,
            sort_by="created_at",
            sort_order="desc",
        )
        ids = [t["thread_id"] for t in found]
        check(ids == [thread_id], "exactly the updated thread", ids)
        page = await client.threads.search(metadata={"sdk": TAG}, limit=1, offset=0)
        check(len(page) == 1, "limit 1 gives one thread", page)
        return ids

    await step("threads.search", threads_search)

    async def threads_get():
        got = await client.threads.get(need(thread_id, "a thread"))
        check(got["thread_id"] == thread_id, "same thread", got)
        check((got.get("metadata") or {}).get("stage") == "updated", "updated metadata", got)
        return got["status"]

    await step("threads.get", threads_get)

    # A background run, joined.
    async def runs_create():
        run = await client.runs.create(need(thread_id, "a thread"), "lead_agent", input=human("hello background"))
        check(run.get("run_id") and run.get("thread_id") == thread_id, "a run record on the thread", run)
        check(run.get("status") in ("pending", "running", "success"), "a live status", run)
        check(run.get("assistant_id") == "lead_agent", "its assistant", run)
        return run

    run = await step("runs.create", runs_create)
    run_id = run["run_id"] if run else None

    async def runs_join():
        values = await client.runs.join(thread_id, need(run_id, "a run"))
        text = last_ai_text(values)
        check(text and "hello background" in text, "the answer in the joined values", values)
        return text

    await step("runs.join", runs_join)

    async def runs_get():
        got = await client.runs.get(thread_id, need(run_id, "a run"))
        check(got["status"] == "success", "status success", got)
        return got["status"]

    await step("runs.get", runs_get)

    # A streamed run with a tool step.
    async def runs_stream():
        events = []
        async for part in client.runs.stream(
            need(thread_id, "a thread"),
            "lead_agent",
            input=human("please use a tool"),
            stream_mode=MODES,
            context={"is_plan_mode": True},
        ):
            events.append((part.event, part.data))
        names = [name for name, _ in events]
        check(names and names[0] == "metadata", "metadata first", names)
        check(events[0][1].get("run_id"), "run_id in metadata", events[0][1])
        for mode in ("values", "messages", "updates", "custom"):
            check(mode in names, f"a {mode} event", sorted(set(names)))
        check(not [n for n in names if n.startswith("messages/")], "no messages/* events in messages-tuple mode", names)
        pieces = {}
        for name, data in events:
            if name == "messages":
                check(isinstance(data, list) and len(data) == 2, "a [chunk, metadata] pair", data)
                chunk, metadata = data
                check(isinstance(metadata, dict), "metadata object", data)
                check(chunk.get("type") in ("AIMessageChunk", "ai", "tool"), "a message chunk type", chunk)
                check(chunk.get("id"), "a message id", chunk)
                if chunk.get("type") != "tool" and isinstance(chunk.get("content"), str):
                    pieces[chunk["id"]] = pieces.get(chunk["id"], "") + chunk["content"]
            elif name == "updates":
                check(isinstance(data, dict) and data, "updates keyed by node", data)
            elif name == "custom":
                check(isinstance(data, dict) and data.get("type"), "a typed custom event", data)
        customs = [data.get("type") for name, data in events if name == "custom"]
        check("todos_updated" in customs, "the plan as a custom event", customs)
        check("Wrote the file." in pieces.values(), "the answer's chunks joined by message id", pieces)
        final = [data for name, data in events if name == "values"][-1]
        types = [m.get("type") for m in final.get("messages", [])]
        check(types[-5:] == ["ai", "tool", "ai", "tool", "ai"], "both tool steps and the answer in the final values", types)
        check(last_ai_text(final) == "Wrote the file.", "the final answer", final)
        return sorted(set(names))

    await step("runs.stream", runs_stream)

    async def runs_wait():
        values = await client.runs.wait(need(thread_id, "a thread"), "lead_agent", input=human("wait for me"))
        text = last_ai_text(values)
        check(text and "wait for me" in text, "the answer in the values", values)
        return text

    await step("runs.wait", runs_wait)

    async def runs_list():
        runs = await client.runs.list(need(thread_id, "a thread"), limit=10, offset=0)
        check(len(runs) >= 3, "three runs or more", runs)
        check(run_id in [r["run_id"] for r in runs], "the background run listed", runs)
        check(all(r["status"] == "success" for r in runs), "all succeeded", [r["status"] for r in runs])
        return [r["status"] for r in runs]

    await step("runs.list", runs_list)

    async def state_and_history():
        state = await client.threads.get_state(need(thread_id, "a thread"))
        for key in ("values", "next", "tasks", "checkpoint", "metadata", "created_at"):
            check(key in state, f"state field {key}", state)
        check(state["next"] == [], "nothing next on an idle thread", state["next"])
        check(state["checkpoint"].get("checkpoint_id"), "a checkpoint id", state["checkpoint"])
        check(last_ai_text(state["values"]) and "wait for me" in last_ai_text(state["values"]), "latest answer", state["values"])
        history = await client.threads.get_history(thread_id, limit=3)
        check(1 <= len(history) <= 3, "one to three checkpoints", history)
        check(history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"], "newest first", history[0])
        return {"next": state["next"], "history": len(history)}

    await step("threads.get_state + get_history", state_and_history)

    # A follow-up from the latest checkpoint, as `useStream` (DeerFlow's UI) sends it; an
    # earlier one is refused with 422 naming the field.
    async def from_checkpoint():
        state = await client.threads.get_state(need(thread_id, "a thread"))
        values = await client.runs.wait(
            thread_id, "lead_agent", input=human("from the checkpoint"), checkpoint=state["checkpoint"]
        )
        check("from the checkpoint" in (last_ai_text(values) or ""), "the answer", values)
        try:
            await client.runs.wait(thread_id, "lead_agent", input=human("too old"), checkpoint=state["checkpoint"])
        except Exception as error:
            response = getattr(error, "response", None)
            check(response is not None and response.status_code == 422, "422 for an earlier checkpoint", server_answer(error))
            check("checkpoint" in response.text, "the field named", response.text)
            return 422
        raise AssertionError("a run from an earlier checkpoint was accepted")

    await step("runs.wait(checkpoint)", from_checkpoint)

    # Cancel a slow run.
    async def runs_cancel():
        slow = await client.runs.create(need(thread_id, "a thread"), "lead_agent", input=human("be slow"))
        deadline = time.monotonic() + 20
        while True:
            got = await client.runs.get(thread_id, slow["run_id"])
            if got["status"] == "running":
                break
            check(time.monotonic() < deadline and got["status"] == "pending", "the run running within 20 s", got)
            await asyncio.sleep(0.05)
        await client.runs.cancel(thread_id, slow["run_id"], wait=True)
        got = await client.runs.get(thread_id, slow["run_id"])
        check(got["status"] == "interrupted", "status interrupted after cancel", got)
        thread_now = await client.threads.get(thread_id)
        check(thread_now["status"] != "busy", "thread no longer busy", thread_now)
        return got["status"]

    await step("runs.cancel", runs_cancel)

    # Stateless runs.
    async def stateless_wait():
        values = await client.runs.wait(None, "lead_agent", input=human("stateless hello"))
        text = last_ai_text(values)
        check(text and "stateless hello" in text, "the answer", values)
        return text

    await step("runs.wait(thread_id=None)", stateless_wait)

    async def stateless_stream():
        names = []
        async for part in client.runs.stream(None, "lead_agent", input=human("stateless stream"), stream_mode="values"):
            names.append(part.event)
            if part.event == "values":
                final = part.data
        check("values" in names, "values events", names)
        check("stateless stream" in (last_ai_text(final) or ""), "the answer", final)
        return names[-1]

    await step("runs.stream(thread_id=None)", stateless_stream)

    # A clarification leaves the thread interrupted; a follow-up resumes it.
    async def clarification():
        asked = await client.threads.create(metadata={"sdk": TAG, "topic": "clarification"})
        await client.runs.wait(asked["thread_id"], "lead_agent", input=human("ask me which format"))
        got = await client.threads.get(asked["thread_id"])
        check(got["status"] == "interrupted", "thread interrupted by the question", got)
        state = await client.threads.get_state(asked["thread_id"])
        values = await client.runs.wait(asked["thread_id"], "lead_agent", input=human("PDF please"))
        check("PDF please" in (last_ai_text(values) or ""), "the follow-up answered", values)
        got = await client.threads.get(asked["thread_id"])
        check(got["status"] == "idle", "idle after the follow-up", got)
        return {"interrupted_next": state.get("next"), "after": got["status"]}

    await step("clarification (interrupted, then resumed)", clarification)

    # A custom agent as assistant_id.
    async def custom_agent():
        own = await client.threads.create(metadata={"sdk": TAG, "topic": "agent"})
        values = await client.runs.wait(own["thread_id"], AGENT, input=human("who are you"))
        text = last_ai_text(values)
        check(text == "I am the scenario agent.", "the custom agent's answer", values)
        runs = await client.runs.list(own["thread_id"])
        check(runs and runs[0]["assistant_id"] == AGENT, "the run names the agent", runs)
        return text

    await step("runs.wait(assistant_id=custom agent)", custom_agent)

    # The other base serves the same API.
    async def other_base():
        lead = await other.assistants.get("lead_agent")
        got = await other.threads.get(need(thread_id, "a thread"))
        runs = await other.runs.list(thread_id)
        check(lead["assistant_id"] == "lead_agent" and got["thread_id"] == thread_id and runs, "same answers", [lead, got, runs])
        return OTHER_BASE

    await step("other base", other_base)

    async def threads_delete():
        gone = need(named_id, "the named thread")
        await client.threads.delete(gone)
        try:
            await client.threads.get(gone)
        except Exception as error:
            response = getattr(error, "response", None)
            check(response is not None and response.status_code == 404, "404 after delete", server_answer(error))
            return 404
        raise AssertionError("the deleted thread is still there")

    await step("threads.delete", threads_delete)

    await client.aclose()
    await other.aclose()
    print(f"SUMMARY python: {len(failures)} failed: {failures}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
