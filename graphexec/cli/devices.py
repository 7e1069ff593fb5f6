"""The command line's multi-card parts, which ``cli.py`` delegates to: the ``--devices``
options, ``compare --devices 1,2,4,8`` and ``plan --devices N`` (given the loaded model
and its feeds). Bad input (a card count the system lacks, a mode that is not implemented,
micro-batches that do not divide the batch) is a ``GraphExecError``: one line, exit 2.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any, Callable

import graphexec as gx
from graphexec._render import json_text, term
from graphexec.cli.jsonout import emit
from graphexec.cluster import MODES, check_spread, split_batch
from graphexec.errors import GraphExecError

SHOW = 20   # transfers listed per card when --limit is not given
PLAN_KEYS = ("stages",)   # a mode's partition, as its stats report it (tensor: ``describe``)


def _positive(flag: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"{flag} takes an int >= 1, not {text!r}")
        return int(text)
    return parse


def _counts(text: str) -> list[int]:
    parts = [x.strip() for x in text.split(",") if x.strip()]
    if not parts or not all(x.isdigit() and int(x) >= 1 for x in parts):
        raise argparse.ArgumentTypeError(f"--devices {text!r}: give card counts >= 1 separated by commas, "
                                         "such as 1,2,4,8")
    return [int(x) for x in parts]


def spread_options(p: argparse.ArgumentParser, many: bool = False) -> None:
    """--devices (one count, or with ``many`` a comma-separated list), --parallel, --microbatches, --system."""
    if many:
        p.add_argument("--devices", type=_counts, metavar="1,2,4,8",
                       help="compare these card counts (one row each) instead of stream counts")
    else:
        p.add_argument("--devices", type=_positive("--devices"), default=1, help="cards to spread the graph over")
    p.add_argument("--parallel", choices=list(MODES), default="data", help="how the graph is spread (default data)")
    p.add_argument("--microbatches", type=_positive("--microbatches"), default=1, help="parts of a card's batch")
    p.add_argument("--system", help="built-in system name or a system .yaml (default: the one of --device's cards)")


def _check(graph: gx.Graph, args: argparse.Namespace, counts: list[int], feeds: dict[str, Any]) -> None:
    """Refuse bad options before anything runs: every count on the system, the mode, the split."""
    profile = gx.Session(graph, streams=1, device=args.device).profile
    for n in counts:
        check_spread(n, args.parallel, args.microbatches, args.system, profile, args.device is not None)
        m = args.microbatches
        if n > 1 and args.parallel == "data":
            split_batch(feeds, n * m, f"{n} devices" if m == 1 else f"{n} devices x {m} micro-batches")
        elif n > 1 and args.parallel == "pipeline" and m > 1:
            split_batch(feeds, m, f"{m} micro-batches")


def _per_card_streams(text: str | None) -> int | str:
    if text is None or text == "auto":
        return text or 1
    if not text.isdigit() or int(text) < 1:
        raise GraphExecError(f"--streams {text!r}: with --devices, the stream count per card (an int >= 1 or 'auto')")
    return int(text)


def compare(args: argparse.Namespace, graph: gx.Graph, feeds: dict[str, Any], write_plot: Callable) -> int:
    """``graphexec compare MODEL --devices 1,2,4,8``: one row per card count."""
    from graphexec.profiling.console import Progress

    counts = args.devices
    _check(graph, args, counts, feeds)
    streams = _per_card_streams(args.streams)
    with Progress(len(counts)) as bar:   # drawn on stderr only when it is a terminal
        cmp = gx.compare(graph, devices=counts, streams=streams, feeds=feeds, parallel=args.parallel,
                         microbatches=args.microbatches, system=args.system, device=args.device, launch=args.launch,
                         threads=args.threads, compute=not getattr(args, "timing_only", False),
                         progress=lambda i, n, what: bar.update(i, what))
    if args.plot:
        from graphexec.profiling.plot import gantt

        rows: list[Any] = cmp.rows   # DeviceRow
        titles = [f"{r.devices} card(s), {r.parallel}: {r.makespan_us:,.1f} us, {r.speedup:.2f}x" for r in rows]
        write_plot(lambda tmp: gantt([r.trace for r in cmp.results], titles, str(tmp)))
    if args.json:
        emit("compare", cmp.to_dict())
    else:
        print(f"{term(args.model)} on {term(cmp.sessions[-1].profile.name)} cards, parallel={args.parallel}, "
              f"{streams} stream(s) per card")
        print(cmp.table())
    return 0


def plan(args: argparse.Namespace, graph: gx.Graph, feeds: dict[str, Any]) -> int:
    """``graphexec plan MODEL --devices N``: the partition over the cards and the transfers."""
    _check(graph, args, [args.devices], feeds)
    session = gx.Session(graph, streams=_per_card_streams(args.streams), device=args.device, policy=args.policy,
                         devices=args.devices, parallel=args.parallel, microbatches=args.microbatches,
                         system=args.system, launch=args.launch)
    mode: Any = session.multi
    assert mode is not None   # devices > 1
    if hasattr(mode, "choose"):   # auto: show the mode it picks for these feeds
        name, tried = mode.choose(feeds)
        print("auto tried (timing-only estimates): " + ", ".join(f"{k} {v:,.1f} us" for k, v in tried.items()))
        mode = mode._mode(name)
    spread = mode.cluster.spread
    if args.json:
        result = session.run(feeds)
        emit("plan", {"model": str(args.model), "device": spread.system.device_profile.name, "devices": spread.devices,
                      "system": spread.system.name, "parallel": getattr(mode, "name", args.parallel),
                      "microbatches": spread.microbatches, "partition": _partition(mode, feeds),
                      "transfers": _transfers(result, args.limit or SHOW), "stats": result.stats.to_dict()})
        return 0
    print(f"{term(args.model)} on {spread.devices} x {term(spread.system.device_profile.name)} "
          f"({term(spread.system.name)}), "
          f"parallel={getattr(mode, 'name', args.parallel)}, {spread.microbatches} micro-batch(es)")
    print("\n".join(map(term, _partition(mode, feeds))))
    result = session.run(feeds)
    for key in PLAN_KEYS:   # what the mode reports of its partition in its stats
        items = result.stats.extra.get(key)
        if items:
            items = items if isinstance(items, list) else [items]
            print(f"stats.extra[{key!r}]:")
            print("\n".join(f"  {json_text(x, default=str)[:160]}" for x in items[:args.limit or SHOW]))
    print("\n".join(map(term, _transfers(result, args.limit or SHOW))))
    return 0


def _partition(mode: Any, feeds: dict[str, Any]) -> list[str]:
    name = getattr(mode, "name", "")
    if name == "data":
        n, m = mode.cluster.devices, mode.cluster.spread.microbatches
        names, shares = split_batch(feeds, n * m, f"{n} devices")
        batch = feeds[names[0]].shape[0]
        step = batch // n
        lines = [f"partition: the batch ({batch} rows of {', '.join(names)}) in {n} shares"
                 + (f", each run as {m} micro-batches of {step // m}" if m > 1 else "")]
        for i in range(n):
            shapes = ", ".join(f"{k}{list(shares[i * m][k].shape)}" for k in names)
            lines.append(f"  card {i}: rows {i * step}..{(i + 1) * step - 1} ({shapes} per micro-batch)"
                         if m > 1 else f"  card {i}: rows {i * step}..{(i + 1) * step - 1} ({shapes})")
        return lines
    describe = getattr(mode, "describe", None)
    if describe is None:
        return [f"partition: parallel={name} has no partition to show"]
    text = describe(feeds) if inspect.signature(describe).parameters else describe()
    return ["partition:"] + [f"  {line}" for line in (text.splitlines() if isinstance(text, str) else list(text))]


def _transfers(result: gx.Result, limit: int) -> list[str]:
    """Every copy over a link (host link, peer link) and every collective of one run, per card."""
    s = result.stats
    events = [e for e in result.trace["traceEvents"] if e.get("ph") == "X"
              and (e.get("cat") == "hccl" or (e.get("cat") == "memcpy" and e.get("args", {}).get("link")))]
    lines = [f"transfers (one simulated run, {s.makespan_us:,.1f} us): {len(events)}, "
             f"{getattr(s, 'comm_bytes', 0):,} bytes, {getattr(s, 'comm_us', 0.0):,.1f} us, "
             f"{100 * getattr(s, 'comm_hidden', 0.0):.1f}% hidden behind compute"]
    for card in sorted({e["pid"] for e in events}):
        mine = sorted((e for e in events if e["pid"] == card), key=lambda e: e["ts"])
        entry: dict[str, Any] = next((d for d in getattr(s, "per_device", []) if d["device"] == card), {})
        lines.append(f"  card {card}: peak {entry.get('peak_bytes', 0):,} bytes, weights "
                     f"{entry.get('weight_bytes', 0):,} bytes")
        for e in mine[:limit]:
            a = e["args"]
            route = (f"{a.get('src')} -> {a.get('dst')} over {a['link']}" if e["cat"] == "memcpy"
                     else f"{a.get('algorithm')} over {a.get('links')}")
            lines.append(f"    {e['ts']:>10,.1f} us  {e['name']:<32} {int(a.get('bytes') or 0):>12,} B  "
                         f"{e['dur']:>9,.1f} us  {route}")
        if len(mine) > limit:
            lines.append(f"    ... {len(mine) - limit} more (--limit N shows N)")
    return lines
