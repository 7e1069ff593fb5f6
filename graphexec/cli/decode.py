"""``graphexec decode MODEL --prompt 1,2,3 --steps 16``: a decode loop on a user's decoder
exported with its KV cache (``api/decode.py``), the cache kept on the device; prints the
tokens and the simulated time per token, and with ``--profile DIR`` writes every step on
one timeline (a ``PROF_*`` folder, ``graphexec view`` reads it)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

import graphexec as gx
from graphexec._render import term
from graphexec.cli.jsonout import emit
from graphexec.errors import GraphExecError

PLANS_KEPT = 4


def register(sub: Any) -> None:
    """Add the ``decode`` command to the CLI's subparsers."""
    p = sub.add_parser("decode", help="run a decoder with its KV cache on the device: a prompt step, then one "
                                      "token per step; the simulated time per token")
    p.add_argument("model", help="an .onnx decoder with past_key_values.* inputs and present.* outputs")
    p.add_argument("--prompt", required=True, metavar="ID,ID,...", help="the prompt's token ids")
    p.add_argument("--steps", type=int, default=16, help="tokens to generate after the prompt (default 16)")
    p.add_argument("--launch", choices=["graph", "host"], default="graph",
                   help="graph: each step's task list loaded with its plan, as a captured graph replays it "
                        "(default); host: every task launched from the host, as eager decoding")
    p.add_argument("--device", help="built-in device name or a profile .yaml (default ascend910)")
    p.add_argument("--profile", metavar="DIR", help="write every step on one timeline as a PROF_* folder under DIR")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(fn=cmd_decode)


def _prompt(text: str) -> list[int]:
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise GraphExecError(f"--prompt {text!r}: token ids are integers separated by commas") from None
    if not ids or any(i < 0 for i in ids):
        raise GraphExecError(f"--prompt {text!r}: give one or more token ids >= 0")
    return ids


def cmd_decode(args: argparse.Namespace) -> int:
    prompt = _prompt(args.prompt)
    if args.steps < 0:
        raise GraphExecError(f"--steps {args.steps}: must be >= 0")
    if args.profile and Path(args.profile).exists() and not Path(args.profile).is_dir():
        raise GraphExecError(f"--profile {args.profile}: exists and is not a folder")
    # each step's sequence length is a signature never seen again: keep a few plans, not all
    session = gx.Session(gx.load(args.model), device=args.device, launch=args.launch, max_plans=PLANS_KEPT)
    if args.profile:
        from graphexec.profiling.env import profile

        with profile(args.profile) as collector:
            run = session.decode(prompt, args.steps)
        where = collector.path
    else:
        run = session.decode(prompt, args.steps)
        where = None
    doc = {"model": str(args.model), "device": session.profile.name, "launch": args.launch, **run.to_dict(),
           "profile": str(where) if where else None}
    if args.json:
        emit("decode", doc)
        return 0
    print(f"{term(args.model)} on {term(session.profile.name)} ({args.launch} launch), prompt of {len(prompt)} tokens")
    print(f"  tokens: {' '.join(map(str, run.tokens))}")
    print(f"  prompt step {doc['prompt_us']:,.1f} us; per token {doc['per_token_us'] or 0.0:,.1f} us "
          f"(simulated device time, {args.steps} steps)")
    if doc["gaps_us"]:
        print(f"  device idle between steps (host: copies out, sync, feeds, launch): "
              f"{float(np.mean(doc['gaps_us'])):,.1f} us on average")
    if where:
        print(f"  every step on one timeline: {term(where)}")
    return 0
