"""The simulated hardware: roofline timing, waves, shared HBM, units, priorities, copies, queues."""

from __future__ import annotations

import numpy as np
import pytest

from graphexec.kernels.cost import node_cost
from graphexec.profiling.trace import chrome_trace
from graphexec import acl
from graphexec.runtime.profiles import builtin_profiles, load_profile


def _noop() -> None:
    pass


def _start(profile="ascend910", **update) -> acl:
    """The device on ``profile`` as a plain roofline (no kernel model: ``test_kernel_time.py``
    checks achieved rates and block dims), with ``update`` applied."""
    p = load_profile(profile)
    acl.init(profile=p.model_copy(update={"kernels": None, **update}))
    acl.set_device(0)
    return acl.emulated_device()


def _kernels(dev) -> list:
    return [t for t in dev.sim.finished if t.kind == "kernel"]


def _roofline(p, flops: float, nbytes: float, unit: str, dtype: str) -> float:
    peak = p.peak_tflops.cube[dtype] if unit == "cube" else p.peak_tflops.vector[dtype]
    return p.task_overhead_us + max(flops / (peak * 1e6), nbytes / p.hbm_bytes_per_us)


# ---- roofline ---------------------------------------------------------------------------
CASES = [("MatMul", [(2048, 2048), (2048, 2048)], [(2048, 2048)]),
         ("Add", [(64 << 20,), (64 << 20,)], [(64 << 20,)])]


@pytest.mark.parametrize("profile", sorted(builtin_profiles()))
@pytest.mark.parametrize("op, ins, outs", CASES, ids=["matmul_2048", "add_64M"])
def test_big_kernels_run_within_10_percent_of_roofline(fresh, profile, op, ins, outs):
    dev = _start(profile)
    c = node_cost(op, ins, sum(4 * np.prod(s) for s in ins), outs, 4 * np.prod(outs[0]), {}, False)
    assert c.block_dim > dev.profile.vector_cores      # tiling gives more blocks than cores: waves
    s = acl.create_stream()
    acl.launch_kernel(_noop, c.block_dim, s, flops=c.flops, bytes=c.bytes, unit=c.unit, dtype="float32")
    acl.synchronize_stream(s)
    k = _kernels(dev)[0]
    roof = _roofline(dev.profile, c.flops, c.bytes, c.unit, "float32")
    assert 1.0 - 1e-9 <= (k.end_t - k.start_t) / roof <= 1.10


def test_block_dim_comes_from_tiling_so_small_kernels_leave_cores_free(fresh):
    dev = _start()
    small = node_cost("MatMul", [(64, 64), (64, 64)], 2 * 64 * 64 * 4, [(64, 64)], 64 * 64 * 4, {}, False)
    big = node_cost("MatMul", [(512, 512), (512, 512)], 0, [(512, 512)], 0, {}, False)
    assert small.block_dim == 16 and big.block_dim == 1024
    s1, s2 = acl.create_stream(), acl.create_stream()
    acl.launch_kernel(_noop, small.block_dim, s1, flops=1e9, unit="cube", dtype="float32")
    acl.launch_kernel(_noop, 16, s2, flops=1e9, unit="cube", dtype="float32")
    acl.synchronize_device()
    a, b = _kernels(dev)
    assert a.max_cores == 16 and b.max_cores == 16
    assert b.start_t < a.end_t and b.end_t - b.start_t == pytest.approx(a.end_t - a.start_t)


def test_waves_when_blocks_exceed_cores(fresh):
    dev = _start()
    p = dev.profile
    per_block = 1e6   # flops
    for blocks in (32, 33, 64):
        s = acl.create_stream()
        acl.launch_kernel(_noop, blocks, s, flops=per_block * blocks, unit="vector", dtype="float32")
        acl.synchronize_stream(s)
        k = _kernels(dev)[-1]
        waves = -(-blocks // 32)
        assert k.end_t - k.start_t == pytest.approx(p.task_overhead_us + waves * per_block
                                                    / p.vector_flops_per_us_per_core("float32"))


def test_hbm_bandwidth_is_shared_by_the_blocks_running_at_once(fresh):
    dev = _start()
    p, nbytes = dev.profile, 120e6
    s1, s2, s3 = acl.create_stream(), acl.create_stream(), acl.create_stream()
    for s in (s1, s2):   # two memory-bound kernels at once: together they take all of HBM
        acl.launch_kernel(_noop, 16, s, bytes=nbytes, unit="vector")
    acl.synchronize_device()
    a, b = _kernels(dev)
    assert b.end_t - a.start_t == pytest.approx(p.task_overhead_us + p.launch_cost_us + 2 * nbytes
                                                / p.hbm_bytes_per_us, rel=0.02)
    assert a.end_t - a.start_t > 1.8 * nbytes / p.hbm_bytes_per_us
    # a compute-bound kernel next to a memory-bound one takes only what it needs
    acl.launch_kernel(_noop, 16, s1, bytes=nbytes, unit="vector")
    acl.launch_kernel(_noop, 16, s3, flops=32e9, bytes=1e6, unit="cube", dtype="float16")
    acl.synchronize_device()
    mem, comp = _kernels(dev)[2:]
    alone = p.task_overhead_us + 32e9 / (p.peak_tflops.cube["float16"] * 1e6 / 2)
    assert comp.end_t - comp.start_t == pytest.approx(alone, rel=1e-6)


@pytest.mark.parametrize("profile, together", [("ascend910", False), ("ascend910b", True)])
def test_separated_cores_run_cube_and_vector_side_by_side(fresh, profile, together):
    dev = _start(profile)
    s1, s2 = acl.create_stream(), acl.create_stream()
    cube_cores, vec_cores = dev.profile.ai_cores, dev.profile.vector_cores
    acl.launch_kernel(_noop, cube_cores, s1, flops=1e12, unit="cube", dtype="float16")
    acl.launch_kernel(_noop, vec_cores, s2, flops=1e10, unit="vector", dtype="float16")
    acl.synchronize_device()
    cube, vec = sorted(_kernels(dev), key=lambda t: t.unit)
    assert (vec.end_t < cube.end_t) is together      # coupled: the vector kernel waits for the cores


def test_priority_picks_the_next_blocks_but_never_preempts(fresh):
    dev = _start()
    low, high, later = acl.create_stream(priority=7), acl.create_stream(priority=0), acl.create_stream(priority=7)
    acl.launch_kernel(_noop, 32, low, flops=32e8, unit="vector", dtype="float32", name="running")
    acl.launch_kernel(_noop, 32, later, flops=32e8, unit="vector", dtype="float32", name="low")
    acl.launch_kernel(_noop, 32, high, flops=32e8, unit="vector", dtype="float32", name="high")
    acl.synchronize_device()
    k = {t.name: t for t in _kernels(dev)}
    assert k["running"].max_cores == 32                 # it kept every core: no preemption
    assert k["high"].end_t < k["low"].end_t             # enqueued last, served first
    assert k["high"].end_t - k["running"].end_t == pytest.approx(k["running"].end_t - k["running"].start_t
                                                                 - dev.profile.task_overhead_us)


def test_copies_use_one_engine_per_direction_at_its_bandwidth(fresh):
    dev = _start()
    p, n = dev.profile, 8 << 20
    h = [acl.malloc_host(n) for _ in range(3)]
    d = [acl.malloc(n) for _ in range(3)]
    s = [acl.create_stream() for _ in range(3)]
    acl.memcpy_async(d[0], n, h[0], n, acl.MEMCPY_HOST_TO_DEVICE, s[0])
    acl.memcpy_async(d[1], n, h[1], n, acl.MEMCPY_HOST_TO_DEVICE, s[1])
    acl.memcpy_async(h[2], n, d[2], n, acl.MEMCPY_DEVICE_TO_HOST, s[2])
    acl.synchronize_device()
    a, b, c = sorted((t for t in dev.sim.finished if t.kind == "memcpy"), key=lambda t: t.stream.id)
    one = p.task_overhead_us + n / p.copy_bytes_per_us("h2d")
    assert a.end_t - a.start_t == pytest.approx(one)
    assert b.end_t == pytest.approx(a.end_t + one)        # same engine: after the first
    assert c.start_t < a.end_t and c.end_t - c.start_t == pytest.approx(one)   # d2h runs alongside


def test_host_blocks_when_the_command_queue_is_full(fresh):
    dev = _start(queue_depth=4)
    s = acl.create_stream()
    for _ in range(10):
        acl.launch_kernel(_noop, 32, s, flops=32e8, unit="vector", dtype="float32")
    ks = [launch for launch in dev.launches if launch.task.kind == "kernel"]
    assert ks[3].start == pytest.approx(3 * dev.profile.launch_cost_us)     # room for 4
    assert ks[4].start > ks[3].end and ks[4].start == pytest.approx(ks[0].task.end_t)
    acl.synchronize_stream(s)


def test_results_follow_simulated_time_without_an_event(fresh):
    _start()
    n = 1024
    src, dst = acl.malloc(4 * n), acl.malloc(4 * n)
    acl.memcpy(src, 4 * n, np.ones(n, np.float32), 4 * n, acl.MEMCPY_HOST_TO_DEVICE)
    s1, s2 = acl.create_stream(), acl.create_stream()

    def double() -> None:
        acl.view(src, np.float32, (n,))[...] *= 2

    def copy() -> None:
        acl.view(dst, np.float32, (n,))[...] = acl.view(src, np.float32, (n,))

    acl.launch_kernel(double, 4, s1, flops=1e9, reads=[src], writes=[src])
    acl.launch_kernel(copy, 4, s2, reads=[src], writes=[dst])        # no event: reads the old bytes
    acl.synchronize_device()
    assert (acl.view(dst, np.float32, (n,)) == 1).all()
    ev = acl.create_event()
    acl.launch_kernel(double, 4, s1, flops=1e9, reads=[src], writes=[src])
    acl.record_event(ev, s1)
    acl.stream_wait_event(s2, ev)
    acl.launch_kernel(copy, 4, s2, reads=[src], writes=[dst])
    acl.synchronize_device()
    assert (acl.view(dst, np.float32, (n,)) == 4).all()


def _program() -> list:
    dev = _start("ascend910b")
    s = [acl.create_stream(priority=i) for i in range(3)]
    ev = acl.create_event()
    for i in range(12):
        acl.launch_kernel(_noop, 7 + 5 * i, s[i % 3], flops=1e8 * (i % 4 + 1), bytes=1e6 * (i % 3 + 1),
                          unit=("cube", "vector", "aicpu")[i % 3], dtype="float16")
        if i % 4 == 3:
            acl.record_event(ev, s[i % 3])
            acl.stream_wait_event(s[(i + 1) % 3], ev)
    acl.synchronize_device()
    return dev.timeline()


def test_same_program_same_times(fresh):
    first = _program()
    acl.finalize()
    assert _program() == first


def test_timeline_samples_and_trace(fresh):
    dev = _start()
    s1, s2 = acl.create_stream(), acl.create_stream()
    ev = acl.create_event()
    acl.launch_kernel(_noop, 20, s1, flops=1e9, unit="vector", dtype="float32", name="a")
    acl.record_event(ev, s1)
    acl.launch_kernel(_noop, 20, s2, flops=1e9, unit="vector", dtype="float32", name="b")
    acl.stream_wait_event(s2, ev)
    acl.synchronize_device()
    rows = {r["name"]: r for r in dev.timeline()}
    assert rows["a"]["enqueue"] <= rows["a"]["start"] < rows["a"]["end"] and rows["a"]["cores"] == 20
    span = {k: r["end"] - r["start"] for k, r in rows.items()}
    assert span["b"] > 1.5 * span["a"]                    # 12 cores were left for it at first: two waves
    samples = dev.sim.samples
    assert max(x.cube for x in samples) == 32 and samples[-1].cube == 0 and samples[-1].queued == 0
    assert max(x.queued for x in samples) >= 2
    assert all(a.t < b.t for a, b in zip(samples, samples[1:]))
    trace = chrome_trace(dev)["traceEvents"]
    events = [e for e in trace if e.get("cat") == "event"]
    assert {(e["args"]["kind"], e["tid"]) for e in events} == {("record", s1.id), ("wait", s2.id)}
    assert {e["name"] for e in trace if e.get("ph") == "C"} == {"busy cores", "queued tasks"}
    kernel = next(e for e in trace if e.get("cat") == "kernel")
    assert kernel["args"]["cores"] == 20 and kernel["tid"] == s1.id
