"""HCCL collectives over the emulated links: exact numpy results on every rank, and the
alpha-beta times of the ring and mesh algorithms, over links other transfers share."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from graphexec import acl, hccl
from graphexec.errors import HcclError
from graphexec.hccl._types import DTYPES, reduce
from graphexec.runtime.systems import load_system

MiB = 1024 * 1024
FP32, SUM = hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM


def _setup(system: str, devices: list[int]) -> tuple[list, list]:
    """acl on ``system``, comms over ``devices``, one new stream per rank."""
    acl.init(system=system)
    comms = hccl.comm_init_all(len(devices), devices)
    streams = []
    for d in devices:
        acl.set_device(d)
        streams.append(acl.create_stream())
    return comms, streams


def _put(device: int, arr: np.ndarray) -> int:
    acl.set_device(device)
    ptr = acl.malloc(max(arr.nbytes, 1))
    acl.view(ptr, np.uint8, (arr.nbytes,))[...] = arr.reshape(-1).view(np.uint8)
    return ptr


def _get(ptr: int, dtype: np.dtype, n: int) -> np.ndarray:
    return acl.view(ptr, dtype, (n,)).copy()


def _sync(devices: list[int]) -> None:
    for d in devices:
        acl.set_device(d)
        acl.synchronize_device()


def _hccl_tasks(devices: list[int]) -> list[dict]:
    return [t for d in devices for t in acl.emulated_device(d).timeline() if t["kind"] == "hccl"]


def _took(devices: list[int]) -> float:
    """From when the last rank's part reached its stream head to the collective's end."""
    tasks = _hccl_tasks(devices)
    assert len({t["end"] for t in tasks}) == 1   # every rank's part ends with the collective
    return tasks[0]["end"] - max(t["start"] for t in tasks)


def _data(dtype: np.dtype, n: int, seed: int) -> np.ndarray:
    """Small values (exact in every type, also in products of 8 ranks' values)."""
    rng = np.random.default_rng(seed)
    lo = 0 if dtype.kind == "u" else -2
    return rng.integers(lo, 3, n).astype(dtype)


# ---- the 256 MiB all-reduce: exact, and the time of its algorithm -----------------------
@pytest.mark.parametrize("system,algorithm", [("atlas800t-a2", "mesh"), ("atlas800-910", "ring")])
def test_a_256mib_all_reduce_is_the_sum_and_takes_its_algorithms_time(fresh, system, algorithm):
    p, n = 8, 256 * MiB
    count = n // 4
    devices = list(range(p))
    comms, streams = _setup(system, devices)
    base = (np.arange(count) % 1024).astype(np.float32)
    bufs = []
    for r in devices:   # in place (send == recv): 2 GiB of emulated HBM instead of 4
        acl.set_device(r)
        bufs.append(acl.malloc(n))
        v = acl.view(bufs[r], np.float32, (count,))
        np.add(base, r, out=v)
    for r in devices:
        hccl.all_reduce(bufs[r], bufs[r], count, FP32, SUM, comms[r], streams[r])
    _sync(devices)
    expected = base * p + sum(devices)
    del base
    for r in devices:
        assert np.array_equal(acl.view(bufs[r], np.float32, (count,)), expected), f"rank {r}"
    sysprof = load_system(system)
    links = [sysprof.link(r, (r + 1) % p) for r in devices]
    if algorithm == "mesh":   # a rank's total bandwidth to its p-1 peers
        bandwidth, latency = (p - 1) * links[0].bytes_per_us, links[0].latency_us
    else:                     # the slowest ring link
        bandwidth, latency = min(x.bytes_per_us for x in links), max(x.latency_us for x in links)
    formula = 2 * (p - 1) / p * n / bandwidth + 2 * (p - 1) * latency
    took = _took(devices)
    assert took == pytest.approx(formula, rel=0.10)
    hccl_alpha = 2 if algorithm == "mesh" else 2 * (p - 1)   # HCCL's own count of latencies
    assert took == pytest.approx(2 * (p - 1) / p * n / bandwidth + hccl_alpha * links[0].latency_us, rel=0.01)
    task = _hccl_tasks([0])[0]
    assert task["bytes"] == n and task["link"] == ("HCCS" if algorithm == "mesh" else "HCCS+PCIe")


# ---- exact results ----------------------------------------------------------------------
DTYPE_IDS = [hccl.HCCL_DATA_TYPE_INT8, hccl.HCCL_DATA_TYPE_INT32, hccl.HCCL_DATA_TYPE_UINT16,
             hccl.HCCL_DATA_TYPE_FP16, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_DATA_TYPE_BFP16,
             hccl.HCCL_DATA_TYPE_INT64, hccl.HCCL_DATA_TYPE_FP64]
OPS = [hccl.HCCL_REDUCE_SUM, hccl.HCCL_REDUCE_PROD, hccl.HCCL_REDUCE_MAX, hccl.HCCL_REDUCE_MIN]
SYSTEMS = [("atlas800t-a2", [0, 1, 2, 3, 4, 5, 6, 7]), ("atlas800-910", [0, 1, 2, 3, 4, 5, 6, 7]),
           ("atlas800-910", [2, 5, 7]), ("atlas800t-a2", [6])]


@pytest.mark.parametrize("system,devices", SYSTEMS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dt", DTYPE_IDS)
def test_all_reduce_and_reduce_scatter_are_exact(fresh, system, devices, op, dt):
    dtype, p, k = DTYPES[dt], len(devices), 5
    comms, streams = _setup(system, devices)
    ins = [_data(dtype, p * k, seed) for seed in range(p)]
    send = [_put(d, x) for d, x in zip(devices, ins)]
    ar = [_put(d, np.zeros(p * k, dtype)) for d in devices]
    rs = [_put(d, np.zeros(k, dtype)) for d in devices]
    for r in range(p):
        hccl.all_reduce(send[r], ar[r], p * k, dt, op, comms[r], streams[r])
        hccl.reduce_scatter(send[r], rs[r], k, dt, op, comms[r], streams[r])
    _sync(devices)
    want = reduce(ins, op)
    for r in range(p):
        np.testing.assert_array_equal(_get(ar[r], dtype, p * k), want)
        np.testing.assert_array_equal(_get(rs[r], dtype, k), want[r * k:(r + 1) * k])


@pytest.mark.parametrize("system,devices", SYSTEMS)
@pytest.mark.parametrize("dt", [hccl.HCCL_DATA_TYPE_INT8, hccl.HCCL_DATA_TYPE_FP16, hccl.HCCL_DATA_TYPE_BFP16,
                                hccl.HCCL_DATA_TYPE_UINT64])
def test_all_gather_broadcast_send_recv_are_exact(fresh, system, devices, dt):
    dtype, p, k = DTYPES[dt], len(devices), 7
    root = p - 1
    comms, streams = _setup(system, devices)
    ins = [_data(dtype, k, 10 + seed) for seed in range(p)]
    send = [_put(d, x) for d, x in zip(devices, ins)]
    gathered = [_put(d, np.zeros(p * k, dtype)) for d in devices]
    bcast = [_put(d, x) for d, x in zip(devices, ins)]
    got = [_put(d, np.zeros(k, dtype)) for d in devices]
    for r in range(p):
        hccl.all_gather(send[r], gathered[r], k, dt, comms[r], streams[r])
        hccl.broadcast(bcast[r], k, dt, root, comms[r], streams[r])
    for r in range(p):   # a ring of sends: r -> r+1, each matched by the recv at r+1 from r
        if p > 1:
            hccl.send(send[r], k, dt, (r + 1) % p, comms[r], streams[r])
            hccl.recv(got[(r + 1) % p], k, dt, r, comms[(r + 1) % p], streams[(r + 1) % p])
    _sync(devices)
    for r in range(p):
        np.testing.assert_array_equal(_get(gathered[r], dtype, p * k), np.concatenate(ins))
        np.testing.assert_array_equal(_get(bcast[r], dtype, k), ins[root])
        if p > 1:
            np.testing.assert_array_equal(_get(got[r], dtype, k), ins[(r - 1) % p])


def test_bfloat16_is_ml_dtypes_bfloat16():
    assert DTYPES[hccl.HCCL_DATA_TYPE_BFP16] == np.dtype(ml_dtypes.bfloat16)


# ---- time, overlap, contention ------------------------------------------------------------
def test_send_recv_take_one_flow_over_the_pairs_link(fresh):
    comms, streams = _setup("atlas800-910", [0, 5])
    n = 16 * MiB
    a, b = _put(0, np.arange(n, dtype=np.uint8)), _put(5, np.zeros(n, np.uint8))
    hccl.send(a, n, hccl.HCCL_DATA_TYPE_UINT8, 1, comms[0], streams[0])
    hccl.recv(b, n, hccl.HCCL_DATA_TYPE_UINT8, 0, comms[1], streams[1])
    _sync([0, 5])
    link = load_system("atlas800-910").link(0, 5)
    assert _took([0, 5]) == pytest.approx(n / link.bytes_per_us + link.latency_us, rel=1e-6)
    assert [t["link"] for t in _hccl_tasks([0, 5])] == ["PCIe", "PCIe"]
    np.testing.assert_array_equal(_get(b, np.dtype(np.uint8), n), np.arange(n, dtype=np.uint8))


def test_a_peer_copy_on_a_ring_link_slows_the_all_reduce(fresh):
    """The ring's 3->4 flow shares the PCIe path between the groups with the copy."""
    def ring_us(with_copy: bool) -> float:
        comms, streams = _setup("atlas800-910", list(range(8)))
        n = 32 * MiB
        bufs = [_put(d, np.ones(n // 4, np.float32)) for d in range(8)]
        if with_copy:
            src, dst = _put(3, np.zeros(n, np.uint8)), _put(4, np.zeros(n, np.uint8))
            acl.set_device(3)
            acl.device_enable_peer_access(4)
            acl.memcpy_async(dst, n, src, n, acl.MEMCPY_DEVICE_TO_DEVICE, acl.create_stream())
        for r in range(8):
            hccl.all_reduce(bufs[r], bufs[r], n // 4, FP32, SUM, comms[r], streams[r])
        _sync(list(range(8)))
        took = _took(list(range(8)))
        acl.finalize()
        return took
    alone, shared = ring_us(False), ring_us(True)
    assert shared > alone * 1.02


def test_an_all_reduce_overlaps_a_kernel_on_another_stream(fresh):
    comms, streams = _setup("atlas800t-a2", list(range(8)))
    n = 64 * MiB
    bufs = [_put(d, np.ones(n // 4, np.float32)) for d in range(8)]
    acl.set_device(0)
    compute = acl.create_stream()
    x = acl.malloc(MiB)
    acl.launch_kernel(lambda p: None, 24, compute, x, flops=2e14, unit="cube")
    for r in range(8):
        hccl.all_reduce(bufs[r], bufs[r], n // 4, FP32, SUM, comms[r], streams[r])
    _sync(list(range(8)))
    tl = acl.emulated_device(0).timeline()
    (kern,) = [t for t in tl if t["kind"] == "kernel"]
    (coll,) = [t for t in tl if t["kind"] == "hccl"]
    assert kern["start"] < coll["end"] and coll["start"] < kern["end"]
    assert coll["link"] == "HCCS" and coll["bytes"] == n


@pytest.mark.parametrize("with_event", [False, True])
def test_a_reader_of_the_recv_buffer_needs_an_event(fresh, with_event):
    acl.init(system="atlas800t-a2", check_hazards=True)
    comms = hccl.comm_init_all(2, [0, 1])
    streams, send, out = [], [], []
    for d in (0, 1):
        acl.set_device(d)
        streams.append(acl.create_stream())
        send.append(_put(d, np.ones(256, np.float32)))
        out.append(_put(d, np.zeros(256, np.float32)))
    for r in (0, 1):
        hccl.all_reduce(send[r], out[r], 256, FP32, SUM, comms[r], streams[r])
    acl.set_device(0)
    reader = acl.create_stream()
    if with_event:
        ev = acl.create_event()
        acl.record_event(ev, streams[0])
        acl.stream_wait_event(reader, ev)
    seen = []
    acl.launch_kernel(lambda p: seen.append(acl.view(p, np.float32, (256,)).copy()), 1, reader, out[0],
                      reads=[out[0]], writes=[])
    _sync([0, 1])
    found = [h for h in acl.hazards(0) if h.kind == "RAW"]
    if with_event:
        assert not found and np.array_equal(seen[0], np.full(256, 2, np.float32))
    else:
        assert found and found[0].first.kind == "hccl" and found[0].second.name == "<lambda>"


# ---- errors ------------------------------------------------------------------------------
def _code(call) -> int:
    with pytest.raises(HcclError) as e:
        call()
    return e.value.code


def test_comm_init_all_refuses_bad_arguments(fresh):
    assert _code(lambda: hccl.comm_init_all(2, [0, 1])) == hccl.HCCL_E_RUNTIME      # before acl.init
    acl.init(device_count=2)
    assert _code(lambda: hccl.comm_init_all(2, [0, 1])) == hccl.HCCL_E_NOT_SUPPORT  # no system: no links
    acl.finalize()
    acl.init(system="atlas800-910")
    for ndev, devices in [(0, []), (9, list(range(9))), (True, [0]), (2, [0]), (2, [0, 8]), (2, [1, -1]),
                          (2, [0, 0]), (2, "01")]:
        assert _code(lambda n=ndev, d=devices: hccl.comm_init_all(n, d)) == hccl.HCCL_E_PARA, (ndev, devices)
    comms = hccl.comm_init_all(3, [4, 0, 6])
    assert [hccl.get_rank_id(c) for c in comms] == [0, 1, 2] and hccl.get_rank_size(comms[1]) == 3
    hccl.comm_destroy(comms[0])
    assert _code(lambda: hccl.get_rank_id(comms[0])) == hccl.HCCL_E_PARA
    assert _code(lambda: hccl.get_rank_size(None)) == hccl.HCCL_E_PTR
    acl.finalize()
    acl.init(system="atlas800-910")
    assert _code(lambda: hccl.get_rank_size(comms[1])) == hccl.HCCL_E_PARA   # a comm of a finalized runtime


def test_collectives_refuse_bad_arguments(fresh):
    comms, streams = _setup("atlas800-910", [0, 1])
    a0, b0 = _put(0, np.zeros(64, np.float32)), _put(0, np.zeros(64, np.float32))
    a1 = _put(1, np.zeros(64, np.float32))
    c0, s0, s1 = comms[0], streams[0], streams[1]
    para, ptr = hccl.HCCL_E_PARA, hccl.HCCL_E_PTR
    cases = [
        (lambda: hccl.all_reduce(a0, b0, 64, FP32, SUM, c0, s1), para),           # a stream of another device
        (lambda: hccl.all_reduce(a0, b0, 64, FP32, SUM, c0, None), para),         # current device is 1
        (lambda: hccl.all_reduce(a0, b0, 64, FP32, SUM, c0, "s"), para),
        (lambda: hccl.all_reduce(a0, b0, 64, 12, SUM, c0, s0), para),             # bad data type
        (lambda: hccl.all_reduce(a0, b0, 64, "fp32", SUM, c0, s0), para),
        (lambda: hccl.all_reduce(a0, b0, 64, FP32, 4, c0, s0), para),             # bad op
        (lambda: hccl.all_reduce(a0, b0, -1, FP32, SUM, c0, s0), para),           # bad count
        (lambda: hccl.all_reduce(a0, b0, 65, FP32, SUM, c0, s0), para),           # past the buffer's end
        (lambda: hccl.all_reduce(a1, b0, 64, FP32, SUM, c0, s0), para),           # a buffer of another device
        (lambda: hccl.all_reduce(0, b0, 64, FP32, SUM, c0, s0), ptr),
        (lambda: hccl.all_reduce(a0, None, 64, FP32, SUM, c0, s0), ptr),
        (lambda: hccl.reduce_scatter(a0, b0, 64, FP32, SUM, c0, s0), para),       # send needs 2 x 64
        (lambda: hccl.all_gather(a0, b0, 64, FP32, c0, s0), para),                # recv needs 2 x 64
        (lambda: hccl.broadcast(a0, 64, FP32, 2, c0, s0), para),                  # bad root
        (lambda: hccl.broadcast(a0, 64, FP32, -1, c0, s0), para),
        (lambda: hccl.send(a0, 64, FP32, 2, c0, s0), para),                       # bad rank
        (lambda: hccl.send(a0, 64, FP32, 0, c0, s0), para),                       # to itself
        (lambda: hccl.recv(a0, 64, FP32, 5, c0, s0), para),
        (lambda: hccl.all_reduce(a0, b0, 64, FP32, SUM, None, s0), ptr),
    ]
    for i, (call, code) in enumerate(cases):
        assert _code(call) == code, f"case {i}"
    assert not _hccl_tasks([0, 1])   # nothing refused was enqueued


def test_a_call_that_disagrees_with_the_other_ranks_is_refused_at_that_call(fresh):
    comms, streams = _setup("atlas800t-a2", [0, 1])
    x = [_put(d, np.arange(64, dtype=np.float32)) for d in (0, 1)]
    hccl.all_reduce(x[0], x[0], 64, FP32, SUM, comms[0], streams[0])
    for wrong in [lambda: hccl.all_reduce(x[1], x[1], 32, FP32, SUM, comms[1], streams[1]),   # count
                  lambda: hccl.all_reduce(x[1], x[1], 64, hccl.HCCL_DATA_TYPE_INT32, SUM, comms[1], streams[1]),
                  lambda: hccl.all_reduce(x[1], x[1], 64, FP32, hccl.HCCL_REDUCE_MAX, comms[1], streams[1]),
                  lambda: hccl.broadcast(x[1], 64, FP32, 0, comms[1], streams[1])]:
        with pytest.raises(HcclError, match="rank 0's matching call") as e:
            wrong()
        assert e.value.code == hccl.HCCL_E_PARA
    hccl.all_reduce(x[1], x[1], 64, FP32, SUM, comms[1], streams[1])   # the matching call still runs
    hccl.send(x[0], 8, FP32, 1, comms[0], streams[0])
    assert _code(lambda: hccl.recv(x[1], 4, FP32, 0, comms[1], streams[1])) == hccl.HCCL_E_PARA
    hccl.recv(x[1], 8, FP32, 0, comms[1], streams[1])
    _sync([0, 1])
    np.testing.assert_array_equal(_get(x[1], np.dtype(np.float32), 64), 2 * np.arange(64, dtype=np.float32))
    hccl.comm_destroy(comms[0])
    assert _code(lambda: hccl.all_reduce(x[0], x[0], 64, FP32, SUM, comms[0], streams[0])) == hccl.HCCL_E_PARA
    assert _code(lambda: hccl.comm_destroy(comms[0])) == hccl.HCCL_E_PARA


def test_a_collective_another_rank_never_joins_times_out_at_synchronize(fresh):
    """On hardware the synchronize would hang until its timeout; here it says so at once."""
    comms, streams = _setup("atlas800t-a2", [0, 1])
    buf = _put(0, np.ones(16, np.float32))
    acl.set_device(0)
    hccl.all_reduce(buf, buf, 16, FP32, SUM, comms[0], streams[0])   # rank 1 never calls
    with pytest.raises(acl.AclError) as e:
        acl.synchronize_stream(streams[0])
    assert e.value.code == 507046 and "can never finish" in str(e.value)


@pytest.mark.parametrize("system,p,n", [("dgx-a100", 2, 32), ("dgx-a100", 8, MiB), ("atlas800t-a2", 8, MiB),
                                        ("atlas800-910", 4, 64 * 1024)])
def test_collective_us_is_what_a_real_all_reduce_takes(fresh, system, p, n):
    """``hccl.collective_us`` (no data emulated) times what a real call takes once every rank is there."""
    devices = list(range(p))
    comms, streams = _setup(system, devices)
    bufs = [_put(r, np.ones(n // 4, np.float32)) for r in devices]
    for r in devices:
        hccl.all_reduce(bufs[r], bufs[r], n // 4, FP32, SUM, comms[r], streams[r])
    _sync(devices)
    assert hccl.collective_us("all_reduce", n, system, devices) == pytest.approx(_took(devices), rel=1e-9)
    with pytest.raises(ValueError, match="unknown collective"):
        hccl.collective_us("all_to_all", n, system, devices)
