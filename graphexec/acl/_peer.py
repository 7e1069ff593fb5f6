"""ACL calls between cards: peer access, topology, and copies from one card to another.

Only the devices of ``acl.init(system=...)`` are joined by links (the system profile's);
a copy between two of them runs over the direct link once the issuing card has enabled
peer access to the other, and is staged through the host otherwise. Either way it is a
task on the issuing stream's copy engine, so it overlaps compute on other streams.
"""

from __future__ import annotations

from typing import Any

from graphexec.acl.state import STATE, api
from graphexec.runtime import codes
from graphexec.runtime.codes import acl_error, invalid_param, invalid_value
from graphexec.runtime.device import Device
from graphexec.runtime.stream import Stream


def _pair(device_id: Any, peer_device_id: Any) -> tuple[int, int]:
    a, b = STATE.check_device_id(device_id), STATE.check_device_id(peer_device_id)
    if a == b:
        raise invalid_param(f"device {a} and its peer must be two devices")
    return a, b


@api
def device_can_access_peer(device_id: int, peer_device_id: int) -> bool:
    """aclrtDeviceCanAccessPeer: whether ``device_id`` may map ``peer_device_id``'s memory."""
    STATE.require_init()
    a, b = _pair(device_id, peer_device_id)
    return STATE.server is not None and STATE.server.system.peer_capable(a, b)


@api
def device_enable_peer_access(peer_device_id: int, flags: int = 0) -> None:
    """aclrtDeviceEnablePeerAccess: the current device's copies to and from the peer take
    the direct link (flags must be 0)."""
    ctx = STATE.context()
    if flags != 0:
        raise invalid_param(f"flags must be 0, got {flags!r}")
    a, b = _pair(ctx.device_id, peer_device_id)
    server = STATE.require_server()
    if not server.system.peer_capable(a, b):
        link = server.system.link(a, b)
        raise acl_error(codes.RT_FEATURE_NOT_SUPPORT, f"device {a} cannot reach device {b} as a peer "
                        f"(they are joined by {link.kind})")
    server.peers.add((a, b))


@api
def device_disable_peer_access(peer_device_id: int) -> None:
    """aclrtDeviceDisablePeerAccess: copies with the peer are staged through the host again."""
    ctx = STATE.context()
    a, b = _pair(ctx.device_id, peer_device_id)
    server = STATE.require_server()
    if (a, b) not in server.peers:
        raise invalid_value(f"device {a} has not enabled peer access to device {b}")
    server.peers.discard((a, b))


@api
def get_devices_topo(device_a: int, device_b: int) -> int:
    """aclrtGetDevicesTopo: how two cards are joined, as a DEVICES_TOPO_* value."""
    STATE.require_init()
    a, b = _pair(device_a, device_b)
    return STATE.require_server().system.topo(a, b)


def peer_copy(sdev: Device, ddev: Device, sbytes: Any, dbytes: Any, reads: list, writes: list,
              stream: Stream | None) -> tuple[Device, Stream]:
    """Launch a copy from ``sdev``'s bytes to ``ddev``'s on ``stream`` (the current
    default stream when None), which must belong to one of the two; returns where it went."""
    server = STATE.require_server()
    if stream is None:
        ctx = STATE.context()
        dev = STATE.entry_of(ctx.device_id).device
        s = ctx.default_stream
    else:
        dev, s = STATE.stream(stream)
    if dev is not sdev and dev is not ddev:
        raise acl_error(codes.RT_STREAM_CONTEXT, f"a copy from device {sdev.id} to device {ddev.id} runs on a "
                        f"stream of one of them, not of device {dev.id}")
    task = server.copy_task(s, dev.id, sdev.id, ddev.id, len(sbytes), sbytes.copy,
                            lambda data: dbytes.__setitem__(Ellipsis, data), reads, writes)
    dev.launch(task)
    return dev, s
