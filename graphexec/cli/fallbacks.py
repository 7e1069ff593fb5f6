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
    return fallback_line(fallback_uses(plan_runners(session.compiled.plan)))
