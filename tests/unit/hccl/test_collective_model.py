"""A collective's fixed cost, its protocol efficiency and its bandwidth ramp (dgx-a100's
collective model), switch ports, and collectives that do not depend on ACL peer access."""

from __future__ import annotations

import numpy as np
import pytest

from graphexec import acl, hccl
from graphexec.runtime.systems import load_system

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
FP32, SUM = hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM


def _ring_formula(n: int, p: int) -> float:
    """dgx-a100's ring all-reduce by hand: fixed + 2(p-1) steps, each the link latency plus a
    chunk of n/p (and one 512 KiB slice while the pipeline fills, at most the chunk) over
    300 GB/s at 77.6% payload."""
    s = load_system("dgx-a100")
    c = s.collectives
    assert c is not None and (c.fixed_us, c.efficiency, c.slice_bytes) == (6.14, 0.776, 512 * KiB)
    chunk = n / p
    step = 2.0 + (chunk + min(chunk, 512 * KiB)) / 0.776 / 300e3
    return 6.14 + 2 * (p - 1) * step


@pytest.mark.parametrize("n", [32, MiB, GiB])
@pytest.mark.parametrize("p", [2, 8])
def test_all_reduce_time_is_the_documented_formula(n, p):
    assert hccl.collective_us("all_reduce", n, "dgx-a100", list(range(p))) == pytest.approx(_ring_formula(n, p))


def test_bus_bandwidth_ramps_up_with_the_message_size():
    def busbw(n: int) -> float:
        return n / hccl.collective_us("all_reduce", n, "dgx-a100") * 2 * 7 / 8 / 1e3

    ramp = [busbw(n) for n in (KiB, MiB, 16 * MiB, 256 * MiB, 4 * GiB)]
    assert ramp == sorted(ramp) and ramp[0] < 1 and ramp[1] < 0.5 * ramp[-1] < ramp[2] < 0.8 * ramp[-1]
    big = ramp[-1]
    assert big == pytest.approx(232.3, rel=0.01)        # FlagPerf's DGX A100 measurement


def test_a_32_byte_all_reduce_on_two_gpus_costs_its_fixed_cost_and_two_latencies():
    assert hccl.collective_us("all_reduce", 32, "dgx-a100", [0, 1]) == pytest.approx(10.14, rel=0.01)


def test_switch_ports_are_full_duplex_and_shared_by_each_device():
    s = load_system("dgx-a100")
    assert s.link(0, 1).channels == ("nvlink:out0", "nvlink:in1")
    assert s.link(1, 0).channels == ("nvlink:out1", "nvlink:in0")   # the other direction: other ports
    assert s.link(0, 2).channels[0] == s.link(0, 1).channels[0]     # one egress port for all of 0's peers


def _all_reduce_us(enable_peers: bool) -> float:
    acl.init(system="atlas800t-a2")
    p, n = 8, 4 * MiB
    if enable_peers:
        for a in range(p):
            acl.set_device(a)
            for b in (b for b in range(p) if b != a):
                acl.device_enable_peer_access(b)
    comms = hccl.comm_init_all(p, list(range(p)))
    bufs, streams = [], []
    for r in range(p):
        acl.set_device(r)
        streams.append(acl.create_stream())
        bufs.append(acl.malloc(n))
        acl.view(bufs[r], np.float32, (n // 4,))[...] = 1.0
    for r in range(p):
        hccl.all_reduce(bufs[r], bufs[r], n // 4, FP32, SUM, comms[r], streams[r])
    for r in range(p):
        acl.set_device(r)
        acl.synchronize_device()
    task = [t for t in acl.emulated_device(0).timeline() if t["kind"] == "hccl"][0]
    return task["end"] - task["start"]


def test_collectives_do_not_depend_on_acl_peer_access(fresh):
    """HCCL sets up its own links: enabling peer access changes nothing."""
    without = _all_reduce_us(False)
    acl.finalize()
    assert _all_reduce_us(True) == without
