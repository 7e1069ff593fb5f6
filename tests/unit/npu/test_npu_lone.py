"""Eager mode's fast paths against GRAPHEXEC_PLAIN, bit for bit: the simulator's lone
kernel on an idle device (``sim_loop._lone``), the plan's direct call and the launch's
shortcuts give the same tasks, times, launches, core samples, allocator counters,
profiler records and values as the plain run of the same program."""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

import graphexec.npu as npu
from graphexec import _switch
from graphexec.npu._state import STATE
from graphexec.runtime import sim_loop

_FIELDS = ("name", "kind", "seq", "enqueue_t", "start_t", "ready_t", "end_t", "max_cores", "pool", "block_us",
           "block_bytes", "blocks_left", "blocks_running")


def _program(ops: int) -> list[np.ndarray]:
    """A chain of tiny ops past the command queue's depth (held launches, one lone kernel
    at a time), broken by reads, a second stream with events, a matmul of many blocks,
    a tensor ops on two tensors, host-side waits and a query."""
    x0 = np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32)
    x, w = npu.tensor(x0), npu.tensor(x0.T.copy())
    seen = []
    for i in range(ops):
        x = x * 0.999 if i % 2 else x + 0.5
        if i % 700 == 350:
            seen.append(x.numpy())
        if i % 900 == 450:
            y = npu.matmul(npu.ones(256, 256), npu.ones(256, 256))   # blocks in waves
            side = npu.Stream(stream_id=1)
            ev = npu.Event()
            with npu.stream(side):
                z = (w * 2.0).relu() - x
                ev.record()
            npu.current_stream().wait_event(ev)
            x = x + z + y[:16, :16]
            ev.query()
    seen.append(x.numpy())
    npu.synchronize()
    return seen


def _observe(ops: int, memory: bool = True) -> tuple:
    npu.init()
    with npu.profiler.profile(profile_memory=memory, schedule=npu.profiler.schedule(wait=0, warmup=0, active=1),
                              on_trace_ready=lambda p: None) as prof:
        values = _program(ops)
        prof.step()
    taken = prof._saved   # what the saved step recorded (``_prof_steps.Taken``)
    runs, samples = taken.runs, (taken.memory, taken.blocks)
    card = STATE.card()
    dev = card.device
    tasks = [tuple(getattr(t, f) for f in _FIELDS) + (t.stream.id,) for t in dev.sim.finished]
    launches = [(lc.task.seq, lc.start, lc.end) for lc in dev.launches]
    from graphexec.npu._prof_stats import eager_stats
    stats = [eager_stats(run).to_dict() for run, _ in runs]
    counters = {name: card.allocator.counter(name) for name in ("allocated_bytes", "reserved_bytes", "active")}
    return (tasks, launches, dev.sim.samples, dev.host_t, dev.sim.now, stats, samples, counters,
            [v.tobytes() for v in values])


def _same(fast: tuple, plain: tuple) -> None:
    names = ("tasks", "launches", "samples", "host_t", "now", "stats", "memory", "counters", "values")
    for name, a, b in zip(names, fast, plain):
        assert a == b, name


def test_an_eager_program_matches_its_plain_run():
    fast = _observe(2200)
    assert sum(1 for t in fast[0] if t[1] == "kernel") > 2200
    with _switch.plain():
        plain = _observe(2200)
    _same(fast, plain)


def test_the_lone_step_switched_off_matches(monkeypatch):
    """``LONE = False``: the loop's own steps, the rest of the fast paths on."""
    fast = _observe(600, memory=False)
    monkeypatch.setattr(sim_loop, "LONE", False)
    _same(fast, _observe(600, memory=False))


def _ops(x) -> list:
    """One-tensor ops whose plans call their bind's ufunc, and ones that keep the kernel."""
    return [x + 0.5, 0.25 * x, x - 3.0, 1.5 / x, x * -0.0, x ** 2.0, x.relu(), npu.exp(x), npu.tanh(x),
            npu.sqrt(x), npu.abs(x), npu.sigmoid(x), x @ x.T if x.ndim == 2 else x, x > 0.0]


def test_ops_by_their_ufunc_match_the_kernels():
    """The plan's ufunc (``_plan._ufunc``) against the kernel's own call (GRAPHEXEC_PLAIN), bit
    for bit, on contiguous and strided inputs with infinities, NaN, zeros of both signs and
    tiny values; a few ops at a time (numpy's warnings stay the kernel's) and past the
    queue's depth (the device runs them quietly)."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal((24, 24)).astype(np.float32) * 50
    base[0, :6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-42]
    got = {}
    for kind in ("fast", "plain"):
        with _switch.plain() if kind == "plain" else nullcontext():
            npu.init()
            x = npu.tensor(base)
            views = [x, x[::2, 1::3], x[3:, :7]]
            outs = [o.numpy() for v in views for o in _ops(v)]
            many = x
            for i in range(2200):
                many = many * 0.999 if i % 2 else many + 0.5
            got[kind] = [o.tobytes() for o in outs] + [many.numpy().tobytes()]
    assert got["fast"] == got["plain"]
