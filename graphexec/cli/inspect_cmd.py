"""``graphexec inspect MODEL [--json]``: a model's inputs and outputs (names, dtypes,
shapes, symbolic dims), opsets, op counts by type, which op types run on own kernels and
which fall back to onnx.reference, and the weights' size (``api/inspect.py``), before
anything compiles or runs."""

from __future__ import annotations

import argparse
from typing import Any

import graphexec as gx
from graphexec._render import term_lines
from graphexec.cli.jsonout import emit


def cmd_inspect(args: argparse.Namespace) -> int:
    found = gx.inspect(gx.load(args.model))
    if args.json:
        emit("inspect", found.to_dict())
    else:
        print(term_lines(found.text()))
    return 0


def register(sub: Any) -> None:
    """Add ``inspect`` to the CLI's subparsers."""
    p = sub.add_parser("inspect", help="show a model's inputs, outputs, opsets, ops, kernels and weights")
    p.add_argument("model", help="an .onnx or .yaml/.yml graph")
    p.add_argument("--kernels", action="append", metavar="FILE.py", help="Python file registering custom kernels")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(fn=cmd_inspect)
