"""The collectives' algorithms as steps of flows over the fabric, and their cost.

HCCL's alpha-beta-gamma model (hicann/hccl, docs/en/user_guide/coll_algo_intro/; see
docs multi-device-facts.md): a message of n bytes costs alpha + n*beta to send and n*gamma
to reduce, p ranks. Here alpha is each link's ``latency_us`` and beta its bandwidth, but
the bytes really cross the fabric's shared channels, so other transfers on a link slow a
collective down and the other way round. A step starts all its flows at once and ends
when the last one lands; the next step starts then (ranks move in lockstep, which the
symmetric ring and mesh schedules do anyway).

Built (n: the bytes of the whole buffer the formulas name; chunk = n/p):
- ring (ranks r -> r+1 mod p): AllReduce = ReduceScatter + AllGather, 2(p-1) steps of a
  chunk: 2(p-1)alpha + 2(p-1)/p*n*beta (+ gamma, see below); AllGather and ReduceScatter p-1
  steps; Broadcast a chain root -> root+1 -> ... of the whole buffer, (p-1)(alpha + n*beta).
- mesh (every pair joined by a direct HCCS link, as HCCL picks on an 8-card HCCS mesh):
  every directed pair at once. AllReduce 2 steps of a chunk: 2alpha + 2/p*n*beta;
  AllGather, ReduceScatter 1 step: alpha + n/p*beta; Broadcast scatter then all-gather:
  2alpha + 2/p*n*beta.
- p2p (send/recv): one flow of n bytes on the pair's link, alpha + n*beta.
- local (one rank): a device copy of n bytes, no link.

A reducing step also reduces what it received, gamma per byte (``reduce_us_per_byte``),
pipelined with its flows: the step lasts the longer of the two (assumption: HCCL slices a
step's data so one slice's reduce overlaps the next slice's transfer; the published
formulas add the (p-1)/p*n*gamma term, the unpipelined bound). On every built-in the
links are far slower than HBM, so gamma is hidden; the reduce does not take vector cores
or HBM bandwidth from kernels running meanwhile (not modelled).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Any, Callable

import numpy as np

from graphexec.runtime.fabric import Fabric
from graphexec.runtime.profiles import DeviceProfile
from graphexec.runtime.systems import SystemProfile, load_system

Flow = tuple[int, int, float]    # (source rank, destination rank, bytes)
REDUCE_HBM_BYTES = 3             # a two-input reduce reads two operands and writes one result


@dataclass(frozen=True, slots=True)
class Step:
    """Flows started together; ``busy_us``: the ranks' own work in the step (a reduce),
    pipelined with the flows in chunks, so the step lasts the longer of the two."""

    flows: tuple[Flow, ...]
    busy_us: float = 0.0


@dataclass(frozen=True, slots=True)
class Plan:
    algorithm: str      # "ring", "mesh", "p2p" or "local"
    steps: tuple[Step, ...]


def reduce_us_per_byte(profile: DeviceProfile, dtype: np.dtype) -> float:
    """gamma: microseconds to reduce one byte of ``dtype``, the roofline of a vector reduce.

    A reduce is one flop per element against 3 bytes of HBM per byte reduced (two reads,
    one write): an intensity of 1/(3*itemsize) flop/byte, far below every built-in's ridge
    point (910B: 5.53 TFLOPS fp32 vector over 1.6 TB/s is ~3.5 flop/byte), so HBM bandwidth
    sets gamma in practice; the vector rate is kept in the max for profiles where it binds.
    """
    vector = profile.vector_flops_per_us_per_core(dtype.name) * profile.unit_cores("vector")
    return max(REDUCE_HBM_BYTES / profile.hbm_bytes_per_us, 1.0 / (dtype.itemsize * vector))


def choose(system: SystemProfile, devices: tuple[int, ...]) -> str:
    """mesh when every pair of the comm is joined by a direct HCCS link, else ring."""
    if len(devices) == 1:
        return "local"
    if all(system.link(a, b).kind == "HCCS" for a, b in permutations(devices, 2)):
        return "mesh"
    return "ring"


def _pairs(p: int, skip: Callable[[int, int], bool] = lambda a, b: False) -> list[tuple[int, int]]:
    return [(a, b) for a, b in permutations(range(p), 2) if not skip(a, b)]


def plan(kind: str, algorithm: str, p: int, n: float, gamma: float, copy_us_per_byte: float,
         root: int = 0) -> Plan:
    """The steps of collective ``kind`` over ``p`` ranks, ``n`` bytes as the formulas count."""
    if algorithm == "local":
        return Plan("local", (Step((), 0.0 if kind == "broadcast" else n * copy_us_per_byte),))
    chunk = n / p
    reduce_step = chunk * gamma   # a ring step reduces one chunk
    if algorithm == "ring":
        ring = tuple((r, (r + 1) % p, chunk) for r in range(p))
        if kind == "broadcast":
            return Plan("ring", tuple(Step((((root + k) % p, (root + k + 1) % p, n),)) for k in range(p - 1)))
        scatter = [Step(ring, reduce_step)] * (p - 1) if kind in ("all_reduce", "reduce_scatter") else []
        gather = [Step(ring)] * (p - 1) if kind in ("all_reduce", "all_gather") else []
        return Plan("ring", tuple(scatter + gather))
    everyone = tuple((a, b, chunk) for a, b in _pairs(p))
    if kind == "broadcast":
        spread = Step(tuple((root, b, chunk) for b in range(p) if b != root))
        share = Step(tuple((a, b, chunk) for a, b in _pairs(p, lambda a, b: b == root)))
        return Plan("mesh", (spread, share))
    steps = []
    if kind in ("all_reduce", "reduce_scatter"):
        steps.append(Step(everyone, (p - 1) * reduce_step))   # each rank reduces p-1 incoming chunks
    if kind in ("all_reduce", "all_gather"):
        steps.append(Step(everyone))
    return Plan("mesh", tuple(steps))


def wire_bytes(system: SystemProfile, nbytes: float) -> float:
    """What a flow of ``nbytes`` puts on the links under the system's collective model."""
    c = system.collectives
    if c is None:
        return nbytes
    return (nbytes + min(nbytes, float(c.slice_bytes))) / c.efficiency


def fixed_us(system: SystemProfile, plan: Plan) -> float:
    """The collective's fixed cost (none on one rank: no library call crosses a link)."""
    c = system.collectives
    return 0.0 if c is None or plan.algorithm == "local" else c.fixed_us


def estimate_us(system: SystemProfile, devices: tuple[int, ...], plan: Plan) -> float:
    """The plan's time on idle links, as ``run`` would take it: the fixed cost, then step
    after step, each the longer of its reduce work and its slowest channel (flows on one
    channel share it; a switch's flow takes its sender's and its receiver's port)."""
    total = fixed_us(system, plan)
    for s in plan.steps:
        per_channel: dict[Any, tuple[float, float]] = {}
        for a, b, nbytes in s.flows:
            link = system.link(devices[a], devices[b])
            wire = wire_bytes(system, nbytes)
            for channel in link.channels:
                lat, sent = per_channel.get(channel, (link.latency_us, 0.0))
                per_channel[channel] = (max(lat, link.latency_us), sent + wire / (link.bandwidth_gbps * 1e3))
        total += max([s.busy_us, *(lat + t for lat, t in per_channel.values())])
    return total


def link_kinds(system: SystemProfile, devices: tuple[int, ...], plan: Plan) -> str:
    """The kinds of link a plan's flows cross, "+"-joined ("HCCS", "HCCS+PCIe"); "" on chip."""
    kinds = {system.link(devices[a], devices[b]).kind for s in plan.steps for a, b, _ in s.flows}
    return "+".join(sorted(kinds))


def run(fabric: Fabric, system: SystemProfile, devices: tuple[int, ...], plan: Plan, sim: Any,
        done: Callable[[float], None]) -> None:
    """Run ``plan``'s steps in turn on ``sim``'s clock (the one reading the global time
    now); ``done(t)`` when the last step ends. Every timer goes on ``sim``, so each
    callback finds its clock at the time it was due."""

    def step(i: int) -> None:
        if i == len(plan.steps):
            done(sim.now)
            return
        s, t0 = plan.steps[i], sim.now

        def finish(t: float) -> None:
            sim.at(max(t, t0 + s.busy_us), lambda _: step(i + 1), None)

        left = len(s.flows)

        def landed(t: float) -> None:
            nonlocal left
            left -= 1
            if left == 0:
                finish(t)

        if not s.flows:
            finish(t0)
        for a, b, nbytes in s.flows:
            link = system.link(devices[a], devices[b])
            fabric.start(sim, link.channels, wire_bytes(system, nbytes), link.latency_us, landed)

    fixed = fixed_us(system, plan)
    if fixed > 0:
        sim.at(sim.now + fixed, lambda _: step(0), None)
    else:
        step(0)


KINDS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def collective_us(kind: str, nbytes: float, system: SystemProfile | str,
                  devices: list[int] | tuple[int, ...] | None = None, dtype: Any = "float32") -> float:
    """How long collective ``kind`` of ``nbytes`` (the whole buffer, as HCCL's formulas count
    it) takes over ``devices`` of ``system`` on idle links: what a real call takes from
    the moment every rank reached it, without emulating the data (a 4 GiB all-reduce on 8
    cards is 32 GiB of host memory). ``HcclError``-free: a bad argument is a ValueError."""
    sysprof = load_system(system)
    devs = tuple(range(sysprof.count) if devices is None else devices)
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
    profile = sysprof.device_profile
    gamma = reduce_us_per_byte(profile, np.dtype(dtype))
    steps = plan(kind, choose(sysprof, devs), len(devs), float(nbytes), gamma, 1.0 / profile.copy_bytes_per_us("d2d"))
    return estimate_us(sysprof, devs, steps)
