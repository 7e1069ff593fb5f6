"""The collective calls: each rank's call enqueues its part; numpy computes the result.

Every call checks its arguments on the spot (HcclError with the HcclResult code), then
enqueues a task of kind "hccl" on the rank's stream with the byte ranges it reads and
writes (the hazard checker sees them, so a reader on another stream needs an event). The
result is computed from every rank's device memory when the collective starts and lands
in each rank's buffer when it ends, like a kernel's writes.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from graphexec.acl.state import api
from graphexec.errors import AclError
from graphexec.hccl import _algo
from graphexec.hccl._comm import Comm, Op, Part, buffer, live_comm, rank_stream, read
from graphexec.hccl._types import (
    HCCL_E_PARA,
    HCCL_E_RUNTIME,
    OP_NAMES,
    check_count,
    check_dtype,
    check_op,
    check_rank,
    hccl_error,
    reduce,
)
from graphexec.runtime.device import Device
from graphexec.runtime.sim import DeviceTask
from graphexec.runtime.stream import Stream

Range = tuple[int, int, str]
Compute = Callable[[dict[int, Part]], None]


def _writer(dev: Device, rng: Range, data: np.ndarray) -> Callable[[], None]:
    ptr, n, _ = rng

    def write() -> None:
        dev.memory.bytes_at(ptr, n)[...] = data.reshape(-1).view(np.uint8)

    return write


def _ins(parts: dict[int, Part], dtype: np.dtype) -> list[np.ndarray]:
    return [read(p, dtype) for _, p in sorted(parts.items())]


def _describe(signature: tuple) -> str:
    return f"{signature[0]}(" + ", ".join(f"{k}={v}" for k, v in signature[1:]) + ")"


def _enqueue(comm: Comm, stream: Stream | None, key: tuple, signature: tuple, n: int,
             reads: Callable[[Device], list[Range]], writes: Callable[[Device], list[Range]],
             make: Callable[[], Op], name: str | None = None) -> Op:
    """Check the stream and buffers, match the call with the other ranks', launch the part."""
    dev, s = rank_stream(comm, stream)
    rd, wr = reads(dev), writes(dev)
    group = comm.group
    op = group.open.get(key)
    if op is not None and op.signature != signature:
        other = min(op.parts)
        raise hccl_error(HCCL_E_PARA, f"rank {comm.rank} calls {_describe(signature)}, but rank {other}'s "
                                      f"matching call was {_describe(op.signature)}")
    op = op or make()
    meta = {"link": _algo.link_kinds(group.server.system, op.devices, op.plan) or None, "bytes": n,
            "algorithm": op.plan.algorithm, "rank": comm.rank}
    task = DeviceTask("hccl", s, name or op.name, unit="", bytes=float(n), reads=rd, writes=wr, meta=meta)
    part = Part(op, comm.rank, dev, task)
    task.driver, task.end_fn = part, part.land
    try:
        dev.launch(task)
    except AclError as exc:
        raise hccl_error(HCCL_E_RUNTIME, f"{op.name} on rank {comm.rank}: {exc}") from exc
    op.parts[comm.rank] = part
    group.open[key] = op
    if len(op.parts) == op.needed:
        del group.open[key]
    return op


def _collective(comm: Comm, stream: Stream | None, kind: str, signature: tuple, n: int, dtype: np.dtype,
                reads: Callable[[Device], list[Range]], writes: Callable[[Device], list[Range]],
                compute: Compute, root: int = 0) -> None:
    group = comm.group
    p = len(group.devices)

    def make() -> Op:
        profile = group.server.system.device_profile
        gamma = _algo.reduce_us_per_byte(profile, dtype)
        plan = _algo.plan(kind, group.algorithm, p, float(n), gamma, 1.0 / profile.copy_bytes_per_us("d2d"), root)
        return Op(signature[0], signature, group.devices, group.server, plan, compute, p)

    _enqueue(comm, stream, ("coll", comm.calls), signature, n, reads, writes, make)
    comm.calls += 1


def _reducing(dtype: np.dtype, op: int, slice_of: Callable[[int], slice] | None = None) -> Compute:
    def compute(parts: dict[int, Part]) -> None:
        out = reduce(_ins(parts, dtype), op)
        for r, part in parts.items():
            part.out = _writer(part.device, part.task.writes[0], out if slice_of is None else out[slice_of(r)])
    return compute


@api
def all_reduce(send_buf: int, recv_buf: int, count: int, data_type: int, op: int, comm: Comm,
               stream: Stream | None) -> None:
    """HcclAllReduce: every rank's ``recv_buf`` gets the reduction of all ranks' ``send_buf``."""
    c, count, dtype, op = live_comm(comm), check_count(count), check_dtype(data_type), check_op(op)
    n = count * dtype.itemsize
    sig = ("HcclAllReduce", ("count", count), ("dtype", dtype.name), ("op", OP_NAMES[op]))
    _collective(c, stream, "all_reduce", sig, n, dtype, lambda d: [buffer(d, send_buf, n, "send_buf")],
                lambda d: [buffer(d, recv_buf, n, "recv_buf")], _reducing(dtype, op))


@api
def reduce_scatter(send_buf: int, recv_buf: int, recv_count: int, data_type: int, op: int, comm: Comm,
                   stream: Stream | None) -> None:
    """HcclReduceScatter: rank r's ``recv_buf`` gets block r (``recv_count`` elements) of the
    reduction of all ranks' ``send_buf`` (p blocks each)."""
    c, count = live_comm(comm), check_count(recv_count, "recv_count")
    dtype, op = check_dtype(data_type), check_op(op)
    p = len(c.group.devices)
    block = count * dtype.itemsize
    sig = ("HcclReduceScatter", ("recv_count", count), ("dtype", dtype.name), ("op", OP_NAMES[op]))
    _collective(c, stream, "reduce_scatter", sig, p * block, dtype,
                lambda d: [buffer(d, send_buf, p * block, "send_buf")],
                lambda d: [buffer(d, recv_buf, block, "recv_buf")],
                _reducing(dtype, op, lambda r: slice(r * count, (r + 1) * count)))


@api
def all_gather(send_buf: int, recv_buf: int, send_count: int, data_type: int, comm: Comm,
               stream: Stream | None) -> None:
    """HcclAllGather: every rank's ``recv_buf`` gets all ranks' ``send_buf`` in rank order."""
    c, count, dtype = live_comm(comm), check_count(send_count, "send_count"), check_dtype(data_type)
    p = len(c.group.devices)
    block = count * dtype.itemsize

    def compute(parts: dict[int, Part]) -> None:
        out = np.concatenate(_ins(parts, dtype))
        for part in parts.values():
            part.out = _writer(part.device, part.task.writes[0], out)

    sig = ("HcclAllGather", ("send_count", count), ("dtype", dtype.name))
    _collective(c, stream, "all_gather", sig, p * block, dtype, lambda d: [buffer(d, send_buf, block, "send_buf")],
                lambda d: [buffer(d, recv_buf, p * block, "recv_buf")], compute)


@api
def broadcast(buf: int, count: int, data_type: int, root: int, comm: Comm, stream: Stream | None) -> None:
    """HcclBroadcast: every rank's ``buf`` gets the root's."""
    c, count, dtype = live_comm(comm), check_count(count), check_dtype(data_type)
    root = check_rank(root, len(c.group.devices), "root")
    n = count * dtype.itemsize
    mine = (lambda d: [buffer(d, buf, n, "buf")])
    none: Callable[[Device], list[Range]] = lambda d: []

    def compute(parts: dict[int, Part]) -> None:
        src = parts[root]
        data = read(src, np.dtype(np.uint8)).copy()
        for r, part in parts.items():
            if r != root:
                part.out = _writer(part.device, part.task.writes[0], data)

    sig = ("HcclBroadcast", ("count", count), ("dtype", dtype.name), ("root", root))
    is_root = c.rank == root
    _collective(c, stream, "broadcast", sig, n, dtype, mine if is_root else none, none if is_root else mine,
                compute, root)


def _p2p(buf: Any, count: Any, data_type: Any, peer: Any, comm: Any, stream: Stream | None, sending: bool) -> None:
    c, count, dtype = live_comm(comm), check_count(count), check_dtype(data_type)
    group = c.group
    peer = check_rank(peer, len(group.devices), "dest_rank" if sending else "src_rank")
    if peer == c.rank:
        raise hccl_error(HCCL_E_PARA, f"rank {c.rank} cannot {'send to' if sending else 'receive from'} itself")
    n = count * dtype.itemsize
    src, dst = (c.rank, peer) if sending else (peer, c.rank)
    counter = c.sent if sending else c.received
    k = counter.get(peer, 0)
    mine = (lambda d: [buffer(d, buf, n, "buf")])
    none: Callable[[Device], list[Range]] = lambda d: []

    def compute(parts: dict[int, Part]) -> None:
        data = read(parts[src], np.dtype(np.uint8)).copy()
        parts[dst].out = _writer(parts[dst].device, parts[dst].task.writes[0], data)

    def make() -> Op:
        plan = _algo.Plan("p2p", (_algo.Step(((0, 1, float(n)),)),))
        devices = (group.devices[src], group.devices[dst])
        return Op(f"HcclSend/Recv {src}->{dst}", sig, devices, group.server, plan, compute, 2)

    sig = ("HcclSend/HcclRecv", ("src", src), ("dst", dst), ("count", count), ("dtype", dtype.name))
    _enqueue(c, stream, ("p2p", src, dst, k), sig, n, mine if sending else none, none if sending else mine,
             make, "HcclSend" if sending else "HcclRecv")
    counter[peer] = k + 1


@api
def send(buf: int, count: int, data_type: int, dest_rank: int, comm: Comm, stream: Stream | None) -> None:
    """HcclSend: ``count`` elements of ``buf`` to ``dest_rank``, whose matching recv gets them."""
    _p2p(buf, count, data_type, dest_rank, comm, stream, True)


@api
def recv(buf: int, count: int, data_type: int, src_rank: int, comm: Comm, stream: Stream | None) -> None:
    """HcclRecv: ``count`` elements from ``src_rank``'s matching send into ``buf``."""
    _p2p(buf, count, data_type, src_rank, comm, stream, False)
