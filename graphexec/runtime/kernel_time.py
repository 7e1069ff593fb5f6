"""A kernel's blocks and their time, as real kernels use the cores (not the peak roofline).

The cost rule counts a kernel's work in tiles (``kernels/cost.py``: 16x16 output fractals
on the cube, 32 KiB of output on the vector unit). The profile's ``kernels`` section says
how the device's kernels run them (``UnitKernels``):

- ``split`` tiles make one work item, the finest piece a kernel hands a block;
- CANN launches ``blocks = min(items, cores)`` (block dim never above the core count) and
  each block loops ``ceil(items / blocks)`` items, so a kernel with a few items more than
  a multiple of the cores pays a whole extra round (wave quantization);
- a block pays ``block_fixed_us`` once (start, tiling read, final sync) and
  ``item_fill_us`` per item (loading the first operands and draining the result: for a
  short K this fill rivals the item's compute);
- an item computes ``flops / items`` at ``efficiency`` x the unit's peak rate for the dtype
  (issue stalls, bank conflicts, the scalar unit's bookkeeping), or at its op class's
  ``op_efficiency`` where the profile gives one (an implicit-GEMM convolution does not
  reach what a plain GEMM does), times ``lone_efficiency``
  when a block has one item only: a core then holds no second item whose work overlaps
  the first one's loads (a GPU SM with one resident CTA hides no latency).

So ``block_us = block_fixed_us + ceil(items / blocks) * (flops / items / (peak * eff) + item_fill_us)``
and each block moves ``bytes / blocks`` through memory (the simulator's roofline shares
HBM among running blocks). A profile without ``kernels`` keeps the plain roofline: one
block per tile at the peak rate, no fixed cost. AI CPU kernels always do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from graphexec import _switch
from graphexec.runtime.profiles import DeviceProfile


def blocks(profile: DeviceProfile, unit: str, tiles: int) -> int:
    """The block dim a kernel of ``tiles`` cost tiles launches with on ``profile``."""
    tiles = tiles if tiles > 1 else 1
    km = profile.kernels
    if km is None or unit not in ("cube", "vector"):
        return tiles
    items = -(-tiles // getattr(km, unit).split)
    cores = profile.unit_cores(unit)
    return items if items < cores else cores


def op_class(meta: Any) -> str:
    """The op class of a kernel from its meta (a plan task, or a mapping holding one under
    "task"): its node's ONNX op type, a fused node's first op; "" when none is known."""
    task = meta.get("task") if isinstance(meta, Mapping) else meta
    node = getattr(task, "node", None)
    return node.op.split("+", 1)[0] if node is not None else ""


def group_padding(meta: Any, c0: int) -> float:
    """How many times its true MACs a grouped convolution costs on cube fractals of ``c0``
    channels: CANN's conv2d merges e groups into one block-diagonal weight, e = min(lcm(
    lcm(cin_g, c0) / cin_g, lcm(cout_g, c0) / cout_g), groups), and pads the merged channels
    to c0 (a depthwise conv on C0 = 16: 16x). 1 for a task with no ``conv_groups``."""
    task = meta.get("task") if isinstance(meta, Mapping) else meta
    geometry = getattr(task, "conv_groups", ())
    if not geometry:
        return 1.0
    g, cin, cout = geometry
    e = min(math.lcm(math.lcm(cin, c0) // cin, math.lcm(cout, c0) // cout), g)
    padded = -(-g // e) * (-(-e * cin // c0) * c0) * (-(-e * cout // c0) * c0)
    return padded / (g * cin * cout)


def kernel_time(profile: DeviceProfile, unit: str, dtype: str, flops: float, nbytes: float,
                tiles: int, meta: Any = None) -> tuple[int, float, float]:
    """(blocks, one block's compute time in us, one block's bytes) of a kernel; ``meta``
    (what ``op_class`` reads) picks the op class's efficiency where the profile has one."""
    tiles = tiles if tiles > 1 else 1
    peak = profile.unit_rate(unit, dtype)
    km = profile.kernels
    if km is None or unit not in ("cube", "vector"):
        return tiles, flops / tiles / peak, nbytes / tiles
    u = getattr(km, unit)
    if u.group_c0 is not None and meta is not None:
        flops *= group_padding(meta, u.group_c0)
    items = -(-tiles // u.split)
    cores = profile.unit_cores(unit)
    n = items if items < cores else cores
    loops = -(-items // n)
    eff = u.efficiency.get(dtype) or u.efficiency["default"]
    if u.op_efficiency is not None and meta is not None:
        eff = u.op_efficiency.get(op_class(meta)) or eff
    if loops == 1 and u.lone_efficiency is not None:   # one item per core: nothing overlaps its loads
        eff *= u.lone_efficiency
    return n, u.block_fixed_us + loops * (flops / items / (peak * eff) + u.item_fill_us), nbytes / n


def task_time(memo: dict[tuple[Any, ...], Any], profile: DeviceProfile, task: Any) -> tuple[int, float, float]:
    """``kernel_time`` of a device task, remembered in ``memo`` (its simulator's) by the task's
    cost fields and meta object: eager mode launches one op's task thousands of times, all
    with its plan's meta, and the arithmetic cost a fifth of what simulating one took. The
    entry keeps the meta it was made for, so an id is never taken for another object's."""
    meta = task.meta
    if not _switch.FAST:   # the plain reference: worked out every time
        return kernel_time(profile, task.unit, task.dtype, task.flops, task.bytes, task.block_dim, meta)
    key = (task.unit, task.dtype, task.flops, task.bytes, task.block_dim, id(meta))
    hit = memo.get(key)
    if hit is not None and hit[0] is meta:
        return hit[1]   # type: ignore[no-any-return]
    res = kernel_time(profile, task.unit, task.dtype, task.flops, task.bytes, task.block_dim, meta)
    memo[key] = (meta, res)
    return res


Step = tuple[list[tuple[str, int]], list[tuple[str, int, bool]]]


def l2_hits(steps: list[Step], capacity: int) -> list[int]:
    """Per kernel, the bytes of its reads the on-chip L2 serves, kernels taken in order.

    ``steps``: each kernel's reads as (tensor, bytes) and writes as (tensor, bytes, part): a
    part (a slice of a concatenation) adds to what L2 holds of its tensor. A tensor a kernel writes
    stays in L2 (write-allocate, least recently used out first) while it fits; a later
    read of it while it is still there is a hit, and refreshes it. A read of anything else
    (weights, graph inputs, tensors evicted since) comes from HBM and does not allocate
    (streaming). A tensor larger than the whole L2 never stays.

    The cache holds addresses, not tensors: once a tensor's last kernel has run, the
    allocator hands its memory to the tensors written after it (GE's memory reuse), whose
    lines then land where the dead ones were instead of evicting live data. So a dead
    tensor stops taking capacity after its last use (``l2_hits_by_name`` keeps every
    tensor until evicted, the plain reference).
    """
    last: dict[str, int] = {}
    for i, (reads, writes) in enumerate(steps):
        for name, _ in reads:
            last[name] = i
        for name, _, _ in writes:
            last[name] = i
    dies: list[list[str]] = [[] for _ in steps]
    for name, i in last.items():
        dies[i].append(name)
    return _lru(steps, capacity, dies)


def l2_hits_by_name(steps: list[Step], capacity: int) -> list[int]:
    """``l2_hits`` with every tensor kept until least recently used out, dead or not."""
    return _lru(steps, capacity, [[] for _ in steps])


def _lru(steps: list[Step], capacity: int, dies: list[list[str]]) -> list[int]:
    """The LRU walk of ``l2_hits``; ``dies[i]``: tensors whose memory is free after kernel i."""
    resident: dict[str, int] = {}   # insertion order = recency, oldest first
    used = 0
    out = []
    for (reads, writes), dead in zip(steps, dies):
        hit = 0
        for name, size in reads:
            if name in resident:
                hit += size
                resident[name] = resident.pop(name)
        out.append(hit)
        for name, size, part in writes:
            held = resident.pop(name, 0)
            used -= held
            size = size + held if part else size
            if size > capacity:
                continue
            while used + size > capacity:
                oldest = next(iter(resident))
                used -= resident.pop(oldest)
            resident[name] = size
            used += size
        for name in dead:
            used -= resident.pop(name, 0)
    return out


def hbm_equivalent(nbytes: float, hits: float, profile: DeviceProfile) -> float:
    """A kernel's bytes as HBM bytes: those L2 serves count at the HBM/L2 bandwidth ratio,
    so the simulator's one shared-HBM roofline times both (``hits`` <= the bytes it reads)."""
    km = profile.kernels
    if km is None or hits <= 0:
        return nbytes
    return nbytes - hits + hits * profile.hbm_bandwidth_gbps / km.l2_bandwidth_gbps
