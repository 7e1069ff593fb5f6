"""``graphexec view PROFILE_DIR|timeline.json [-o report.html]``: the profile as one
self-contained HTML page (``profiling/report_html.py``), as ``msprof --view`` opens it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from graphexec._files import check_output, check_targets
from graphexec._render import term
from graphexec.profiling.report_html import write_report
from graphexec.profiling.view_data import profile_files


def register(sub: Any) -> None:
    """Add the ``view`` command to the CLI's subparsers."""
    p = sub.add_parser("view", help="write a profile (PROF_* folder, --profile folder or timeline.json) as one "
                                    "self-contained HTML report")
    p.add_argument("profile", help="a PROF_* folder (or the folder holding them), a --profile folder, or a "
                                   "timeline.json")
    p.add_argument("-o", "--output", metavar="REPORT.html", help="where to write it (default: report.html in the "
                                                                 "profile's folder)")
    p.set_defaults(fn=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    src = Path(args.profile)
    out = args.output or str((src if src.is_dir() else src.parent) / "report.html")
    check_output(out, "-o")
    check_targets([("-o", out, ())], [("the profile", f) for f in profile_files(src)])
    write_report(str(src), out)
    print(f"report written to {term(out)}")
    return 0
