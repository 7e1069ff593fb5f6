"""Many cards at the ACL level: a system profile's devices share one clock and its links;
copies between cards run over the link (peer access on) or through the host."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphexec import acl
from graphexec.errors import AclError
from graphexec.runtime.systems import load_system

MiB = 1024 * 1024


def _on(device: int, arr: np.ndarray) -> int:
    acl.set_device(device)
    ptr = acl.malloc(arr.nbytes)
    acl.memcpy(ptr, arr.nbytes, arr, arr.nbytes, acl.MEMCPY_HOST_TO_DEVICE)
    return ptr


def _read(device: int, ptr: int, like: np.ndarray) -> np.ndarray:
    acl.set_device(device)
    out = np.empty_like(like)
    acl.memcpy(out, out.nbytes, ptr, out.nbytes, acl.MEMCPY_DEVICE_TO_HOST)
    return out


def _copy_us(fresh, system: str, a: int, b: int, peer: bool, nbytes: int = 64 * MiB) -> tuple[float, dict]:
    fresh.init(system=system)
    data = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
    src = _on(a, data)
    dst = _on(b, np.zeros_like(data))
    acl.set_device(a)
    if peer:
        acl.device_enable_peer_access(b)
    stream = acl.create_stream()
    acl.memcpy_async(dst, nbytes, src, nbytes, acl.MEMCPY_DEVICE_TO_DEVICE, stream)
    acl.synchronize_stream(stream)
    (task,) = [t for t in acl.emulated_device(a).timeline() if t["kind"] == "memcpy" and t["stream"] == stream.id]
    np.testing.assert_array_equal(_read(b, dst, data), data)
    return task["end"] - task["start"], task


@pytest.mark.parametrize("system,a,b", [("atlas800-910", 0, 1), ("atlas800-910", 1, 6), ("atlas800t-a2", 2, 7),
                                        ("atlas300i-duo", 0, 1)])
def test_a_peer_copy_takes_bytes_over_bandwidth_plus_latency(fresh, system, a, b):
    link = load_system(system).link(a, b)
    took, task = _copy_us(fresh, system, a, b, peer=load_system(system).peer_capable(a, b))
    if not load_system(system).peer_capable(a, b):
        pytest.skip(f"{system}: devices {a} and {b} are not peers")
    expected = 64 * MiB / (link.bandwidth_gbps * 1e3) + link.latency_us
    assert took == pytest.approx(expected, rel=0.05)
    assert task["link"] == link.kind and task["bytes"] == 64 * MiB


def test_without_peer_access_the_copy_is_staged_through_the_host_and_slower(fresh):
    direct, _ = _copy_us(fresh, "atlas800-910", 0, 1, peer=True)
    fresh.finalize()
    staged, task = _copy_us(fresh, "atlas800-910", 0, 1, peer=False)
    system = load_system("atlas800-910")
    up, down = system.host_link(0), system.host_link(1)
    expected = sum(64 * MiB / (h.bandwidth_gbps * 1e3) + h.latency_us for h in (up, down))
    assert staged == pytest.approx(expected, rel=0.05)
    assert staged > direct and task["link"] == "host"


def test_two_copies_over_one_link_split_its_bandwidth(fresh):
    """Cross-group copies on atlas800-910 share the one PCIe path between the groups."""
    fresh.init(system="atlas800-910")
    n = 16 * MiB
    data = np.arange(n, dtype=np.uint8)
    pairs = [(0, 4), (1, 5)]
    bufs = [(_on(a, data), _on(b, np.zeros_like(data))) for a, b in pairs]
    streams = []
    for (a, b), (src, dst) in zip(pairs, bufs):
        acl.set_device(a)
        acl.device_enable_peer_access(b)
        s = acl.create_stream()
        acl.memcpy_async(dst, n, src, n, acl.MEMCPY_DEVICE_TO_DEVICE, s)
        streams.append((a, s))
    for a, s in streams:
        acl.set_device(a)
        acl.synchronize_stream(s)
    link = load_system("atlas800-910").link(0, 4)
    alone = n / (link.bandwidth_gbps * 1e3) + link.latency_us
    ends = [max(t["end"] for t in acl.emulated_device(a).timeline() if t["kind"] == "memcpy" and t["stream"] == s.id)
            for a, s in streams]
    starts = [min(t["start"] for t in acl.emulated_device(a).timeline() if t["kind"] == "memcpy"
                  and t["stream"] == s.id) for a, s in streams]
    assert max(ends) - min(starts) == pytest.approx(2 * n / (link.bandwidth_gbps * 1e3) + link.latency_us, rel=0.05)
    assert max(ends) - min(starts) > 1.5 * alone
    for (_, b), (_, dst) in zip(pairs, bufs):
        np.testing.assert_array_equal(_read(b, dst, data), data)


def test_a_peer_copy_overlaps_compute_on_another_stream(fresh):
    fresh.init(system="atlas800t-a2")
    n = 32 * MiB
    src, dst = _on(0, np.ones(n, np.uint8)), _on(1, np.zeros(n, np.uint8))
    acl.set_device(0)
    acl.device_enable_peer_access(1)
    copy_stream, compute = acl.create_stream(), acl.create_stream()
    x = acl.malloc(4 * MiB)
    acl.memcpy_async(dst, n, src, n, acl.MEMCPY_DEVICE_TO_DEVICE, copy_stream)
    acl.launch_kernel(lambda p: None, 32, compute, x, flops=5e11, unit="cube")
    acl.synchronize_device()
    tl = acl.emulated_device(0).timeline()
    (copy,) = [t for t in tl if t["kind"] == "memcpy" and t["stream"] == copy_stream.id]
    (kern,) = [t for t in tl if t["kind"] == "kernel" and t["stream"] == compute.id]
    assert kern["start"] < copy["end"] and copy["start"] < kern["end"]


def test_topology_and_peer_queries(fresh):
    fresh.init(system="atlas800-910")
    assert acl.get_device_count() == 8
    assert acl.get_devices_topo(0, 1) == acl.DEVICES_TOPO_HCCS
    assert acl.get_devices_topo(0, 5) == load_system("atlas800-910").topo(0, 5)
    assert acl.device_can_access_peer(0, 1)
    assert acl.emulated_system().link(0, 1).kind == "HCCS"
    assert acl.emulated_system().link(3, 4).kind == "PCIe"


@pytest.mark.parametrize("call,code", [
    (lambda: acl.device_can_access_peer(0, 8), 107001),
    (lambda: acl.device_can_access_peer(1, 1), 100000),
    (lambda: acl.get_devices_topo(0, -1), 107001),
    (lambda: acl.device_enable_peer_access(0), 100000),
    (lambda: acl.device_enable_peer_access(9), 107001),
    (lambda: acl.device_enable_peer_access(1, flags=1), 100000),
    (lambda: acl.device_disable_peer_access(1), 107000),
])
def test_peer_calls_refuse_bad_devices_with_the_real_codes(fresh, call, code):
    fresh.init(system="atlas800-910")
    acl.set_device(0)
    with pytest.raises(AclError) as e:
        call()
    assert e.value.code == code


def test_copy_errors_between_cards(fresh):
    fresh.init(system="atlas800-910")
    a, b = _on(0, np.zeros(1024, np.uint8)), _on(1, np.zeros(1024, np.uint8))
    acl.set_device(2)
    other = acl.create_stream()
    with pytest.raises(AclError) as e:   # a stream of a third device
        acl.memcpy_async(b, 1024, a, 1024, acl.MEMCPY_DEVICE_TO_DEVICE, other)
    assert e.value.code == 107003
    acl.set_device(0)
    with pytest.raises(AclError) as e:   # past the end of the allocation
        acl.memcpy_async(b, 4096, a, 4096, acl.MEMCPY_DEVICE_TO_DEVICE, None)
    assert e.value.code in (100000, 107000)


def test_independent_devices_share_no_links(fresh):
    fresh.init(device_count=2)
    a, b = _on(0, np.zeros(64, np.uint8)), _on(1, np.zeros(64, np.uint8))
    assert not acl.device_can_access_peer(0, 1)
    with pytest.raises(AclError, match="share no links") as e:
        acl.memcpy(b, 64, a, 64, acl.MEMCPY_DEVICE_TO_DEVICE)
    assert e.value.code == 207000


def test_an_oom_on_one_card_leaves_the_others_alone(fresh):
    fresh.init(system="atlas300i-duo")
    acl.set_device(1)
    keep = acl.malloc(1024)
    acl.set_device(0)
    total = acl.get_mem_info()[1]
    with pytest.raises(AclError) as e:
        acl.malloc(total + 1)
    assert e.value.code == 207001
    acl.set_device(1)
    free, total1 = acl.get_mem_info()
    assert total1 - free >= 1024 and keep


def test_a_peer_that_cannot_be_reached_is_refused_and_copies_go_through_the_host(fresh, tmp_path):
    text = (Path(__file__).resolve().parents[3] / "graphexec/runtime/system_data/atlas300i-duo.yaml").read_text()
    path = tmp_path / "nopeer.yaml"
    path.write_text(text.replace("name: atlas300i-duo", "name: nopeer").replace("peer_access: true",
                                                                                 "peer_access: false"))
    fresh.init(system=str(path))
    assert not acl.device_can_access_peer(0, 1)
    acl.set_device(0)
    with pytest.raises(AclError, match="cannot reach device 1") as e:
        acl.device_enable_peer_access(1)
    assert e.value.code == 207000
    data = np.arange(4096, dtype=np.uint8)
    src, dst = _on(0, data), _on(1, np.zeros_like(data))
    acl.set_device(0)
    acl.memcpy(dst, 4096, src, 4096, acl.MEMCPY_DEVICE_TO_DEVICE)
    np.testing.assert_array_equal(_read(1, dst, data), data)
    (copy,) = [t for t in acl.emulated_device(0).timeline() if t["link"] is not None]
    assert copy["link"] == "host"
