"""The runtime stays usable after a fault, and bad costs are refused at the boundary
(issue 21, classes 6 and 7): a NaN, infinite or negative cost is one line (it used to hang
or divide by zero), a kernel that raises (even KeyboardInterrupt) leaves its stream and the
clock working, malloc past what the host can back and an object-dtype view are ACL errors."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec as gx
from graphexec import acl
from graphexec.errors import OutOfMemoryError
from graphexec.runtime.profiles import load_profile


@pytest.fixture
def dev(fresh):
    acl.init()
    acl.set_device(0)
    return acl.create_stream()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, "many"])
@pytest.mark.parametrize("key", ["flops", "bytes"])
def test_bad_launch_costs_are_one_line(dev, key, bad):
    with pytest.raises(acl.AclError) as err:
        acl.launch_kernel(lambda: None, 1, dev, **{key: bad})
    assert err.value.code == 100000 and "\n" not in str(err.value) and key in str(err.value)
    acl.launch_kernel(lambda: None, 1, dev, **{key: 1e6})   # the stream is fine afterwards
    acl.synchronize_stream(dev)


@pytest.mark.parametrize("fault", [KeyboardInterrupt, ZeroDivisionError])
def test_the_device_recovers_after_a_kernel_raises(dev, fault):
    def bad():
        raise fault()

    acl.launch_kernel(bad, 1, dev)
    with pytest.raises((fault, acl.AclError)):
        acl.synchronize_stream(dev)
    out = acl.malloc(16)
    acl.launch_kernel(lambda p: acl.view(p, np.float32, (4,)).__setitem__(..., 7.0), 1, dev, out)
    acl.synchronize_stream(dev)
    host = np.zeros(4, np.float32)
    acl.memcpy(host, 16, out, 16, acl.MEMCPY_DEVICE_TO_HOST)
    assert host.tolist() == [7.0] * 4


def test_device_memory_the_host_cannot_back_is_out_of_memory(fresh):
    acl.init(profile=load_profile("ascend910").model_copy(update={"hbm_capacity_bytes": 1 << 60}))
    acl.set_device(0)
    with pytest.raises(OutOfMemoryError, match="the host cannot back that much emulated device memory"):
        acl.malloc(1 << 58)   # within this HBM: the host runs out, and it is the device's error, not MemoryError
    assert acl.malloc(64)


def test_an_object_view_is_refused(dev):
    with pytest.raises(acl.AclError, match="device memory holds bytes, not object values"):
        acl.view(acl.malloc(64), object, (8,))


@pytest.mark.parametrize("flops,why", [(float("nan"), "flops must be finite and >= 0, got nan"),
                                       (-3, "flops must be finite and >= 0, got -3"),
                                       ("x", "flops must be a number, got 'x'")])
def test_a_custom_cost_rule_returning_a_bad_number_is_a_graph_error(flops, why):
    @gx.kernel("TestBadFlops", shape="same", cost=lambda c: {"flops": flops})
    def f(x):
        return x

    b = gx.GraphBuilder("costs", opset=17)
    b.output(b.TestBadFlops(b.input("x", "float32", [2])))
    with pytest.raises(gx.GraphError) as err:
        gx.Session(b.build()).compile({"x": np.ones(2, np.float32)})
    assert str(err.value) == f"cost rule of graphexec.custom::TestBadFlops returned {why}"
