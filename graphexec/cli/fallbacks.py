"""The run summary's line on ops that ran through onnx.reference instead of an own kernel."""

from __future__ import annotations

from typing import Any, Iterator

from graphexec.kernels.dispatch import FallbackUse, fallback_uses


def plan_runners(plan: Any) -> Iterator[Any]:
    """The runners of ``plan`` and of every body plan it compiled (If/Loop/Scan)."""
    yield from plan.runners.values()
    for bodies in plan.bodies.values():
        for body in bodies:
            for sub in body.plans.values():
                yield from plan_runners(sub)


def compiled_runners(compiled: Any) -> Iterator[Any]:
    """The runners a loaded plan ran: its own and those of every body plan its control tasks
    loaded, at compile time or for a signature only a run showed (each runner once)."""
    seen: set[int] = set()
    for runner in _loaded(compiled):
        if id(runner) not in seen:
            seen.add(id(runner))
            yield runner


def _loaded(compiled: Any) -> Iterator[Any]:
    yield from plan_runners(compiled.plan)
    for control in getattr(compiled, "controls", {}).values():
        for body in getattr(control, "bodies", ()):
            for sub in getattr(body, "plans", {}).values():
                yield from _loaded(sub)


def fallback_line(uses: list[FallbackUse]) -> str | None:
    """``reference fallback: 2 op types, 1,234.5 ms host (NonMaxSuppression 2 nodes 1,200.0 ms, ...)``,
    or None when every op ran an own kernel."""
    if not uses:
        return None
    total = sum(u.seconds for u in uses)
    each = ", ".join(f"{(u.domain + '::') if u.domain else ''}{u.op} {u.nodes} node{'s' * (u.nodes != 1)} "
                     f"{u.seconds * 1e3:,.1f} ms" for u in uses)
    return (f"  reference fallback (onnx.reference, no own kernel): {len(uses)} op type{'s' * (len(uses) != 1)}, "
            f"{total * 1e3:,.1f} ms host: {each}")


def session_fallbacks(session: Any) -> str | None:
    """The line for the plan the session ran last (None for several devices)."""
    if session.multi is not None:
        return None
    return fallback_line(fallback_uses(compiled_runners(session.compiled)))
