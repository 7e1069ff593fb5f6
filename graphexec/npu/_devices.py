"""Devices: how many, which is current, and starting over (torch.npu's device calls)."""

from __future__ import annotations

from typing import Any

from graphexec.errors import DeviceError
from graphexec.npu import _launch
from graphexec.npu._state import STATE, parse_device
from graphexec.runtime.hazards import Hazard
from graphexec.runtime.profiles import DeviceProfile
from graphexec.runtime.systems import SystemProfile


def init(device: str | DeviceProfile = "ascend910", device_count: int = 1, system: str | SystemProfile | None = None,
         check_hazards: bool = False) -> None:
    """Start eager mode afresh: ``device_count`` cards of profile ``device``, or the cards of
    ``system`` (a server: one clock, peer links); ``check_hazards`` records byte ranges and
    reports unsynchronized accesses (``npu.hazards()``). Tensors and streams made before belong
    to the old cards, which are reset."""
    for index in list(STATE.cards):
        STATE.reset(index)
    _launch.FAULTS.clear()
    STATE.configure(device, device_count, system, check_hazards)


def device_count() -> int:
    return STATE.count


def current_device() -> int:
    return STATE.current_device


def set_device(device: Any) -> None:
    index = parse_device(device)
    if index is None:
        raise DeviceError("set_device needs an npu device, not the cpu")
    STATE.card(index)   # checks it exists
    STATE.current_device = index


def reset_device(device: Any = None) -> None:
    """Wait for the card, then free its memory and retire its streams (aclrtResetDevice);
    its next use opens it afresh. Its old tensors and streams are refused from now on."""
    index = parse_device(device)
    if index is None:
        raise DeviceError("reset_device needs an npu device, not the cpu")
    STATE.reset(index)


def is_available() -> bool:
    return True


def get_device_name(device: Any = None) -> str:
    return STATE.card(parse_device(device)).device.profile.name


def hazards(device: Any = None) -> list[Hazard]:
    """Races the hazard checker found on the device (``npu.init(check_hazards=True)``)."""
    return STATE.card(parse_device(device)).device.hazards


def timeline(device: Any = None) -> list[dict[str, Any]]:
    """Every finished task of the device: name, kind, stream, enqueue/start/end (us), cores."""
    return STATE.card(parse_device(device)).device.timeline()
