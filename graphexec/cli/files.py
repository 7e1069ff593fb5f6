"""The command line's files: ``--input`` arrays read header first, and outputs that may not
replace what the command reads or each other.

A ``--save``, ``--trace``, ``--plot`` or ``--profile`` target that is the model, an input,
the device profile, a kernels file or another output of the same command is refused
before the run, comparing files (inodes, so hard links and symlinks count) rather than
spellings.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

from graphexec._arrays import ArrayFileError, header, read
from graphexec._files import check_targets
from graphexec.cli.values import read_npz_value
from graphexec.errors import FeedError
from graphexec.frontend.provenance import files_read

OUTPUTS = ("save", "trace", "plot")


def read_input(name: str, path: str, profile: Any = None) -> Any:
    """The array of ``--input NAME=PATH`` (.npy), or the value NAME of a .npz in the form
    ``--save`` writes (``values.py``: a tensor, sequence, map or optional), refused from its
    headers when it holds objects or needs more than the host budget or the device's memory."""
    hbm = None if profile is None else (profile.name, profile.hbm_capacity_bytes)
    try:
        if path.endswith(".npz"):
            return native(read_npz_value(name, path, hbm))
        header(path, archive=False, hbm=hbm)
        return native(read(path))
    except ArrayFileError as e:
        raise FeedError(f"--input {name}: {path}: {e}") from None


def native(a: Any) -> Any:
    """A .npy array as graphexec takes it: in this machine's byte order (a big-endian file is
    swapped, losslessly), and a unicode array (how --save writes a string tensor) as ONNX's
    object array of str."""
    if isinstance(a, list):
        return [native(x) for x in a]
    if isinstance(a, np.ndarray):
        if a.dtype.kind == "U":
            return a.astype(object)
        if a.dtype.byteorder not in ("=", "|") and a.dtype.newbyteorder("=") != a.dtype:
            return a.astype(a.dtype.newbyteorder("="))
    return a


def check_distinct(args: argparse.Namespace, graph: Any = None) -> None:
    """Refuse an output that is a file the command reads, or the target of another output;
    with the loaded ``graph``, the files it read too (constants, external data, its profile)."""
    from graphexec.profiling.export import FILES

    outputs: list[tuple[str, Any, tuple[str, ...]]] = [
        (f"--{option}", getattr(args, option), ()) for option in OUTPUTS if getattr(args, option, None)]
    if getattr(args, "profile", None):
        outputs.append(("--profile", args.profile, FILES))
    if not outputs:
        return
    sources: list[tuple[str, Any]] = [("the model", args.model)] if getattr(args, "model", None) else []
    for item in getattr(args, "input", None) or ():
        name, _, path = item.partition("=")
        sources.append((f"the input {name}", path))
    device = getattr(args, "device", None)
    if device and os.path.exists(device):
        sources.append(("the device profile", device))
    sources += [("a kernels file", path) for path in getattr(args, "kernels", None) or ()]
    if graph is not None:
        sources += [("a file the model reads", path) for path in files_read(graph)]
        profile = graph.meta.get("options", {}).get("device", "")
        if profile.endswith((".yaml", ".yml")):
            sources.append(("the model's device profile", profile))
    check_targets(outputs, sources)
