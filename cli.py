"""The graphexec command line: parses arguments, calls the API, prints. Nothing else.

Exit codes: 0 success, 2 bad input (one line on stderr, no traceback), 1 internal error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

import graphexec as gx
from graphexec.engine.result import summarize
from graphexec.errors import GraphExecError


class UsageError(GraphExecError):
    """A command-line argument is malformed."""


def _pairs(items: Sequence[str] | None, what: str) -> dict[str, str]:
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UsageError(f"{what} {item!r} must look like NAME=VALUE")
        out[name] = value
    return out


def _shapes(items: Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for name, text in _pairs(items, "--shape").items():
        try:
            dims = tuple(int(d) for d in text.split(","))
        except ValueError:
            raise UsageError(f"--shape {name}={text}: dims must be integers separated by commas") from None
        if any(d < 0 for d in dims):
            raise UsageError(f"--shape {name}={text}: dims must be >= 0")
        shapes[name] = dims
    return shapes


def _inputs(items: Sequence[str] | None) -> dict[str, np.ndarray]:
    feeds = {}
    for name, path in _pairs(items, "--input").items():
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise UsageError(f"--input {name}: {path}: no such file") from None
        except (ValueError, OSError) as e:
            raise UsageError(f"--input {name}: {path}: not a .npy array file ({e})") from None
    return feeds


def _streams(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"--streams {text!r}: must be an integer >= 1 or 'auto'") from None


def atomic_write(path: str, write: Callable[[str], None]) -> None:
    """Write through a temporary file in the same folder, then rename: no partial files."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(folder):
        raise UsageError(f"{path}: folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".graphexec-", suffix=Path(path).suffix)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cmd_run(args: argparse.Namespace) -> int:
    graph = gx.load(args.model)
    feeds = _inputs(args.input)
    shapes = _shapes(args.shape)
    defaults = gx.default_feeds(graph, shapes) if any(n not in feeds for n in graph.inputs) else {}
    feeds = {n: feeds[n] if n in feeds else defaults[n] for n in graph.inputs} | feeds
    session = gx.Session(graph, streams=_streams(args.streams), device=args.device)
    result = session.run(feeds)
    if args.save:
        atomic_write(args.save, lambda tmp: np.savez(tmp, **{k: np.asarray(v) for k, v in result.outputs.items()}))
    if args.trace:
        atomic_write(args.trace, lambda tmp: Path(tmp).write_text(json.dumps(result.trace)))
    if args.json:
        print(json.dumps({"model": str(args.model), "device": session.profile.name,
                          "outputs": {k: _describe(v) for k, v in result.outputs.items()},
                          "stats": result.stats.to_dict()}, indent=2, default=float))
    else:
        _print_summary(args.model, session, result)
    return 0


def _describe(v: Any) -> dict[str, Any]:
    if not isinstance(v, np.ndarray):
        return {"type": type(v).__name__}
    return {"dtype": v.dtype.name, "shape": list(v.shape),
            "head": np.asarray(v).reshape(-1)[:5].tolist() if v.dtype != object else []}


def _print_summary(model: str, session: gx.Session, result: gx.Result) -> None:
    s = result.stats
    print(f"{model} on {session.profile.name}, {s.num_streams} stream(s)")
    for name, value in result.outputs.items():
        print(f"  output {name}: {summarize(value)}")
    print(f"  simulated device time {s.makespan_us:,.1f} us (lower bound {s.lower_bound_us:,.1f} us)")
    print(f"  tasks {s.num_tasks} ({s.num_kernels} AI-core kernels, {s.num_aicpu} AI-CPU), events {s.num_events}")
    print(f"  activation pool {s.peak_bytes:,} bytes (live peak {s.lower_bound_bytes:,}, "
          f"no reuse {s.no_reuse_bytes:,}); weights {s.weight_bytes:,} bytes")


def cmd_devices(args: argparse.Namespace) -> int:
    from graphexec.runtime.profiles import builtin_profiles

    profiles = builtin_profiles()
    if args.json:
        print(json.dumps([p.model_dump() for p in profiles.values()], indent=2))
        return 0
    for p in profiles.values():
        print(f"{p.name:12s} {p.ai_cores:3d} AI cores ({'coupled' if p.coupled else 'separated'}), "
              f"{p.peak_tflops.cube['float16']:g} TFLOPS fp16 cube, {p.hbm_bandwidth_gbps:g} GB/s, "
              f"{p.hbm_capacity_bytes / 2**30:g} GiB — {p.description}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="graphexec", description="Run compute graphs on an emulated NPU runtime.")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a model and print its outputs and device time")
    run.add_argument("model", help="an .onnx file")
    run.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="an input from a .npy file")
    run.add_argument("--shape", action="append", metavar="NAME=D0,D1,...", help="shape of a generated input")
    run.add_argument("--streams", default="1", help="number of streams, or 'auto' (default 1)")
    run.add_argument("--device", default="ascend910", help="built-in device name or a profile .yaml")
    run.add_argument("--trace", metavar="FILE", help="write a Chrome trace (open in Perfetto)")
    run.add_argument("--save", metavar="OUT.npz", help="save the outputs")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.set_defaults(fn=cmd_run)
    dev = sub.add_parser("devices", help="list the built-in device profiles")
    dev.add_argument("--json", action="store_true")
    dev.set_defaults(fn=cmd_devices)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except GraphExecError as e:
        print(f"graphexec: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("graphexec: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001  (anything else is our bug)
        if os.environ.get("GRAPHEXEC_DEBUG"):
            raise
        print(f"graphexec: internal error: {type(e).__name__}: {e} (set GRAPHEXEC_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
