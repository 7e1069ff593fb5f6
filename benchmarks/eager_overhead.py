"""Host time per op of eager mode (graphexec.npu) on a chain of tiny tensors, beside graph mode and numpy.

Usage: OPENBLAS_NUM_THREADS=1 python benchmarks/eager_overhead.py [--ops 10000] [--repeat 3] [--quick] [--plain]
       [--breakdown]
The chain alternates ``x = x + 0.5`` and ``x = x * 0.999`` on a float32[16, 16]:

- eager: each op launched by graphexec.npu on the current stream (plan lookup, a block from
  the caching allocator, the launch, the simulated device running it, the old tensor's
  block returned when it is dropped), then one ``.numpy()``;
- graph: a Session of the same chain built as a graph (compiled beforehand: compile time
  shown apart), its first run, which simulates the device as eager mode does (graph mode
  launches the loaded task list in one call); "replay" its later runs, which replay the
  recorded timeline instead of simulating again;
- numpy: the same ops as numpy calls on arrays, the yardstick: each row's ``x numpy`` is its
  host time per op over numpy's, both measured in this run (a loaded machine slows both;
  numpy's few milliseconds are the fastest of at least 20 runs, so one stall does not halve
  every ratio);
- plain (``--plain``): eager again with every fast path off (``GRAPHEXEC_PLAIN``: the
  simulator's plain steps, the kernels' own calls), what the fast paths save in this run.

Host us/op is the process's CPU time / ops (``time.process_time``, the fastest of
``--repeat``; eager from a fresh ``npu.init()`` each time, timed from its uploaded input to
its output's ``.numpy()``, which waits for the device): everything here runs on one
thread, so on an idle machine it is the wall time, and on a shared one it leaves out the
other processes' turns. device_us is the simulated time
from the first task's start to the last one's end. The last column says whether eager's
output is bit-identical to graph mode's.

``--breakdown`` then says where an eager op's host time goes, by difference of CPU times:
the simulator (launches, the device run, the final wait), the kernels' math, the caching
allocator, and the rest (graphexec.npu itself, the task object); see ``breakdown``.
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
from graphexec import _switch  # noqa: E402

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
    ap.add_argument("--plain", action="store_true", help="eager with the fast paths off too (GRAPHEXEC_PLAIN)")
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
    numpy_s, numpy_out = _best_s(lambda: numpy_chain(n, x0), max(repeat, 20))   # the yardstick: a few ms a run, so many
    graph_out = result.outputs[session.graph.outputs[0]]

    print(f"{'case':<8}{'tasks':>8}{'host_us/op':>12}{'x numpy':>9}{'total_ms':>10}{'device_us':>11}  note")

    def row(case: str, sec: float, dev: Any, note: str) -> None:
        dev_cell = f"{dev:>11.1f}" if isinstance(dev, float) else f"{dev:>11}"
        print(f"{case:<8}{n:>8}{sec / n * 1e6:>12.2f}{sec / numpy_s:>9.1f}{sec * 1e3:>10.1f}{dev_cell}  {note}")

    same = eager_out.tobytes() == graph_out.tobytes()
    row("eager", eager_s, eager_dev, f"bit-identical to graph: {same}")
    if args.plain:
        with _switch.plain():
            plain_s, plain_out, plain_dev = min((eager(n, x0) for _ in range(repeat)), key=lambda r: r[0])
        row("plain", plain_s, plain_dev, "eager, GRAPHEXEC_PLAIN: same device_us and values: "
            f"{plain_dev == eager_dev and plain_out.tobytes() == eager_out.tobytes()}")
    row("graph", graph_s, result.stats.makespan_us, f"compile {compile_s:.1f} s, not counted")
    row("replay", replay_s, result.stats.makespan_us, "graph mode's later runs: the recorded timeline replayed")
    row("numpy", numpy_s, "-", f"same values: {bool(np.array_equal(numpy_out, eager_out))}")
    verdict = "meets" if eager_s / n * 1e6 <= TARGET_US else "misses"
    print(f"eager {verdict} the target of {TARGET_US:.0f} us/op ({eager_s / numpy_s:.1f}x numpy's op in this run)")
    if args.breakdown:
        breakdown(n, x0)
    return 0


def breakdown(n: int, x0: np.ndarray) -> None:
    """Where an eager op's host time goes, by difference of CPU times (no timer per call,
    which would cost more than some of the parts): the chain as it runs; the chain with
    ``Device.launch`` dropping its tasks (no simulator, no kernels); the caching
    allocator's malloc and free of the chain's blocks alone; the kernels' math (a task's
    start and end) alone, with numpy's warnings off once, as the device runs them (past
    the queue's 2,042 tasks, launches are held and submitted in batches: ``Device._hold``)."""
    from graphexec.kernels.quiet import run_quietly
    from graphexec.npu import _launch
    from graphexec.npu._plan import PLANS
    from graphexec.npu._state import STATE
    from graphexec.runtime.device import Device

    full = min(eager(n, x0)[0] for _ in range(3))
    launch = Device.launch
    Device.launch = lambda self, task: task   # type: ignore[method-assign]
    try:
        host = min(_loop(n, x0) for _ in range(3))
    finally:
        Device.launch = launch   # type: ignore[method-assign]
    npu.init()
    card = STATE.card()
    alloc, stream, nbytes = card.allocator, card.current, x0.nbytes

    def allocs() -> None:
        p = alloc.malloc(nbytes, stream)
        for _ in range(n):
            q = alloc.malloc(nbytes, stream)
            alloc.free(p)
            p = q
        alloc.free(p)

    plans = [p for k, p in PLANS.items() if k[0] in ("Add", "Mul") and k[2:4] == (x0.dtype, SHAPE)][:2]
    out = np.empty_like(x0)

    def kernels() -> None:   # quietly, as the device runs them: a batch of held launches, the final wait
        with run_quietly():
            for i in range(n):
                _launch.store(_launch.Kernel(plans[i % 2], x0, out, 0)())

    alloc_s, math_s = _best_s(allocs, 3)[0], _best_s(kernels, 3)[0]
    parts = [("simulator (the launches, the device run, the final wait)", full - host - math_s),
             ("kernels' math (each task's start and end)", math_s), ("caching allocator (malloc, free)", alloc_s),
             ("the rest: graphexec.npu, the task object", host - alloc_s)]
    print(f"eager breakdown of {full / n * 1e6:.2f} us/op (CPU time):")
    for what, sec in parts:
        print(f"  {what:<58}{sec / n * 1e6:>7.2f} us/op {sec / full:>6.1%}")


def _loop(n: int, x0: np.ndarray) -> float:
    """CPU seconds of the chain alone."""
    npu.init()
    x = npu.tensor(x0)
    t0 = time.process_time()
    for i in range(n):
        x = x * 0.999 if i % 2 else x + 0.5
    return time.process_time() - t0

if __name__ == "__main__":
    sys.exit(main())
