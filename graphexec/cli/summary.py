"""``graphexec run``'s text summary: the inputs it ran on, the outputs, the device time and
tasks, memory, and with several cards what adds up to the makespan (``profiling/cards_summary.py``)."""

from __future__ import annotations

from typing import Any

import graphexec as gx
from graphexec._render import term
from graphexec.cli.fallbacks import session_fallbacks
from graphexec.engine.result import summarize
from graphexec.profiling.cards_summary import cards_lines


def print_summary(model: str, session: gx.Session, result: gx.Result, inputs: list[str]) -> None:
    s = result.stats
    spread = getattr(getattr(session.multi, "cluster", None), "spread", None)
    if spread is None:
        print(f"{term(model)} on {term(session.profile.name)}, {s.num_streams} stream(s)")
    else:
        print(f"{term(model)} on {spread.devices} x {term(session.profile.name)} ({term(spread.system.name)}), "
              f"parallel {getattr(s, 'parallel', '?')}, {session.options.streams} stream(s) per card, "
              f"{spread.microbatches} micro-batch(es); the numbers below are the whole run's unless a card is named")
    print("\n".join(inputs))
    for name, value in result.outputs.items():
        print(f"  output {term(name)}: {summarize(value)}")
    print(f"  simulated device time {s.makespan_us:,.1f} us (lower bound {s.lower_bound_us:,.1f} us)")
    print(f"  tasks {s.num_tasks} ({s.num_kernels} AI-core kernels, {s.num_aicpu} AI-CPU), events {s.num_events}")
    if (line := session_fallbacks(session)) is not None:
        print(term(line))
    if s.precision_mode:
        print(f"  precision: timed in {s.precision_mode}, outputs computed "
              f"{'as the model defines them' if s.precision_computed == 'model' else 'in ' + s.precision_computed}")
    if spread is None:
        print(f"  activation pool {s.peak_bytes:,} bytes (live peak {s.lower_bound_bytes:,}, "
              f"no reuse {s.no_reuse_bytes:,}); weights {s.weight_bytes:,} bytes")
    else:
        cards: list[dict[str, Any]] = getattr(s, "per_device", [])
        print(f"  activation pool per card up to {max(c['peak_bytes'] for c in cards):,} bytes; weights "
              f"{sum(c['weight_bytes'] for c in cards):,} bytes on all cards together (per card below)")
        print("\n".join(cards_lines(result)))
    from graphexec.profiling.console import profile_text

    print(profile_text(result))
