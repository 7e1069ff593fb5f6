"""A synchronize returns ``sync_return_us`` after what it waits on has finished (the host's
wake-up), so the next launch starts that much later; a profile without it returns at once."""

from __future__ import annotations

import pytest

from graphexec.runtime.device import Device
from graphexec.runtime.profiles import load_profile
from graphexec.runtime.sim_task import DeviceTask


def _device(sync: float | None) -> Device:
    p = load_profile("ascend910").model_copy(update={"sync_return_us": sync, "kernels": None})
    return Device(p)


def _kernel(dev: Device, us: float) -> DeviceTask:
    flops = us * dev.profile.unit_rate("vector", "float32")   # one block of ``us`` at the peak rate
    return dev.launch(DeviceTask("kernel", dev.default_stream, "k", "vector", 1, flops, 0.0, "float32"))


@pytest.mark.parametrize("how", ["device", "stream", "event"])
def test_the_host_wakes_sync_return_us_after_the_work_ends(how):
    times = {}
    for sync in (None, 10.0):
        dev = _device(sync)
        task = _kernel(dev, 100.0)
        if how == "device":
            dev.synchronize_device()
        elif how == "stream":
            dev.synchronize_stream(dev.default_stream)
        else:
            ev = dev.create_event()
            dev.record_event(ev, dev.default_stream)
            dev.synchronize_event(ev)
        after = _kernel(dev, 1.0)
        dev.synchronize_device()
        times[sync] = (task.end_t, after.start_t)
    (end0, next0), (end1, next1) = times[None], times[10.0]
    assert end0 == end1
    # the next kernel is launched by the host once it wakes: launch cost + task overhead after that
    assert next1 - next0 == pytest.approx(10.0)


def test_profiles_say_where_sync_return_comes_from():
    v100 = load_profile("nvidia-v100")
    assert v100.sync_return_us == 23.0 and "cudaDeviceSynchronize" in v100.sources["sync_return_us"]
    assert load_profile("ascend910").sync_return_us is None
