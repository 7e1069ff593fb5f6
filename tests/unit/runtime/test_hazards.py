"""The hazard checker: every unordered conflicting pair, and nothing else.

The property tests run random programs of streams, events and kernels: with every
needed event the results equal a one-stream run and the checker is silent; with one
event dropped, the pairs it reports are exactly the conflicting pairs that no chain of
events orders any more (a reachability oracle written independently of the checker).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphexec as gx
from graphexec.plan.tasks import TaskKind
from graphexec import acl

N = 16                    # floats per buffer
ROOT = Path(__file__).resolve().parents[3]


def _buffers(n: int) -> list[int]:
    ptrs = []
    for k in range(n):
        ptrs.append(acl.malloc(4 * N))
        acl.memcpy(ptrs[-1], 4 * N, np.arange(N, dtype=np.float32) + k, 4 * N, acl.MEMCPY_HOST_TO_DEVICE)
    return ptrs


def _kernel(i: int, ins: list[int], out: int):
    def run() -> None:
        acc = sum((acl.view(p, np.float32, (N,)) for p in ins), np.zeros(N, np.float32))
        acl.view(out, np.float32, (N,))[...] = acc * 0.5 + (i + 1)
    run.__name__ = f"k{i}"
    return run


def _conflict(a: tuple, b: tuple) -> bool:
    (_, ra, wa, _), (_, rb, wb, _) = a, b
    return wa in rb or wa == wb or wb in ra


def _plan(kernels: list[tuple]) -> list[tuple]:
    """Kernels in order, each preceded by a record/wait pair from every other stream that
    ran a conflicting kernel before it: all the events the program needs."""
    ops = []
    for j, kj in enumerate(kernels):
        for t in sorted({kernels[i][0] for i in range(j) if kernels[i][0] != kj[0] and _conflict(kernels[i], kj)}):
            ops.append(("sync", t, kj[0]))
        ops.append(("kernel", j))
    return ops


def _run(kernels: list[tuple], n_streams: int, n_buf: int, ops: list[tuple]) -> tuple:
    acl.init(check_hazards=True)
    acl.set_device(0)
    bufs = _buffers(n_buf)
    streams = [acl.create_stream() for _ in range(n_streams)]
    for op in ops:
        if op[0] == "sync":
            ev = acl.create_event()
            acl.record_event(ev, streams[op[1]])
            acl.stream_wait_event(streams[op[2]], ev)
        else:
            s, reads, write, work = kernels[op[1]]
            ins = [bufs[r] for r in reads]
            acl.launch_kernel(_kernel(op[1], ins, bufs[write]), 4, streams[s], flops=work * 1e7,
                              reads=[(p, 4 * N, f"b{r}") for p, r in zip(ins, reads)],
                              writes=[(bufs[write], 4 * N, f"b{write}")])
    acl.synchronize_device()
    out = [acl.view(p, np.float32, (N,)).copy() for p in bufs]
    pairs = {(h.first.name, h.second.name) for h in acl.hazards()}
    acl.finalize()
    return out, pairs


def _unordered(kernels: list[tuple], ops: list[tuple]) -> set[tuple[str, str]]:
    """Oracle: conflicting kernel pairs on different streams with no path between them."""
    last: dict[int, int] = {}
    edges: dict[int, set[int]] = {}
    node_of_kernel, n = {}, 0

    def add(stream: int) -> int:
        nonlocal n
        edges[n] = set()
        if stream in last:
            edges[last[stream]].add(n)
        last[stream] = n
        n += 1
        return n - 1

    for op in ops:
        if op[0] == "sync":
            rec, wait = add(op[1]), add(op[2])
            edges[rec].add(wait)
        else:
            node_of_kernel[op[1]] = add(kernels[op[1]][0])

    def reaches(a: int, b: int) -> bool:
        todo, seen = [a], {a}
        while todo:
            for m in edges[todo.pop()]:
                if m == b:
                    return True
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return False

    return {(f"k{i}", f"k{j}") for j in range(len(kernels)) for i in range(j)
            if kernels[i][0] != kernels[j][0] and _conflict(kernels[i], kernels[j])
            and not reaches(node_of_kernel[i], node_of_kernel[j])}


@st.composite
def programs(draw):
    n_streams, n_buf = draw(st.integers(2, 4)), draw(st.integers(2, 5))
    kernel = st.tuples(st.integers(0, n_streams - 1), st.lists(st.integers(0, n_buf - 1), max_size=2, unique=True),
                       st.integers(0, n_buf - 1), st.integers(1, 40))
    return n_streams, n_buf, draw(st.lists(kernel, min_size=2, max_size=9))


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(programs())
def test_with_every_needed_event_results_match_one_stream_and_no_hazard(fresh, program):
    n_streams, n_buf, kernels = program
    out, pairs = _run(kernels, n_streams, n_buf, _plan(kernels))
    one_stream = [(0, *k[1:]) for k in kernels]
    expected, none = _run(one_stream, 1, n_buf, _plan(one_stream))
    assert pairs == set() and none == set()
    for a, b in zip(out, expected):
        np.testing.assert_array_equal(a, b)


@SETTINGS
@given(programs(), st.data())
def test_with_one_event_dropped_the_checker_reports_that_very_pair(fresh, program, data):
    n_streams, n_buf, kernels = program
    ops = _plan(kernels)
    syncs = [i for i, op in enumerate(ops) if op[0] == "sync"]
    if not syncs:
        return
    drop = data.draw(st.sampled_from(syncs))
    kept = ops[:drop] + ops[drop + 1:]
    _, pairs = _run(kernels, n_streams, n_buf, kept)
    unordered = _unordered(kernels, kept)
    assert pairs == unordered
    # "that very pair": the dropped wait's producer and consumer, unless another chain still orders them
    j = next(op[1] for op in ops[drop:] if op[0] == "kernel")
    i = max(i for i in range(j) if kernels[i][0] == ops[drop][1] and _conflict(kernels[i], kernels[j]))
    assert ((f"k{i}", f"k{j}") in pairs) == ((f"k{i}", f"k{j}") in unordered)


def test_kinds_streams_tensor_range_and_interval(rt):
    a, b = acl.malloc(64), acl.malloc(64)
    s1, s2 = acl.create_stream(), acl.create_stream()
    acl.launch_kernel(lambda: None, 1, s1, flops=1e8, writes=[(a, 64, "x")], reads=[(b, 32, "y")], name="w")
    acl.launch_kernel(lambda: None, 1, s2, reads=[(a + 16, 8, "x")], writes=[(b + 16, 32, "y")], name="r")
    acl.launch_kernel(lambda: None, 1, s2, writes=[(a + 60, 4, "x")], name="w2")
    acl.synchronize_device()
    found = {(h.kind, h.first.name, h.second.name, h.tensor, h.lo - a if h.tensor == "x" else h.lo - b,
              h.hi - h.lo) for h in acl.hazards()}
    assert found == {("RAW", "w", "r", "x", 16, 8), ("WAR", "w", "r", "y", 16, 16), ("WAW", "w", "w2", "x", 60, 4)}
    h = acl.hazards()[0]
    assert h.streams == (s1.id, s2.id) and "not ordered" in str(h)
    d = h.to_dict()
    assert d["first_interval"][0] < d["second_interval"][1] and d["bytes"] == [h.lo, h.hi]


def test_orders_through_a_chain_of_streams_and_host_syncs(rt):
    a = acl.malloc(64)
    s1, s2, s3 = acl.create_stream(), acl.create_stream(), acl.create_stream()
    e1, e2 = acl.create_event(), acl.create_event()
    acl.launch_kernel(lambda: None, 1, s1, writes=[a], name="produce")
    acl.record_event(e1, s1)
    acl.stream_wait_event(s2, e1)
    acl.record_event(e2, s2)
    acl.stream_wait_event(s3, e2)                       # s1 -> s2 -> s3, never s1 -> s3 directly
    acl.launch_kernel(lambda: None, 1, s3, reads=[a], name="consume")
    acl.launch_kernel(lambda: None, 1, s1, writes=[a], name="again")   # races with consume
    acl.synchronize_stream(s3)
    acl.synchronize_stream(s1)
    acl.launch_kernel(lambda: None, 1, s2, reads=[a], name="after sync")   # the host ordered it
    h = np.zeros(16, np.float32)
    acl.memcpy(h, 64, a, 64, acl.MEMCPY_DEVICE_TO_HOST)                   # races with "after sync"
    acl.synchronize_device()
    assert {(x.kind, x.first.name, x.second.name) for x in acl.hazards()} == {
        ("WAR", "consume", "again")}
    acl.memcpy(a, 64, h, 64, acl.MEMCPY_HOST_TO_DEVICE)
    acl.launch_kernel(lambda: None, 1, s1, reads=[a], name="late")
    acl.launch_kernel(lambda: None, 1, s2, writes=[a], name="late write")
    acl.memcpy(h, 64, a, 64, acl.MEMCPY_DEVICE_TO_HOST)
    kinds = {(x.kind, x.first.name, x.second.name) for x in acl.hazards()}
    assert ("WAR", "late", "late write") in kinds and ("RAW", "late write", "memcpy d2h") in kinds


def test_checker_off_by_default(fresh):
    acl.init()
    acl.set_device(0)
    a = acl.malloc(64)
    acl.launch_kernel(lambda: None, 1, acl.create_stream(), writes=[a])
    acl.launch_kernel(lambda: None, 1, acl.create_stream(), writes=[a])
    acl.synchronize_device()
    assert acl.hazards() == [] and acl.emulated_device().checker is None


# ---- the engine -----------------------------------------------------------------------
def _inception():
    graph = gx.load(ROOT / "models" / "inception_block.onnx")
    x = np.random.default_rng(0).standard_normal((1, 192, 28, 28)).astype(np.float32)
    return graph, {graph.inputs[0]: x}


@pytest.mark.parametrize("streams", [1, 2, 4])
def test_session_schedules_are_hazard_free(streams):
    graph, feeds = _inception()
    result = gx.Session(graph, streams=streams, check_hazards=True).run(feeds)
    assert result.stats.extra["hazards"] == []


def test_session_reports_a_dropped_wait():
    graph, feeds = _inception()
    session = gx.Session(graph, streams=2, policy="list", check_hazards=True)   # branches on both streams
    compiled = session.compile(feeds)
    waits = [t for t in compiled.schedule.order if t.kind is TaskKind.EVENT_WAIT]
    assert waits, "a two-stream schedule of four branches needs events"
    compiled.schedule.order.remove(waits[0])
    hazards = compiled.run(feeds).stats.extra["hazards"]
    assert hazards and all(h["first_stream"] != h["second_stream"] for h in hazards)
    assert {"kind", "tensor", "bytes", "first", "second", "first_interval", "second_interval"} <= set(hazards[0])
