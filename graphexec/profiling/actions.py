"""Actions: what the user can change about a run, each measured by re-simulating it.

A cause (``causes.py``) says what bounds a run; an action is a setting the user has, and
its ``gain`` is the simulated makespan as run over the makespan with the setting changed:
the plan compiled again with the changed options (``RECOMPILE``), then timed with no
kernel computed, exactly as ``Session.simulate`` times it. Advice already in effect is
not measured and not given; an action that buys under ``NEGLIGIBLE`` is not advised. On
several cards the plan is card 0's, as the rest of the diagnosis is.

- fusion: every GE fusion rule on (``--fusion on``, no ``--fusion-switch-file``), in graph
  mode and when the graph's schedule is not hand-written;
- precision: ATC's faster ``precision_mode`` values on an Ascend chip for a model with
  float32 or bfloat16 kernels; the accuracy cost is not a time, so it is not measured
  (``--precision-numerics device`` computes what the mode would). Not tried under
  force_fp16, ATC's speed-first mode (every float op at 16 bits): over the nine light onnx
  models, the tiny decoder and the inception block on 910, 310P and 910B no other mode
  timed faster by 5% (the most, 1.01x: tiny MatMuls priced on the AI CPU), so a default
  run compiles nothing again;
- neither fusion nor precision under measured durations (``measured=``): those time the
  kernels that ran, and fusing or re-typing makes other kernels, which nothing measured;
- streams: the best stream count and policy (``causes.best_streams``);
- graph mode: the task list loaded with the model (``--launch graph``) for a host-launched run.

Not actions: deeper command queues (CANN has no queue-depth setting; the HUGE stream flag
is "not effective" on 910/910B/310P, acl_rt.h), and the batch size (a makespan of another
batch answers another question).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from graphexec.ir import Graph
from graphexec.passes.fusion_switch import GRAPH_RULES, UB_RULES
from graphexec.passes.precision import chip_of, resolve
from graphexec.plan import CompileOptions, Plan, TaskKind
from graphexec.runtime.launch import simulate_makespan

NEGLIGIBLE = 1.05     # an action that buys less than 5% is not advised
# how a plan is compiled again with other options: the engine, which owns the pass pipeline
# and sits above profiling, registers it here (``engine/compiled.py``)
RECOMPILE: list[Callable[[Graph, CompileOptions, Any], Plan]] = []
FAST_MODES = ("force_fp16", "allow_fp32_to_fp16", "allow_mix_precision")
BF16_MODES = ("allow_mix_precision_bf16",)
ACCURACY = ("its accuracy cost is not measured by timing: --precision-numerics device "
            "(precision_numerics=\"device\") computes the outputs as the mode would")


@dataclass(frozen=True)
class Action:
    """A setting the user can change: ``gain`` = makespan as run / ``makespan_us`` with it."""

    name: str
    gain: float
    makespan_us: float
    flag: str
    option: str
    message: str
    caveat: str = ""


def timed(plan: Plan) -> float:
    """A plan's makespan with no kernel computed (as ``Session.simulate``)."""
    return simulate_makespan(plan.schedule, plan.profile, plan.options.graph_mode)


def recompiled(plan: Plan, **changes: Any) -> Plan | None:
    """``plan``'s graph compiled again with ``changes`` to its options (None: no compiler registered)."""
    if not RECOMPILE:
        return None
    return RECOMPILE[-1](plan.graph, replace(plan.options, **changes), plan.profile)


def _action(name: str, base: float, span: float, flag: str, option: str, what: str, caveat: str = "") -> Action:
    g = base / span if span > 0 else 1.0
    msg = f"{what}: {base:,.1f} us -> {span:,.1f} us ({g:.2f}x), measured by re-simulation; {flag} ({option})"
    return Action(name, g, span, flag, option, msg + (f"; {caveat}" if caveat else ""), caveat)


def _groups_off(off: frozenset[str]) -> dict[str, list[str]]:
    """The implemented rules a switch file turns off, by ATC's group (GraphFusion, UBFusion)."""
    groups = {"GraphFusion": sorted(off & set(GRAPH_RULES)), "UBFusion": sorted(off & set(UB_RULES))}
    return {g: rules for g, rules in groups.items() if rules}


def fusion(plan: Plan, base: float) -> Action | None:
    """Every fusion rule on, where fusion applies and some rule graphexec implements is off;
    with rules off in both groups, each group's rules turned on alone are measured too."""
    o = plan.options
    groups = _groups_off(o.fusion_off)
    if not o.graph_mode or o.policy == "manual" or "schedule" in plan.graph.meta or (o.fusion and not groups) \
            or o.measured is not None:
        return None
    p = recompiled(plan, fusion=True, fusion_off=frozenset())
    if p is None:
        return None
    what = "turn graph fusion on (every GE rule)"
    if not o.fusion:
        flag, option = "--fusion on", "fusion=True"
        if o.fusion_off:
            flag, option = "--fusion on, without --fusion-switch-file", "fusion=True, fusion_switch_file=None"
    else:
        off = ", ".join(r for rules in groups.values() for r in rules)
        flag, option = f"run without --fusion-switch-file (it turns off {off})", "fusion_switch_file=None"
        what = f"turn the switched-off fusion rules on ({off})"
        if len(groups) > 1:
            alone = {g: recompiled(plan, fusion_off=o.fusion_off - set(rules)) for g, rules in groups.items()}
            what += "; by group, " + ", ".join(f"{g} rules alone {base / timed(q):.2f}x"
                                                for g, q in alone.items() if q is not None)
    return _action("fusion", base, timed(p), flag, option, what)


def _floats(plan: Plan) -> bool:
    """Whether any kernel reads or writes a float32 or bfloat16 tensor of the model."""
    vals = plan.graph.values
    for t in plan.tasks.tasks:
        if t.kind in (TaskKind.KERNEL, TaskKind.AICPU):
            for n in (*t.reads, *t.writes):
                v = vals.get(n)
                if v is not None and v.type is not None and v.type.dtype is not None \
                        and v.type.dtype.name in ("float32", "bfloat16"):
                    return True
    return False


def precision(plan: Plan, base: float) -> Action | None:
    """The fastest of ATC's faster precision modes the chip supports, if any is faster."""
    chip = chip_of(plan.profile)
    current = resolve(plan.options.precision_mode, plan.profile)
    if not chip.ascend or current == "force_fp16" or plan.options.measured is not None or not _floats(plan) \
            or not RECOMPILE:
        return None
    modes = [m for m in FAST_MODES + (BF16_MODES if chip.bf16 else ()) if m != current]
    spans = {}
    for m in modes:
        p = recompiled(plan, precision_mode=m)
        assert p is not None
        spans[m] = timed(p)
    best = min(modes, key=lambda m: (spans[m], modes.index(m)))
    others = ", ".join(f"{m} {base / spans[m]:.2f}x" for m in modes if m != best)
    what = f"time the kernels in precision mode {best} instead of {current} (also measured: {others})"
    return _action("precision", base, spans[best], f"--precision-mode {best}", f'precision_mode="{best}"', what,
                   ACCURACY)


def graph_mode(plan: Plan, base: float) -> Action | None:
    """Graph mode for a host-launched run: no launch per task, and fusion where it is on."""
    if plan.options.graph_mode:
        return None
    p = recompiled(plan, launch="graph")
    if p is None:
        return None
    what = "launch as one graph (GE's graph mode: the task list loaded with the model"
    what += ", fused as the fusion options say)" if plan.options.fusion else ")"
    return _action("graph_mode", base, timed(p), "--launch graph", 'launch="graph"', what)


def streams(plan: Plan, base: float, best: Any) -> Action | None:
    """The best stream count and policy found (``causes.best_streams``), if not the run's own."""
    n, pol = best.streams, best.policy
    if n is None or (n == len(plan.schedule.streams) and pol == plan.schedule.policy):
        return None
    return _action("streams", base, best.makespan_us, f"--streams {n} --policy {pol}", f'streams={n}, policy="{pol}"',
                   f"run on {n} streams with policy {pol}")


def advise(plan: Plan, base: float, best_streams: Any) -> tuple[list[Action], list[Action]]:
    """(actions that buy at least ``NEGLIGIBLE``, best first; every action measured)."""
    measured = [a for a in (fusion(plan, base), precision(plan, base), graph_mode(plan, base),
                            streams(plan, base, best_streams)) if a is not None]
    advised = sorted((a for a in measured if a.gain >= NEGLIGIBLE), key=lambda a: (-a.gain, a.name))
    return advised, measured
