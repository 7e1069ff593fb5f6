"""``graphexec view PROFILE [PROFILE_B] [-o report.html]``: the profile as one self-contained
HTML page (``profiling/report_html.py``), as ``msprof --view`` opens it; two profiles side by
side (``profiling/report_diff.py``). ``graphexec diff A B [--json]`` prints the comparison."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from graphexec._files import check_output, check_targets
from graphexec._render import term, term_lines
from graphexec.cli.jsonout import emit
from graphexec.profiling.diff import compare, compare_text
from graphexec.profiling.report_diff import write_diff
from graphexec.profiling.report_html import write_report
from graphexec.profiling.view_data import load, profile_files


def register(sub: Any) -> None:
    """Add the ``view`` command to the CLI's subparsers."""
    p = sub.add_parser("view", help="write a profile (PROF_* folder, --profile folder or timeline.json) as one "
                                    "self-contained HTML report")
    p.add_argument("profile", help="a PROF_* or *_ascend_pt folder (or the folder holding them), a --profile "
                                   "folder, or a timeline.json")
    p.add_argument("other", nargs="?", metavar="PROFILE_B", help="a second profile: the page shows the two side "
                                                                 "by side (A before, B after)")
    p.add_argument("-o", "--output", metavar="REPORT.html", help="where to write it (default: report.html in the "
                                                                 "profile's folder)")
    p.set_defaults(fn=cmd_view)
    d = sub.add_parser("diff", help="compare two profiles op by op and cause by cause, and explain the makespan "
                                    "difference")
    d.add_argument("a", metavar="PROFILE_A", help="the profile before (any input `view` takes)")
    d.add_argument("b", metavar="PROFILE_B", help="the profile after")
    d.add_argument("--json", action="store_true", help="print the comparison as JSON")
    d.set_defaults(fn=cmd_diff)


def cmd_view(args: argparse.Namespace) -> int:
    src = Path(args.profile)
    name = "report.html" if args.other is None else "diff.html"
    out = args.output or str((src if src.is_dir() else src.parent) / name)
    check_output(out, "-o")
    inputs = [src] + ([Path(args.other)] if args.other is not None else [])
    check_targets([("-o", out, ())], [("the profile", f) for p in inputs for f in profile_files(p)])
    if args.other is None:
        write_report(str(src), out)
    else:
        write_diff(str(src), args.other, out)
    print(f"report written to {term(out)}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    d = compare(load(args.a), load(args.b))
    if args.json:
        emit("diff", d)
    else:
        print(term_lines(compare_text(d)))
    return 0
