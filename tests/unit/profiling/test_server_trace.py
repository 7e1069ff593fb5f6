"""A server's trace: one process per card (pid = device id), copies between cards with
their link."""

from __future__ import annotations

import numpy as np
import pytest

from graphexec import acl
from graphexec.acl.state import STATE
from graphexec.profiling.trace import server_trace


@pytest.fixture
def server():
    if STATE.initialized:
        acl.finalize()
    acl.init(system="atlas800-910")
    yield acl
    acl.finalize()


def test_each_card_is_a_process_and_a_peer_copy_names_its_link(server):
    n = 1 << 20
    acl.set_device(1)
    dst = acl.malloc(n)
    acl.set_device(0)
    src = acl.malloc(n)
    acl.memcpy(src, n, np.ones(n, np.uint8), n, acl.MEMCPY_HOST_TO_DEVICE)
    acl.device_enable_peer_access(1)
    s = acl.create_stream()
    acl.memcpy_async(dst, n, src, n, acl.MEMCPY_DEVICE_TO_DEVICE, s)
    acl.launch_kernel(lambda p: None, 8, None, src, flops=1e9, unit="vector")
    acl.synchronize_device()
    trace = server_trace(acl.emulated_devices())
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names[0].startswith("device 0") and names[1].startswith("device 1") and names[2] == "host"
    (copy,) = [e for e in events if e.get("cat") == "memcpy" and e["args"].get("link")]
    assert copy["pid"] == 0 and copy["tid"] == s.id
    hta = {"stream", "device", "correlation"}   # HTA's: the tid, the card, the launch arrow's id
    assert {k: v for k, v in copy["args"].items() if k not in hta} == \
        {"bytes": float(n), "kind": "p2p:HCCS", "link": "HCCS", "src": 0, "dst": 1}
    assert copy["args"]["stream"] == s.id and copy["args"]["device"] == 0
    assert any(e.get("cat") == "kernel" and e["pid"] == 0 for e in events)
    flows = [e["id"] for e in events if e.get("cat") == "flow" and e["ph"] == "s"]
    assert len(flows) == len(set(flows))
