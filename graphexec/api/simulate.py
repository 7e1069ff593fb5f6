"""Timing-only runs (``Session.simulate``, ``Session(compute=False)``): compile and simulate
with no kernel math, for the numbers a full run would give.

What the simulator decides depends on the task list, the costs and the host clock at
launch, never on the values the kernels compute (``engine/replay.py``); a timing-only run
is a full run minus the replay of the math and the bytes of the copies (each copy still
costs its time), so stats, trace, memory plan and diagnosis are the full run's, bit for
bit. Two kinds of graph have a timeline that values decide:

- control flow (If/Loop/Scan): a condition picks the branch, a trip count the iterations;
- an output sized only once a kernel computes it (NonZero, Unique, ...): its copy to the
  host lasts as long as its bytes.

Those are computed (a full run on the feeds, or with no feeds on the deterministic inputs
``graphexec run`` makes, ``feeds.default_feeds``), never estimated: the result then has its
outputs and ``stats.extra["computed"]`` says why. Across cards the same holds per mode:
its timing-only launch (``CardsRun(timing=True)``, the one ``parallel="auto"`` estimates
with) gives its full run's numbers.
"""

from __future__ import annotations

from typing import Any

from graphexec.cluster import Mode
from graphexec.engine.result import Result
from graphexec.ir import Graph

CONTROL_OPS = ("If", "Loop", "Scan")


def control_flow(graph: Graph) -> str | None:
    """The first control-flow node of ``graph`` (named for the message), or None."""
    for node in graph.nodes:
        if node.op in CONTROL_OPS:
            return f"control flow ({node.op} {node.name!r}) decides the timeline"
    return None


def computed(result: Result, why: str) -> Result:
    """Mark a result that ``simulate`` had to compute (its numbers are a full run's)."""
    result.stats.extra["computed"] = why
    return result


def simulate_cards(mode: Mode, feeds: dict[str, Any]) -> Result:
    """A multi-device session's timing-only run: the mode's own launch with nothing
    computed (``SimulatedMode.simulate``; "auto" picks its mode as its ``run`` does)."""
    simulate = getattr(mode, "simulate", None)
    if simulate is None:   # a mode with no timing-only launch: compute rather than guess
        return computed(mode.run(feeds), f"parallel mode {type(mode).__name__} has no timing-only run")
    result: Result = simulate(feeds)
    return result
