"""Three agents in a chain (issue 34, item 4): A calls B calls C, each a real a2a-sdk agent behind its own
proxy (``inject_traceparent`` and ``continue_traceparent``), all recording into one SQLite log; each agent
forwards the ``traceparent`` it received. The export is one trace per run with the right parent for each
hop, and ``tasks --json`` names each task's parent and children; with and without the first client
sending ``traceparent``. Rounds: ``A2A_TAPE_CHAIN_ROUNDS`` (5 by default)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator

import httpx
import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, Part, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

from a2a_tape.capture.lineage import TRACE_EXTENSION
from tests.otel.test_export_otlp import _spans_of
from tests.recorder.cli.conftest import run_cli
from tests.recorder.proxy.conftest import SettleWatch, read_sse, running_proxy, send_body
from tests.support.servers import closed_port, serve_app

ROUNDS = int(os.environ.get("A2A_TAPE_CHAIN_ROUNDS", "5"))
CLIENT_TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Hop(AgentExecutor):
    """Calls the next agent (when there is one), then completes. ``passes``: what it passes on: the
    ``traceparent`` header it received (``trace``), the trace context its message's metadata carried, in
    its own message's metadata (``metadata``: A2A#2026), nothing (``nothing``: a fresh message), its own
    contextId (``context``) or its own task id as ``referenceTaskIds`` (``reference``)."""

    def __init__(self, passes: str = "trace") -> None:
        self.next_url: str | None = None
        self.passes = passes

    async def execute(self, ctx: RequestContext, q: EventQueue) -> None:
        await q.enqueue_event(
            Task(id=ctx.task_id, context_id=ctx.context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
        )
        up = TaskUpdater(q, ctx.task_id, ctx.context_id)
        await up.start_work()
        if self.next_url is not None:
            received = (ctx.call_context.state.get("headers") or {}) if ctx.call_context else {}
            body, headers = send_body("hop", dialect="1.0")
            if "traceparent" in received and self.passes == "trace":
                headers["traceparent"] = received["traceparent"]
            if self.passes in ("context", "reference", "metadata"):
                doc = json.loads(body)
                if self.passes == "metadata":
                    got = MessageToDict(ctx.message.metadata) if ctx.message is not None else {}
                    doc["params"]["message"]["metadata"] = {TRACE_EXTENSION: got[TRACE_EXTENSION]}
                elif self.passes == "context":
                    doc["params"]["message"]["contextId"] = ctx.context_id
                else:
                    doc["params"]["message"]["referenceTaskIds"] = [ctx.task_id]
                body = json.dumps(doc).encode()
            async with httpx.AsyncClient(timeout=30) as http:
                async with http.stream("POST", self.next_url + "/", content=body, headers=headers) as r:
                    async for _ in r.aiter_bytes():
                        pass
        await up.add_artifact([Part(text="done")], artifact_id="a", last_chunk=True)
        await up.complete()

    async def cancel(self, ctx: RequestContext, q: EventQueue) -> None:
        await TaskUpdater(q, ctx.task_id, ctx.context_id).cancel()


@contextlib.contextmanager
def _agent(next_url: str | None, passes: str = "trace") -> Iterator[str]:
    port = closed_port()  # nothing listens there; bound later by the server
    url = f"http://127.0.0.1:{port}"
    hop = Hop(passes)
    hop.next_url = next_url
    card = AgentCard(
        name="hop",
        description="calls the next hop",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url + "/")],
    )
    handler = DefaultRequestHandler(agent_executor=hop, task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/"))
    with serve_app(app, port=port) as served:
        yield served


@pytest.mark.parametrize("client_tp", [None, CLIENT_TP], ids=["client-sent-none", "client-sent-one"])
def test_three_hops_export_one_trace_with_each_parent(db_path, client_tp):
    _chain(db_path, "trace", ROUNDS, client_header=client_tp, inject_traceparent=True, continue_traceparent=True)
    assert_one_tree(str(db_path), ROUNDS, client_tp)


def assert_one_tree(db: str, rounds: int, client_tp: str | None) -> None:
    """The export of a chain recorded with trace context: one trace per run (one for all when the client
    sent one), each hop's span under the previous; ``tasks --json`` agrees (parent, children)."""
    spans = [s for s in _spans_of(db) if s["name"] == "SendStreamingMessage"]
    assert len(spans) == 3 * rounds
    by_id = {s["spanId"]: s for s in spans}
    roots = [s for s in spans if s.get("parentSpanId") not in by_id]
    assert len(roots) == rounds  # hop A of each run
    for root in roots:
        chain = [root]
        while kids := [s for s in spans if s.get("parentSpanId") == chain[-1]["spanId"]]:
            (kid,) = kids  # one child per hop: B under A, C under B
            chain.append(kid)
        assert len(chain) == 3 and {s["traceId"] for s in chain} == {root["traceId"]}
        assert len({s["attrs"]["server.port"] for s in chain}) == 3  # three agents, one hop each
        if client_tp:
            assert root["traceId"] == client_tp[3:35] and root["parentSpanId"] == client_tp[36:52]
        else:
            assert "parentSpanId" not in root
    assert len({s["traceId"] for s in roots}) == (1 if client_tp else rounds)
    rows = {r["task_id"]: r for r in json.loads(run_cli("tasks", "--json", "--db", db).stdout)}
    task_of = {s["spanId"]: s["attrs"]["a2a.task.id"] for s in spans}
    for s in spans:
        parent = task_of.get(s.get("parentSpanId", ""))
        row = rows[s["attrs"]["a2a.task.id"]]
        assert row.get("parent") == parent
        if parent is not None:
            assert row["task_id"] in rows[parent]["children"]


def _chain(
    db_path, passes: str, rounds: int, first_metadata: str | None = None, client_header: str | None = None, **opts
) -> None:
    """Three hops (each agent behind its own proxy, one log), ``rounds`` runs one after another; the first
    client's message carries ``first_metadata`` as its metadata's traceparent (A2A#2026) when given, every
    client's request ``client_header`` as its traceparent header."""
    with contextlib.ExitStack() as stack:
        proxies = []
        next_url = None
        for _ in range(3):
            agent = stack.enter_context(_agent(next_url, passes))
            proxy = stack.enter_context(running_proxy(agent, db_path, **opts))
            proxies.insert(0, proxy)
            next_url = proxy.url
        watches = [SettleWatch(p.proxy) for p in proxies]
        for n in range(rounds):
            body, headers = send_body("start", dialect="1.0")
            if client_header:
                headers["traceparent"] = client_header
            if first_metadata:
                doc = json.loads(body)
                doc["params"]["message"]["metadata"] = {TRACE_EXTENSION: {"traceparent": first_metadata}}
                body = json.dumps(doc).encode()
            with httpx.stream("POST", proxies[0].url + "/", content=body, headers=headers, timeout=30) as r:
                read_sse(r)
            # runs one after another, as the test means: the next starts once every hop's row of this one is
            # ended (the client has its answer before the inner proxies stamp their rows' ends; under load
            # that lag let a run begin while the last one's rows were still open, and timing joined them)
            _wait_ended(db_path, 3 * (n + 1))
        for w in watches:
            w.wait(rounds)


def _wait_ended(db_path, sends: int, timeout: float = 30.0) -> None:
    """Until the log holds ``sends`` ended SendStreamingMessage rows (a condition polled, with a timeout)."""
    from a2a_tape import store

    deadline = time.monotonic() + timeout
    while True:
        st = store.open_for_reading(str(db_path))
        try:
            ended = [e for e in st.exchanges() if e.rpc_method == "SendStreamingMessage" and e.ended_at is not None]
        finally:
            st.close()
        if len(ended) >= sends:
            return
        assert time.monotonic() < deadline, f"{len(ended)} of {sends} streamed sends ended in {timeout:g} s"
        time.sleep(0.02)  # polling the condition above, not a wait for something to happen


def _link_attrs(span: dict) -> list[dict]:
    from tests.support.otlp_receiver import attributes

    return [attributes(link.get("attributes", [])) for link in span.get("links", [])]


def assert_joined_by_inference(db: str, rounds: int, basis: str) -> None:
    """The export of a chain recorded without trace context: one trace per run, B's span under A's, C's
    under B's, each child's span linked to its caller's with the link marked inferred (``basis``); and
    ``tasks --json`` names each task's parent (marked inferred) and children."""
    spans = [s for s in _spans_of(db) if s["name"] == "SendStreamingMessage"]
    assert len(spans) == 3 * rounds
    by_id = {s["spanId"]: s for s in spans}
    roots = [s for s in spans if s.get("parentSpanId") not in by_id]
    assert len(roots) == rounds and all("parentSpanId" not in r and not r.get("links") for r in roots)
    for root in roots:
        chain = [root]
        while kids := [s for s in spans if s.get("parentSpanId") == chain[-1]["spanId"]]:
            (kid,) = kids
            chain.append(kid)
        assert len(chain) == 3 and {s["traceId"] for s in chain} == {root["traceId"]}
        assert len({s["attrs"]["server.port"] for s in chain}) == 3
        for up, kid in zip(chain, chain[1:]):
            assert kid["attrs"]["a2a_tape.trace_context.source"] == "inferred"
            (link,) = kid["links"]
            assert (link["traceId"], link["spanId"]) == (up["traceId"], up["spanId"])
            (attrs,) = _link_attrs(kid)
            assert attrs["a2a_tape.link.inferred"] is True and attrs["a2a_tape.link.basis"] == basis
            assert attrs["a2a_tape.link.task.id"] == up["attrs"]["a2a.task.id"]
    assert len({s["traceId"] for s in roots}) == rounds  # runs never join each other
    rows = {r["task_id"]: r for r in json.loads(run_cli("tasks", "--json", "--db", db).stdout)}
    # a page of the listing infers from the exchanges open while its tasks were: the same answer
    for n in (1, 2, 3 * rounds):
        page = json.loads(run_cli("tasks", "--json", "--limit", str(n), "--db", db).stdout)
        assert [{k: r.get(k) for k in ("task_id", "parent", "children", "parent_inferred")} for r in page] == [
            {k: rows[r["task_id"]].get(k) for k in ("task_id", "parent", "children", "parent_inferred")} for r in page
        ]
    task_of = {s["spanId"]: s["attrs"]["a2a.task.id"] for s in spans}
    for s in spans:
        parent = task_of.get(s.get("parentSpanId", ""))
        row = rows[s["attrs"]["a2a.task.id"]]
        assert row.get("parent") == parent
        assert row.get("parent_inferred") == (basis if parent else None)
        if parent is not None:
            assert row["task_id"] in rows[parent]["children"]


@pytest.mark.parametrize(
    ("passes", "basis"),
    [("nothing", "timing"), ("context", "context_id"), ("reference", "reference_task_ids")],
)
def test_three_hops_without_trace_context_join_by_what_the_log_knows(db_path, passes, basis):
    """No agent passes a traceparent and no proxy injects one: each hop would be a trace of its own. The
    log joins them (capture/lineage.py): a hop's request came while the caller's exchange was open at
    another agent, on the same host (timing), or its message names the caller's context or task."""
    _chain(db_path, passes, ROUNDS)
    assert_joined_by_inference(str(db_path), ROUNDS, basis)


@pytest.mark.parametrize("client_tp", [None, CLIENT_TP], ids=["client-sent-none", "client-sent-one-in-metadata"])
def test_three_hops_passing_trace_context_in_message_metadata(db_path, client_tp):
    """The agents pass trace context in their messages' metadata only (the trace-context extension of
    A2A#2026), never in a header; each proxy reads it there and writes the one it sends there
    (--inject-traceparent --continue-traceparent --traceparent-metadata): one trace per run (the client's
    when it sent one), each hop's span under the previous, by trace context (nothing inferred)."""
    opts = {"inject_traceparent": True, "continue_traceparent": True, "traceparent_metadata": True}
    _chain(db_path, "metadata", ROUNDS, first_metadata=client_tp, **opts)
    spans = [s for s in _spans_of(str(db_path)) if s["name"] == "SendStreamingMessage"]
    assert len(spans) == 3 * ROUNDS
    by_id = {s["spanId"]: s for s in spans}
    roots = [s for s in spans if s.get("parentSpanId") not in by_id]
    assert len(roots) == ROUNDS
    for root in roots:
        chain = [root]
        while kids := [s for s in spans if s.get("parentSpanId") == chain[-1]["spanId"]]:
            (kid,) = kids
            chain.append(kid)
        assert len(chain) == 3 and {s["traceId"] for s in chain} == {root["traceId"]}
        assert [s["attrs"]["a2a_tape.trace_context.source"] for s in chain] == [
            "continued" if client_tp else "injected",
            "continued",
            "continued",
        ]
        assert not any(s.get("links") for s in chain)
        if client_tp:
            assert root["traceId"] == client_tp[3:35] and root["parentSpanId"] == client_tp[36:52]
    assert len({s["traceId"] for s in roots}) == (1 if client_tp else ROUNDS)
    rows = json.loads(run_cli("tasks", "--json", "--db", str(db_path)).stdout)
    kids = [r for r in rows if r.get("parent")]
    assert len(kids) == 2 * ROUNDS and not any(r.get("parent_inferred") for r in kids)
    assert all(t.get("metadata") for r in kids for t in r["trace_context"])  # read from the message's metadata


def test_traceparent_metadata_needs_a_proxy_that_sends_one(db_path):
    r = run_cli("proxy", "http://127.0.0.1:9", "--traceparent-metadata", "--db", str(db_path))
    assert r.code == 2 and "--inject-traceparent or --continue-traceparent" in r.stderr


def _cli_chain(db: str, passes: str, rounds: int, flags: str, tmp_path) -> None:
    """The chain with each proxy the installed ``a2a-tape proxy`` in a process of its own, all recording
    into ``db``; stopping the proxies (each finishes its writes first) is the end of the recording."""
    from tests.docs.harness import BIN, Background, reader_env

    env = reader_env(tmp_path)
    with contextlib.ExitStack() as stack:
        first = None
        next_url = None
        for _ in range(3):  # C first: each agent calls the proxy in front of the next one
            agent = stack.enter_context(_agent(next_url, passes))
            proxy = Background(
                f"{BIN / 'a2a-tape'} proxy {agent} --listen 127.0.0.1:0 --db '{db}' --quiet {flags}",
                tmp_path,
                env,
                r"http://127\.0\.0\.1:\d+",
            )
            stack.callback(lambda p=proxy: p.stop() == 0 or pytest.fail(p.text))
            first = next_url = "http://" + proxy.text.split("http://", 1)[1].split()[0].rstrip("/")
        for n in range(rounds):
            body, headers = send_body("start", dialect="1.0")
            with httpx.stream("POST", f"{first}/", content=body, headers=headers, timeout=30) as r:
                read_sse(r)
            _wait_ended(db, 3 * (n + 1))  # one run after another (as _chain)


@pytest.mark.parametrize(
    ("passes", "flags", "basis"),
    [
        ("trace", "--inject-traceparent --continue-traceparent", None),
        ("nothing", "", "timing"),
        ("context", "", "context_id"),
    ],
    ids=["trace-context", "inferred-timing", "inferred-context"],
)
def test_three_hops_into_one_postgresql_log_give_the_same_joined_trace(pg_url, tmp_path, passes, flags, basis):
    """The chain through three installed ``a2a-tape proxy`` processes writing one shared PostgreSQL log:
    the same joined trace as into SQLite, by trace context or inferred from the log."""
    _cli_chain(pg_url, passes, ROUNDS, flags, tmp_path)
    if basis is None:
        assert_one_tree(pg_url, ROUNDS, None)
    else:
        assert_joined_by_inference(pg_url, ROUNDS, basis)
