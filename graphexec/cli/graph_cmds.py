"""The commands about a graph file and the built-in profiles: ``validate``, ``convert``, ``devices``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import graphexec as gx
from graphexec._render import term
from graphexec.cli.jsonout import emit


def cmd_validate(args: argparse.Namespace) -> int:
    from graphexec.frontend.yaml import check_yaml

    if not args.graph.endswith((".yaml", ".yml")):
        graph = gx.load(args.graph)
    else:
        checked, problems = check_yaml(args.graph)
        if args.json and (problems or checked is None):
            emit("validate", {"graph": args.graph, "ok": False, "problems": [str(p) for p in problems]})
            return 2
        for problem in problems:
            print(term(problem), file=sys.stderr)
        if problems or checked is None:
            return 2
        graph = checked
    streams = len(graph.meta["schedule"]["streams"]) if "schedule" in graph.meta else 0
    if args.json:
        emit("validate", {"graph": args.graph, "ok": True, "problems": [], "num_nodes": len(graph.nodes),
                          "num_inputs": len(graph.inputs), "num_outputs": len(graph.outputs),
                          "schedule_streams": streams})
        return 0
    print(f"{term(args.graph)}: ok, {len(graph.nodes)} nodes, {len(graph.inputs)} inputs, {len(graph.outputs)} outputs"
          + (f", a schedule on {streams} streams" if streams else ""))
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from graphexec.frontend.convert import save

    written = save(gx.load(args.input), args.output)
    if args.json:
        emit("convert", {"input": args.input, "written": [str(w) for w in written]})
        return 0
    print("wrote " + " and ".join(map(term, written)))
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    from graphexec.runtime.profiles import builtin_profiles
    from graphexec.runtime.provenance import note, provenance
    from graphexec.runtime.systems import builtin_systems, load_system

    profiles = builtin_profiles()
    systems = [load_system(name) for name in builtin_systems()]
    if args.json:
        emit("devices", {"devices": [{**p.model_dump(), "calibration": provenance(p.sources)}
                                     for p in profiles.values()],
                         "systems": [{**s.model_dump(mode="json"), "calibration": provenance(s.sources)}
                                     for s in systems]})
        return 0
    for p in profiles.values():
        cube = p.units.cube   # the units as the profile names them (an SM, tensor cores on a GPU)
        print(f"{p.name:12s} {p.ai_cores:3d} x {cube.core} ({'coupled' if p.coupled else 'separated'}), "
              f"{p.peak_tflops.cube['float16']:g} TFLOPS fp16 {cube.label}, {p.hbm_bandwidth_gbps:g} GB/s, "
              f"{p.hbm_capacity_bytes / 2**30:g} GiB — {p.description}\n{'':13s}{note(p.sources)}")
    print("\nsystems:")
    for s in systems:
        print(s.describe() + f"\n  {note(s.sources)}")
    return 0


def register(sub: Any) -> None:
    """Add ``validate``, ``convert`` and ``devices`` to the CLI's subparsers."""
    val = sub.add_parser("validate", help="check a YAML graph and list every problem, one per line")
    val.add_argument("graph", help="a .yaml/.yml graph (or any model gx.load reads)")
    val.add_argument("--kernels", action="append", metavar="FILE.py", help="Python file registering custom kernels")
    val.add_argument("--json", action="store_true", help="print JSON (problems too, exit 2 still)")
    val.set_defaults(fn=cmd_validate)
    conv = sub.add_parser("convert", help="write a graph as YAML (+ .npz for big constants) or ONNX")
    conv.add_argument("input", help="a .onnx or .yaml/.yml graph")
    conv.add_argument("output", help="OUT.yaml, OUT.yml or OUT.onnx")
    conv.add_argument("--kernels", action="append", metavar="FILE.py", help="Python file registering custom kernels")
    conv.add_argument("--json", action="store_true", help="print the files written as JSON")
    conv.set_defaults(fn=cmd_convert)
    dev = sub.add_parser("devices", help="list the built-in device profiles and systems")
    dev.add_argument("--json", action="store_true", help="print JSON")
    dev.set_defaults(fn=cmd_devices)
