"""Host time per op of eager mode (graphexec.npu) on a chain of tiny tensors, beside graph mode and numpy.

Usage: OPENBLAS_NUM_THREADS=1 python benchmarks/eager_overhead.py [--ops 10000] [--repeat 3] [--quick] [--breakdown]
The chain alternates ``x = x + 0.5`` and ``x = x * 0.999`` on a float32[16, 16]:

- eager: each op launched by graphexec.npu on the current stream (plan lookup, a block from
  the caching allocator, the launch, the simulated device running it, the old tensor's
  block returned when it is dropped), then one ``.numpy()``;
- graph: a Session of the same chain built as a graph (compiled beforehand: compile time
  shown apart), its first run, which simulates the device as eager mode does (graph mode
  launches the loaded task list in one call); "replay" its later runs, which replay the
  recorded timeline instead of simulating again;
- numpy: the same ops as numpy calls on arrays.

Host us/op is the process's CPU time / ops (``time.process_time``, the fastest of
``--repeat``; eager from a fresh ``npu.init()`` each time, timed from its uploaded input to
its output's ``.numpy()``, which waits for the device): everything here runs on one
thread, so on an idle machine it is the wall time, and on a shared one it leaves out the
other processes' turns. device_us is the simulated time
from the first task's start to the last one's end. The last column says whether eager's
output is bit-identical to graph mode's.

``--breakdown`` runs the eager chain once more with timers around the layers an op goes
through and says where its host time goes: the simulator (``Device.launch``, which runs
the device when the command queue is full, and the final wait), the kernels' math inside
it (the tasks' start and end), the caching allocator (malloc and free), and the rest
(graphexec.npu itself, the task object). It is wall time (``time.perf_counter``, cheap
enough to wrap every call), and the timers add their own cost, so the shares are of the
timed run's total.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

import graphexec as gx  # noqa: E402
import graphexec.npu as npu  # noqa: E402

TARGET_US = 10.0
SHAPE = (16, 16)


def _best_s(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The fastest of ``repeat`` CPU times (the machine's noise only ever adds) and the result."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        times.append(time.process_time() - t0)
    return min(times), out


def eager(n: int, x0: np.ndarray, clock: Callable[[], float] = time.process_time) -> tuple[float, np.ndarray, float]:
    """(CPU seconds of the chain and its final ``.numpy()``, the values, device_us): the
    card's set-up and upload before, and the timeline read for device_us after, are the
    benchmark's own work, not the ops', and are left out of the time."""
    npu.init()
    x = npu.tensor(x0)
    npu.synchronize()
    t0 = clock()
    for i in range(n):
        x = x * 0.999 if i % 2 else x + 0.5
    out = x.numpy()
    host_s = clock() - t0
    tl = [t for t in npu.timeline() if t["kind"] == "kernel"]
    return host_s, out, max(t["end"] for t in tl) - min(t["start"] for t in tl)


def numpy_chain(n: int, x0: np.ndarray) -> np.ndarray:
    x = x0
    half, keep = np.float32(0.5), np.float32(0.999)
    for i in range(n):
        x = x * keep if i % 2 else x + half
    return x


def graph(n: int) -> gx.Graph:
    b = gx.GraphBuilder(f"chain{n}")
    x = b.input("x", np.float32, list(SHAPE))
    for i in range(n):
        x = b.Mul(x, 0.999) if i % 2 else b.Add(x, 0.5)
    b.output(x)
    return b.build()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1,000 ops, one repeat")
    ap.add_argument("--breakdown", action="store_true", help="then where an eager op's host time goes")
    args = ap.parse_args(argv)
    n, repeat = (1000, 1) if args.quick else (args.ops, args.repeat)
    x0 = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)

    eager(200, x0)   # warm: the plans of Add and Mul are built once
    eager_s, eager_out, eager_dev = min((eager(n, x0) for _ in range(repeat)), key=lambda r: r[0])
    g = graph(n)
    t0 = time.process_time()
    gx.Session(g).compile({"x": x0})
    compile_s = time.process_time() - t0

    def first_run() -> Any:
        session = gx.Session(g)
        session.compile({"x": x0})
        t = time.process_time()
        result = session.run({"x": x0})
        return time.process_time() - t, result, session

    runs = [first_run() for _ in range(repeat)]
    graph_s, result, session = min(runs, key=lambda r: r[0])
    replay_s, _ = _best_s(lambda: session.run({"x": x0}), max(repeat, 2))
    numpy_s, numpy_out = _best_s(lambda: numpy_chain(n, x0), repeat)
    graph_out = result.outputs[session.graph.outputs[0]]

    print(f"{'case':<8}{'tasks':>8}{'host_us/op':>12}{'total_ms':>10}{'device_us':>11}  note")
    same = eager_out.tobytes() == graph_out.tobytes()
    print(f"{'eager':<8}{n:>8}{eager_s / n * 1e6:>12.2f}{eager_s * 1e3:>10.1f}{eager_dev:>11.1f}  "
          f"bit-identical to graph: {same}")
    print(f"{'graph':<8}{n:>8}{graph_s / n * 1e6:>12.2f}{graph_s * 1e3:>10.1f}{result.stats.makespan_us:>11.1f}  "
          f"compile {compile_s:.1f} s, not counted")
    print(f"{'replay':<8}{n:>8}{replay_s / n * 1e6:>12.2f}{replay_s * 1e3:>10.1f}{result.stats.makespan_us:>11.1f}  "
          "graph mode's later runs: the recorded timeline replayed")
    print(f"{'numpy':<8}{n:>8}{numpy_s / n * 1e6:>12.2f}{numpy_s * 1e3:>10.1f}{'-':>11}  "
          f"same values: {bool(np.array_equal(numpy_out, eager_out))}")
    verdict = "meets" if eager_s / n * 1e6 <= TARGET_US else "misses"
    print(f"eager {verdict} the target of {TARGET_US:.0f} us/op")
    if args.breakdown:
        breakdown(n, x0)
    return 0


def breakdown(n: int, x0: np.ndarray) -> None:
    """Where an eager op's host time goes, from inclusive timers around each layer."""
    from graphexec.npu import _launch
    from graphexec.runtime.caching import CachingAllocator
    from graphexec.runtime.device import Device

    spent: dict[str, float] = {}
    layers = [(Device, "launch", "sim"), (Device, "synchronize_stream", "sim"), (_launch.Kernel, "__call__", "math"),
              (_launch, "store", "math"), (CachingAllocator, "malloc", "alloc"), (CachingAllocator, "free", "alloc")]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in layers]
    for owner, name, label in layers:
        setattr(owner, name, _timed(getattr(owner, name), label, spent))
    try:
        total, _, _ = eager(n, x0, time.perf_counter)
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
    sim, math, alloc = spent.get("sim", 0.0), spent.get("math", 0.0), spent.get("alloc", 0.0)
    parts = [("simulator (Device.launch and the final wait), less the kernels", sim - math),
             ("kernels' math (each task's start and end)", math), ("caching allocator (malloc, free)", alloc),
             ("the rest: graphexec.npu, the task object", total - sim - alloc)]
    print(f"eager breakdown, timed run {total / n * 1e6:.2f} us/op:")
    for what, sec in parts:
        print(f"  {what:<64}{sec / n * 1e6:>7.2f} us/op {sec / total:>6.1%}")


def _timed(fn: Callable[..., Any], label: str, spent: dict[str, float]) -> Callable[..., Any]:
    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0
    return timed


if __name__ == "__main__":
    sys.exit(main())
