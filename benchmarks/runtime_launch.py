"""Host time per launched task: how fast the emulated runtime takes tiny kernels.

Launches N tiny kernels through ``acl.launch_kernel`` (and the engine's path, a
``DeviceTask`` through ``Device.launch``), synchronizes, and prints the wall time per
task of the launch calls, of the synchronize (the simulation catching up), of both, and
the process CPU time of both (what the host spent, whatever else the machine ran);
each case runs ``--repeat`` times and the fastest run counts, since other processes on
the machine only ever add time. The target at this stage is under 20 us per task end to
end. Launches block when a stream's queue is full, so part of the simulation runs
inside the launch calls.

Usage: ``python benchmarks/runtime_launch.py [--tasks 10000] [--quick]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

from graphexec import acl  # noqa: E402
from graphexec.runtime.device import Device  # noqa: E402
from graphexec.runtime.sim import DeviceTask  # noqa: E402

TARGET_US = 20.0


def _tiny() -> None:
    pass


def _acl_case(streams: int, kernel: str) -> Callable[[int], tuple[float, float, float, float]]:
    def run(n: int) -> tuple[float, float, float, float]:
        acl.init()
        acl.set_device(0)
        ss = [acl.create_stream() for _ in range(streams)]
        d = acl.malloc(64)
        t = acl.tensor(d, np.float32, (16,))
        args = (t, t) if kernel == "Relu" else ()
        fn = kernel if kernel == "Relu" else _tiny
        c0, t0 = time.process_time(), time.perf_counter()
        for i in range(n):
            acl.launch_kernel(fn, 1, ss[i % streams], *args, flops=64, bytes=128)
        t1 = time.perf_counter()
        acl.synchronize_device()
        t2, cpu = time.perf_counter(), time.process_time() - c0
        sim_us = acl.emulated_device().sim.now
        acl.finalize()
        return t1 - t0, t2 - t1, cpu, sim_us
    return run


def _device_case(n: int) -> tuple[float, float, float, float]:
    dev = Device("ascend910")
    s = dev.default_stream
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        dev.launch(DeviceTask("kernel", s, "k", flops=64.0, bytes=128.0, dtype="float32"))
    t1 = time.perf_counter()
    dev.synchronize_device()
    return t1 - t0, time.perf_counter() - t1, time.process_time() - c0, dev.sim.now


CASES: dict[str, Callable[[int], tuple[float, float, float, float]]] = {
    "acl callable, 1 stream": _acl_case(1, "callable"),
    "acl callable, 4 streams": _acl_case(4, "callable"),
    "Device.launch (engine path)": _device_case,
    "acl registered Relu, 1 stream *": _acl_case(1, "Relu"),
}
COMPUTES = {"acl registered Relu, 1 stream *"}   # runs the real numpy kernel: not a launch cost


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the fastest counts (as timeit)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 200 tasks per case, once")
    args = ap.parse_args(argv)
    n, repeat = (200, 1) if args.quick else (args.tasks, max(1, args.repeat))
    print(f"{'case':32} {'tasks':>6} {'launch us':>10} {'sync us':>8} {'total us':>9} {'cpu us':>7} "
          f"{'device us':>10}")
    worst = 0.0
    for name, case in CASES.items():
        launch, sync, cpu, sim_us = min((case(n) for _ in range(repeat)), key=lambda r: r[0] + r[1])
        total = (launch + sync) / n * 1e6
        worst = worst if name in COMPUTES else max(worst, total)
        print(f"{name:32} {n:6d} {launch / n * 1e6:10.2f} {sync / n * 1e6:8.2f} {total:9.2f} "
              f"{cpu / n * 1e6:7.2f} {sim_us:10.1f}")
    verdict = "within" if worst < TARGET_US else "OVER"
    print("* includes computing Relu with numpy on device-memory views (the kernel's own cost)")
    print(f"worst tiny-kernel total per task {worst:.2f} us: {verdict} the {TARGET_US:.0f} us target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
