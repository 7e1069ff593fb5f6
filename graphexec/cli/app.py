"""The graphexec command line's commands and parser: parses arguments, calls the API, prints.

Exit codes: 0 success, 2 bad input (one line on stderr, no traceback), 1 internal error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn, Sequence

import numpy as np

import graphexec as gx
from graphexec._files import Terminated, check_output, sigterm_unwinds, write_one
from graphexec._render import term
from graphexec.api.lowered import lowered_model
from graphexec.cli import args as cli_args
from graphexec.cli import calibrate as cli_calibrate
from graphexec.cli import completion as cli_completion
from graphexec.cli import decode as cli_decode
from graphexec.cli import devices as cli_devices
from graphexec.cli import files as cli_files
from graphexec.cli import graph_cmds as cli_graph
from graphexec.cli import inspect_cmd as cli_inspect
from graphexec.cli import made as cli_made
from graphexec.cli import sweep as cli_sweep
from graphexec.cli import view as cli_view
from graphexec.cli.args import UsageError
from graphexec.cli.inputs import given_names as read_inputs_given
from graphexec.cli.inputs import read_inputs
from graphexec.cli.jsonout import emit
from graphexec.cli.plan_json import plan_doc
from graphexec.cli.summary import print_summary
from graphexec.cli.values import flatten
from graphexec.errors import GraphExecError
from graphexec.passes.precision import MODES as PRECISION_MODES
from graphexec.profiling.cards_summary import parts_doc


def _check_outputs(args: argparse.Namespace) -> None:
    """Fail before the run, not after it, when an output cannot be written where asked."""
    for option in ("save", "trace", "plot"):
        path = getattr(args, option, None)
        if path:
            check_output(path, f"--{option}")
    if getattr(args, "plot", None) and Path(args.plot).suffix.lower() not in PLOT_FORMATS:
        raise UsageError(f"--plot {args.plot}: the suffix picks the format; use one of {', '.join(PLOT_FORMATS)}")
    profile = getattr(args, "profile", None)
    if profile:
        target = Path(profile)
        if target.exists() and not target.is_dir():
            raise UsageError(f"--profile {profile}: exists and is not a folder")
        if not target.absolute().parent.is_dir():
            raise UsageError(f"--profile {profile}: folder {target.absolute().parent} does not exist")
    cli_files.check_distinct(args)   # no output replaces the model, an input or another output


def _savez(path: Path, outputs: dict[str, Any]) -> None:
    """Tensors as arrays by name; sequences, maps and optionals in cli/values.py's form."""
    with open(path, "wb") as f:  # a file object: np.savez would append .npz to a name without it
        as_arrays: dict[str, Any] = {k: a for name, v in outputs.items() for k, a in flatten(name, v)}
        np.savez(f, **as_arrays)


def cmd_run(args: argparse.Namespace) -> int:
    from graphexec.profiling.console import Progress

    _check_outputs(args)
    graph = gx.load(args.model)
    cli_files.check_distinct(args, graph)   # nor a file the model read (its .npz, external data)
    session = gx.Session(graph, streams=cli_args.streams(args.streams), device=args.device, policy=args.policy,
                         launch=args.launch, threads=args.threads, devices=args.devices, parallel=args.parallel,
                         microbatches=args.microbatches, system=args.system, compute=not args.timing_only,
                         fusion=args.fusion == "on", fusion_switch_file=args.fusion_switch_file,
                         precision_mode=args.precision_mode, precision_numerics=args.precision_numerics,
                         measured=args.measured)
    if args.timing_only and args.save:
        raise UsageError("--save: a --timing-only run computes no outputs to save")
    shapes = cli_args.shapes(args.shape)
    made = [n for n in graph.inputs if n not in read_inputs_given(args.input, graph)]
    feeds = _feeds_for(graph, args, session.profile)   # a bad --input is its own line, no dims hint
    with Progress(3 + bool(args.profile)) as bar, cli_made.hinted(graph, made, shapes):   # the bar: a terminal only
        bar.update(0, "compiling")
        session.compile(feeds)
        bar.update(1, "running")
        result = session.run(feeds)
        bar.update(2, "diagnosing")
        diagnosis = result.diagnosis
        if args.profile:
            bar.update(3, "writing the profile")
            result.write_profile(args.profile)
    if args.save:
        write_one(args.save, lambda tmp: _savez(tmp, result.outputs))
    if args.trace:
        write_one(args.trace, lambda tmp: tmp.write_text(json.dumps(result.trace)))
    if args.json:
        emit("run", {"model": str(args.model), "device": session.profile.name,
                     "inputs": {k: _describe(v) | {"made": k in made} for k, v in feeds.items()},
                     "outputs": {k: _describe(v) for k, v in result.outputs.items()},
                     "stats": result.stats.to_dict(), "diagnosis": diagnosis.to_dict(),
                     **({} if session.multi is None else parts_doc(result.trace))})
    else:
        print_summary(args.model, session, result, cli_made.input_lines(graph, feeds, made))
        if args.measured and session.multi is None:
            from graphexec.passes.measured import coverage

            plan, measured = session.compiled.plan, session.options.measured
            assert measured is not None
            found, kernels = coverage(plan.graph, plan.tasks, measured)
            print(f"  measured: {found} of {kernels} kernels timed from {term(measured.source)}, the rest by the cost "
                  "model")
        if args.profile:
            print(f"  profile written to {term(args.profile)}/ (timeline.json, op_summary.csv, op_statistic.csv)")
    return 0


def _compile_flags(args: argparse.Namespace) -> dict[str, Any]:
    """--fusion, --fusion-switch-file, --precision-mode, --precision-numerics as Session's keywords."""
    return {"fusion": args.fusion == "on", "fusion_switch_file": args.fusion_switch_file,
            "precision_mode": args.precision_mode, "precision_numerics": args.precision_numerics,
            "measured": args.measured}


def _one_card_flags(args: argparse.Namespace) -> None:
    """compare and plan across cards take no fusion or precision flag yet: one line, not a silent default."""
    if args.fusion == "off" or args.fusion_switch_file or args.precision_mode or args.precision_numerics != "model" \
            or args.measured:
        raise UsageError("--fusion, --fusion-switch-file, --precision-* and --measured are not taken with --devices "
                         "here yet (graphexec run --devices N takes them)")


def _describe(v: Any) -> dict[str, Any]:
    if not isinstance(v, np.ndarray):
        return {"type": type(v).__name__}
    return {"dtype": v.dtype.name, "shape": list(v.shape),
            "head": np.asarray(v).reshape(-1)[:5].tolist() if v.dtype != object else []}


def _feeds_for(graph: gx.Graph, args: argparse.Namespace, profile: Any) -> dict[str, Any]:
    feeds = read_inputs(args.input, graph, profile)
    shapes = cli_args.shapes(args.shape)
    if all(n in feeds for n in graph.inputs) and not shapes:
        return feeds
    defaults = gx.default_feeds(graph, shapes, device=profile)
    return {n: feeds.get(n, defaults[n]) for n in graph.inputs} | feeds


def _stream_list(text: str) -> list[int | str]:
    counts = [c for x in text.split(",") if x.strip() and (c := cli_args.streams(x.strip())) is not None]
    if not counts:
        raise UsageError(f"--streams {text!r}: give a comma-separated list such as 1,2,4,8")
    return counts


def cmd_compare(args: argparse.Namespace) -> int:
    _check_outputs(args)
    graph = gx.load(args.model)
    cli_files.check_distinct(args, graph)
    feeds = _feeds_for(graph, args, gx.Session(graph, streams=1, device=args.device).profile)
    if args.devices:   # one row per card count (graphexec/cli/devices.py)
        _one_card_flags(args)
        return cli_devices.compare(args, graph, feeds, lambda draw: write_one(args.plot, draw))
    counts = _stream_list(args.streams or "1,2,4,8")
    from graphexec.profiling.console import Progress

    with Progress(len(counts)) as bar:   # drawn on stderr only when it is a terminal
        cmp = gx.compare(graph, streams=counts, feeds=feeds, policy=args.policy, device=args.device, launch=args.launch,
                         **_compile_flags(args),
                         threads=args.threads, compute=not args.timing_only,
                         progress=lambda i, n, what: bar.update(i, what))
    if args.plot:
        from graphexec.profiling.plot import gantt

        titles = [f"{r.streams} stream(s), {r.policy}: {r.makespan_us:,.1f} us" for r in cmp.rows]
        write_one(args.plot, lambda tmp: gantt([r.trace for r in cmp.results], titles, str(tmp)))
    if args.json:
        emit("compare", cmp.to_dict())
    else:
        print(f"{term(args.model)} on {term(cmp.sessions[0].profile.name)}")
        print(cmp.table())
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    import onnx

    from graphexec.profiling.report import memory_text, schedule_text

    graph = gx.load(args.model)
    if args.devices > 1:   # the partition over the cards and the transfers (graphexec/cli/devices.py)
        _one_card_flags(args)
        return cli_devices.plan(args, graph, _feeds_for(graph, args, gx.Session(graph, device=args.device).profile))
    if args.save_graph:
        check_output(args.save_graph, "--save-graph")
        if not args.save_graph.endswith(".onnx"):
            raise UsageError(f"--save-graph {args.save_graph}: the compiled graph is written as .onnx")
    session = gx.Session(graph, streams=cli_args.streams(args.streams), device=args.device, policy=args.policy,
                         fusion=args.fusion == "on", fusion_switch_file=args.fusion_switch_file,
                         precision_mode=args.precision_mode, precision_numerics=args.precision_numerics,
                         measured=args.measured)
    compiled = session.compile(_feeds_for(graph, args, session.profile))
    if args.save_graph:
        write_one(args.save_graph, lambda tmp: onnx.save(lowered_model(compiled), str(tmp)))
        print(f"compiled graph written to {term(args.save_graph)}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        emit("plan", plan_doc(str(args.model), session.profile.name, compiled))
        return 0
    print(schedule_text(compiled, args.limit))
    print(memory_text(compiled.memory_plan, args.limit))
    return 0


def load_kernels(paths: Sequence[str] | None) -> None:
    """Run the Python files given with --kernels: their @gx.kernel decorators register custom ops."""
    import runpy

    for path in paths or ():
        if not os.path.isfile(path):
            raise UsageError(f"--kernels {path}: no such file")
        try:
            runpy.run_path(path)
        except Exception as e:  # noqa: BLE001  (the user's code)
            raise UsageError(f"--kernels {path}: {type(e).__name__}: {e}") from None


POLICY_CHOICES = ["single", "ge", "chains", "list", "auto"]
PLOT_FORMATS = (".png", ".svg", ".pdf")
TIMING_HELP = "simulate only: the same times, trace and diagnosis, no kernel computed (no outputs)"
THREADS_HELP = "host threads for the kernels' math (default 1); outputs and device times do not change"


def _positive(flag: str) -> Any:
    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"{flag} takes an int >= 1, not {text!r}")
        return int(text)
    return parse


_threads = _positive("--threads")


def _model_options(p: argparse.ArgumentParser, json_flag: bool = True) -> None:
    p.add_argument("--input", action="append", metavar="NAME=FILE|FILE|DIR",
                   help="NAME=FILE.npy, NAME=FILE.npz (the value NAME of a .npz in --save's form), NAME=FILE.pb "
                        "(an ONNX TensorProto); or with no NAME a .npz of inputs by name, a .pb, or a folder of "
                        "input_0.pb, input_1.pb, ... (onnxruntime_perf_test's test data)")
    p.add_argument("--shape", action="append", metavar="NAME=D0,D1,...", help="shape of a generated input")
    p.add_argument("--launch", choices=["graph", "host"], default="graph",
                   help="graph: the task list is loaded with the model (GE graph mode, default); "
                        "host: every task is launched from the host at the profile's launch cost")
    p.add_argument("--device", help="built-in device name or a profile .yaml (default ascend910)")
    p.add_argument("--fusion", choices=["on", "off"], default="on",
                   help="GE/ATC graph and UB fusion in graph mode (default on)")
    p.add_argument("--fusion-switch-file", metavar="FILE",
                   help="ATC fusion switch file: rules set 'off' there are not applied (JSON or Rule:off lines)")
    p.add_argument("--precision-mode", choices=list(PRECISION_MODES),
                   help="ATC precision mode the kernels are timed in (default: the chip's, force_fp16 on Ascend)")
    p.add_argument("--precision-numerics", choices=["model", "device"], default="model",
                   help="compute outputs as the model defines them (default) or as the precision mode would")
    p.add_argument("--measured", metavar="OP_SUMMARY.csv|TRACE.json",
                   help="measured op durations (an msprof op_summary, its PROF_ folder, a Kineto/Perfetto kernel "
                        "trace) that time the ops they match instead of the cost model")
    p.add_argument("--kernels", action="append", metavar="FILE.py", help="Python file registering custom kernels")
    if json_flag:
        p.add_argument("--json", action="store_true", help="print JSON")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (exit 2) like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="graphexec", description="Run compute graphs on an emulated NPU runtime.")
    p.add_argument("--version", action="version", version=f"graphexec {gx.__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a model and print its outputs and device time")
    run.add_argument("model", help="an .onnx or .yaml/.yml graph")
    _model_options(run)
    run.add_argument("--streams", help="number of streams, or 'auto' (default: the graph's options, else 1)")
    run.add_argument("--policy", choices=POLICY_CHOICES, help="stream assignment policy")
    run.add_argument("--trace", metavar="FILE", help="write a Chrome trace (open in Perfetto)")
    run.add_argument("--profile", metavar="DIR", help="write timeline.json, op_summary.csv and op_statistic.csv")
    run.add_argument("--save", metavar="OUT.npz", help="save the outputs")
    run.add_argument("--threads", type=_threads, default=1, help=THREADS_HELP)
    cli_devices.spread_options(run)
    run.add_argument("--timing-only", action="store_true", help=TIMING_HELP)
    run.set_defaults(fn=cmd_run)
    cmp = sub.add_parser("compare", help="compare schedules over several stream counts")
    cmp.add_argument("model")
    cmp.add_argument("--streams", help="comma-separated stream counts (default 1,2,4,8); with --devices, per card")
    cmp.add_argument("--policy", choices=POLICY_CHOICES, help="stream assignment policy for counts above 1")
    cmp.add_argument("--plot", metavar="GANTT.png", help="write a Gantt chart, one panel per row")
    cmp.add_argument("--threads", type=_threads, default=1, help=THREADS_HELP)
    _model_options(cmp)
    cli_devices.spread_options(cmp, many=True)
    cmp.add_argument("--timing-only", action="store_true", help=TIMING_HELP)
    cmp.set_defaults(fn=cmd_compare)
    plan = sub.add_parser("plan", help="show each stream's task order and the memory plan (with --devices: "
                                       "the partition over the cards and the transfers)")
    plan.add_argument("model")
    plan.add_argument("--streams", help="number of streams, or 'auto' (default: the graph's options, else 1)")
    plan.add_argument("--policy", choices=POLICY_CHOICES)
    plan.add_argument("--limit", type=int, default=0, help="show at most this many tasks per stream")
    plan.add_argument("--save-graph", metavar="OUT.onnx", help="write the compiled (lowered, fused) graph as ONNX: "
                      "one node per kernel task, its stream in the node's doc string")
    _model_options(plan)
    cli_devices.spread_options(plan)
    plan.set_defaults(fn=cmd_plan)
    cli_graph.register(sub)
    cli_inspect.register(sub)
    cli_sweep.register(sub)
    cli_view.register(sub)
    cli_decode.register(sub)
    cli_calibrate.register(sub)
    cli_completion.register(sub)
    return p


def check_settings() -> None:
    """The environment's settings are options too: a bad one is refused before anything runs,
    whether or not this model would read it."""
    from graphexec._limits import host_budget
    from graphexec.engine.control_runs import max_iterations

    host_budget()
    max_iterations()


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra:   # the command's own help, not the top level's, says what it takes
        cli_completion._commands(p)[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        with sigterm_unwinds():   # SIGTERM unwinds like Ctrl-C: temporary files and folders are removed
            check_settings()
            load_kernels(getattr(args, "kernels", None))
            return args.fn(args)
    except GraphExecError as e:
        print(f"graphexec: error: {term(e)}", file=sys.stderr)   # one line, whatever names it quotes
        return 2
    except BrokenPipeError:  # the reader (e.g. `head`) went away: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Terminated:
        print("graphexec: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("graphexec: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001  (anything else is our bug)
        if os.environ.get("GRAPHEXEC_DEBUG"):
            raise
        where = "".join(f" ({note})" for note in getattr(e, "__notes__", ()))
        print(f"graphexec: internal error: {type(e).__name__}: {term(e)}{term(where)} "
              "(set GRAPHEXEC_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1
