"""``graphexec sweep MODELS... --device a,b --streams 1,2,4 --policy ge,list --devices 1,2
--parallel data,pipeline [--output results.csv] [--backend ray]``: one timing-only run per
point of the grid (``sweep/run.py``), a table of the rows, a progress bar with ETA on
stderr when it is a terminal. Bad options are one line, exit 2; Ctrl-C stops the sweep
with every finished row kept in the output (run it again to resume)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

from graphexec._files import check_output, check_targets, write_one
from graphexec._render import term
from graphexec.cli.jsonout import count, emit
from graphexec.cluster import MODES
from graphexec.errors import GraphExecError
from graphexec.sweep.plot import config_label, plot_speedups
from graphexec.sweep.run import BACKENDS, sweep

POLICIES = ("single", "ge", "chains", "list", "auto", "default")


def _list(flag: str, check: Callable[[str], Any] = str) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        items = [x.strip() for x in text.split(",") if x.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"{flag} {text!r}: give a comma-separated list")
        try:
            return [check(x) for x in items]
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{flag} {text!r}: {e}") from None
    return parse


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{text!r} is not an int >= 1")
    return int(text)


def _streams(text: str) -> int | str:
    return "auto" if text == "auto" else _count(text)


def _policy(text: str) -> str | None:
    if text not in POLICIES:
        raise ValueError(f"{text!r} is not one of {', '.join(POLICIES)}")
    return None if text == "default" else text


def _mode(text: str) -> str:
    if text not in MODES:
        raise ValueError(f"{text!r} is not one of {', '.join(MODES)}")
    return text


def register(sub: Any) -> None:
    """Add the ``sweep`` command to the CLI's subparsers."""
    p = sub.add_parser("sweep", help="timing-only runs of models over devices, streams, policies and card counts")
    p.add_argument("models", nargs="+", help="model files or folders (their .onnx, .yaml, .yml files)")
    p.add_argument("--device", type=_list("--device"), default=["ascend910"], help="device names or profiles")
    p.add_argument("--streams", type=_list("--streams", _streams), default=[1], help="stream counts, e.g. 1,2,4,8")
    p.add_argument("--policy", type=_list("--policy", _policy), default=[None],
                   help=f"stream policies ({', '.join(POLICIES)})")
    p.add_argument("--devices", type=_list("--devices", _count), default=[1], help="card counts, e.g. 1,2,4")
    p.add_argument("--parallel", type=_list("--parallel", _mode), default=["data"], help="modes across cards")
    p.add_argument("--batch", type=_count, help="axis 0 of each model's first input (default: as declared)")
    p.add_argument("--output", metavar="FILE.csv|.parquet", help="append rows here; a rerun skips the points in it")
    p.add_argument("--backend", choices=BACKENDS, default="local", help="local process pool (default) or ray")
    p.add_argument("--workers", type=_count, help="local processes (default: one per core)")
    p.add_argument("--address", help="Ray cluster address (default: a local Ray started for the sweep)")
    p.add_argument("--verify", action="store_true", help="compute every point; check outputs are bit-identical")
    p.add_argument("--no-diagnosis", action="store_true", help="leave the cause column empty (faster)")
    p.add_argument("--plot", metavar="SWEEP.png", help="draw speedup per model and configuration")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(fn=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    for path in (args.output, args.plot):
        if path:
            check_output(path)
    models = [("a model", m) for m in args.models if Path(m).is_file()]
    check_targets([(flag, path, ()) for flag, path in (("--output", args.output), ("--plot", args.plot)) if path],
                  models)
    if args.address and args.backend != "ray":
        raise GraphExecError("--address is for --backend ray")
    with _bar() as progress:
        rows = sweep(args.models, args.device, args.streams, args.policy, args.devices, args.parallel,
                     batch=args.batch, output=args.output, backend=args.backend, workers=args.workers,
                     address=args.address, verify=args.verify, diagnose=not args.no_diagnosis, progress=progress)
    if args.plot:
        write_one(args.plot, lambda tmp: plot_speedups(rows, str(tmp)))
    if args.json:
        emit("sweep", {"rows": [r | {"streams": count(r["streams"])} for r in rows]})
    else:
        print(_table(rows))
    bad = [r for r in rows if r["verified"] not in (None, "yes")]
    if bad:   # every schedule must give the same bits: a difference is a bug
        print(f"graphexec: {len(bad)} point(s) gave outputs that differ from their baseline (1 stream, 1 card) "
              f"(first: {term(config_label(bad[0]))} of {term(bad[0]['model'])})", file=sys.stderr)
    return 1 if bad else 0


def _table(rows: list[dict[str, Any]]) -> str:
    from graphexec.profiling.console import table

    head = ["model", "config", "time (us)", "lower bound", "speedup vs 1 stream", "events", "peak memory", "cause",
            "error"]
    body = [[r["model"], config_label(r), _num(r["makespan_us"], "{:,.1f}"), _num(r["lower_bound_us"], "{:,.1f}"),
             _num(r["speedup"], "{:.2f}x"), _num(r["num_events"], "{}"), _num(r["peak_bytes"], "{:,}"),
             r["cause"] or "", (r["error"] or "")[:80]] for r in rows]
    failed = sum(r["error"] is not None for r in rows)
    return "\n".join([table(head, body), f"{len(rows)} points, {failed} failed; speedup: over the model on the same "
                       "device at 1 stream on 1 card (run for the speedups, not a row, where the grid lacks it)"])


def _num(v: Any, fmt: str) -> str:
    return "" if v is None else fmt.format(v)


class _bar:
    """A rich progress bar with ETA on stderr when it is a terminal (the plain one of
    ``profiling/console`` when rich is missing); nothing otherwise."""

    def __enter__(self) -> Callable[[int, int, str], None] | None:
        self._stop: Callable[[], None] = lambda: None
        if not sys.stderr.isatty():
            return None
        try:
            from rich.console import Console
            from rich.markup import escape
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
        except ImportError:
            return self._plain()
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                       console=Console(stderr=True), transient=True)
        bar.start()
        task = bar.add_task("sweep", total=1)
        self._stop = bar.stop

        def update(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=escape(term(what)[:60]))
        return update

    def _plain(self) -> Callable[[int, int, str], None]:
        from graphexec.profiling.console import Progress

        state: dict[str, Any] = {}
        t0 = time.perf_counter()

        def update(done: int, total: int, what: str) -> None:
            if "bar" not in state:
                state["bar"] = Progress(total)
                self._stop = state["bar"].close
            left = (time.perf_counter() - t0) / max(done, 1) * (total - done)
            state["bar"].update(done, f"{what} (ETA {left:.0f} s)")
        return update

    def __exit__(self, *exc: Any) -> None:
        self._stop()
