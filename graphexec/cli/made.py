"""``graphexec run``'s inputs it made itself: the shapes it printed for them, and when a run
on them fails, which dims to set with ``--shape`` (a symbolic dim at 1 is a 1x1 image or a
one-sample signal, and the failure otherwise surfaces deep inside an op)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import numpy as np

from graphexec._render import term
from graphexec.cli.args import UsageError
from graphexec.engine.made_inputs import is_mask, unset_dims
from graphexec.errors import GraphExecError
from graphexec.ir import Graph


def input_lines(graph: Graph, feeds: Mapping[str, Any], made: list[str]) -> list[str]:
    """One line per input: its dtype and shape, and for the inputs made here how (and from which dims)."""
    lines = []
    for name in graph.inputs:
        v = feeds.get(name)
        if not isinstance(v, np.ndarray):
            continue
        shape = ",".join(map(str, v.shape))
        how = ""
        if name in made:
            declared = graph.values[name].type.shape or ()
            named = ", ".join(f"{d}={n}" for d, n in zip(declared, v.shape) if isinstance(d, str))
            kind = "ones (a mask)" if v.dtype.kind in "biu" and is_mask(name) else "made"
            how = f" ({kind}{'; ' + named if named else ''})"
        lines.append(term(f"  input {name}: {v.dtype.name}[{shape}]{how}"))
    return lines


def shape_hint(graph: Graph, made: list[str], shapes: Mapping[str, tuple[int, ...]]) -> str | None:
    """Which dims of the made inputs defaulted to 1, and the --shape flags that set them; None when none did."""
    unset = {n: dims for n, dims in unset_dims(graph, shapes).items() if n in made}
    if not unset:
        return None
    flags = " ".join(f"--shape {n}=" + ",".join(str(d) if isinstance(d, int) and d >= 0 else "?"
                                                for d in graph.values[n].type.shape or ()) for n in unset)
    dims = "; ".join(f"{n}: {', '.join(ds)}" for n, ds in unset.items())
    return f"the inputs were made with these dims at 1 ({dims}); set them with {flags}"


@contextmanager
def hinted(graph: Graph, made: list[str], shapes: Mapping[str, tuple[int, ...]]) -> Iterator[None]:
    """A failure of a run on made inputs names the dims to set: a bad-input line gains the
    hint, anything else (our bug, or an op that did not say) carries it as a note."""
    try:
        yield
    except GraphExecError as e:
        hint = shape_hint(graph, made, shapes)
        if hint is None:
            raise
        raise UsageError(f"{e}; {hint}") from None
    except Exception as e:
        hint = shape_hint(graph, made, shapes)
        if hint is not None:
            e.add_note(hint)
        raise
