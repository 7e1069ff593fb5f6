"""The command line's argument values: NAME=VALUE pairs, shapes, input files and stream counts,
each refused with one line naming the flag when malformed."""

from __future__ import annotations

from typing import Any, Sequence

from graphexec.cli import files as cli_files
from graphexec.errors import GraphExecError


class UsageError(GraphExecError):
    """A command-line argument is malformed."""


def pairs(items: Sequence[str] | None, what: str) -> dict[str, str]:
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UsageError(f"{what} {item!r} must look like NAME=VALUE")
        out[name] = value
    return out


def shapes(items: Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for name, text in pairs(items, "--shape").items():
        try:
            dims = tuple(int(d) for d in text.split(","))
        except ValueError:
            raise UsageError(f"--shape {name}={text}: dims must be integers separated by commas") from None
        if any(d < 0 for d in dims):
            raise UsageError(f"--shape {name}={text}: dims must be >= 0")
        shapes[name] = dims
    return shapes


def inputs(items: Sequence[str] | None, profile: Any = None) -> dict[str, Any]:
    return {name: load_npy(name, path, profile) for name, path in pairs(items, "--input").items()}


def load_npy(name: str, path: str, profile: Any = None) -> Any:
    return cli_files.read_input(name, path, profile)   # header first: objects and sizes refused before reading


def streams(text: str | None) -> int | str | None:
    if text is None or text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"--streams {text!r}: must be an integer >= 1 or 'auto'") from None
