"""The host memory budget: the one number every size read from a file or a declaration is
checked against before the bytes are spent.

``GRAPHEXEC_HOST_BUDGET`` (bytes) sets it; by default it is half of this machine's physical
memory, so a hostile header or declaration is refused with one line instead of ending in
MemoryError (or the kernel's OOM killer) halfway through a load. :class:`BoundedLoader`
does the same for YAML: an alias bomb, a self-referencing alias or nesting that would
recurse past Python's limit is refused while the document is composed. ``gc_paused``
keeps the cyclic collector from rescanning a large graph's many small objects while it is
built (a load or a compile).
"""

from __future__ import annotations

import gc
import os
from typing import Any

import yaml

from graphexec.errors import GraphExecError, ModelLoadError

ENV = "GRAPHEXEC_HOST_BUDGET"


class gc_paused:   # noqa: N801   (used as the function it was: ``with gc_paused():``)
    """Pause the cyclic garbage collector (cycles made meanwhile are collected later).
    A class, not a ``@contextmanager`` generator: entering and leaving one of those cost
    more than a small model's whole timing-only run spends outside the simulator per task."""

    __slots__ = ("enabled",)

    def __enter__(self) -> None:
        self.enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            gc.enable()


def collect_due() -> None:
    """Let the collection that a paused stretch's allocations made due run now: ``gc_paused``
    defers it (the young generation's count passes its threshold meanwhile) to the next
    allocation, which one here is; the collector picks the generation by its own rule.
    A compile calls it, so that the young objects it made are walked inside it, not at
    the start of whatever runs next (a densenet121 compile left 1.7-4 ms of collection
    to the first ``simulate``). The collector's settings are left as they are."""
    if gc.isenabled():
        _ = set()   # a tracked object's allocation (a set: lists, dicts and tuples reuse freed ones, unchecked)


PROMOTE_AT = 200_000   # young objects past which a compile's are promoted, not walked (``promote_young``)


def promote_young(least: int = PROMOTE_AT) -> bool:
    """Move the objects the collector tracks into its oldest generation without walking
    them, when a paused stretch left at least ``least`` young ones (a large graph's
    compile: the walk that ``collect_due`` runs then took 0.4-0.5 s of a 50,000-node
    session, and every object in it survives as the plan). ``gc.freeze`` then
    ``gc.unfreeze`` move the generations' lists whole; cycles made meanwhile wait for the
    next full collection. Nothing is done where anything is frozen already (an
    application's ``gc.freeze`` stays as it is). True if moved."""
    if gc.get_count()[0] < least or gc.get_freeze_count():
        return False
    gc.freeze()
    gc.unfreeze()
    return True


def host_budget() -> tuple[int, str]:
    """(bytes, where the number comes from), read each time so the variable can change."""
    text = os.environ.get(ENV, "").strip()
    if text:
        try:
            value = int(text)
        except ValueError:
            raise GraphExecError(f"{ENV}={text!r}: must be a number of bytes") from None
        if value < 1:
            raise GraphExecError(f"{ENV}={text!r}: must be at least 1 byte")
        return value, ENV
    return _physical() // 2, f"half of this host's memory; {ENV} sets it"


# What loading a model costs per byte of its file, measured with ru_maxrss in a fresh process:
# an ONNX file 2.0x (its bytes, then the parsed proto; a 200 MiB initializer), a YAML graph
# 166x on a 20,000-node chain (PyYAML's nodes, the plain data, the IR), rounded up to 200.
LOAD_FACTOR = {"ONNX": 2, "YAML": 200}


def check_file_size(path: str | os.PathLike[str], kind: str) -> None:
    """Refuse a model file whose loading would cost more than the host budget, before reading it."""
    size = os.path.getsize(path)
    problem = over_budget(size * LOAD_FACTOR[kind])
    if problem:
        raise ModelLoadError(f"{path}: loading {size} bytes of {kind} takes about {LOAD_FACTOR[kind]}x that, "
                             f"so it {problem}")


def _physical() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # no sysconf: assume a small laptop
        return 8 << 30


def over_budget(nbytes: int, hbm: tuple[str, int] | None = None) -> str | None:
    """Why ``nbytes`` cannot be held (the host budget, or ``hbm``: (device name, bytes)), or None."""
    if hbm is not None and nbytes > hbm[1]:
        return f"needs {nbytes} bytes; device {hbm[0]} has {hbm[1]} bytes"
    budget, source = host_budget()
    if nbytes > budget:
        return f"needs {nbytes} bytes, more than the host budget of {budget} bytes ({source})"
    return None


MAX_NESTING = 100  # levels of lists and mappings; composing recurses, so a bound keeps it finite
ALIAS_EXTRA_MAX = 100_000  # nodes that aliases may add beyond those the text itself holds


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses what would make a walk over the document endless or huge: nesting past
    MAX_NESTING, an alias inside the node it names (a cycle), and aliases that expand the
    document by more than ALIAS_EXTRA_MAX nodes (a "billion laughs" bomb). Each node's
    expanded size is counted as it is composed, so nothing is expanded to find out."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = self._composed = 0
        self._open: set[str] = set()  # anchors of the nodes being composed
        self._size: dict[int, int] = {}  # id(node) -> nodes it stands for once aliases are expanded

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open:
                raise _refused(f"the alias *{event.anchor} is used inside the node it names, so the "
                               "document would contain itself", event.start_mark)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_NESTING:
            raise _refused(f"lists and mappings nest more than {MAX_NESTING} levels deep", event.start_mark)
        if event.anchor is not None:
            self._open.add(event.anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
            self._open.discard(event.anchor or "")
        self._count(node)
        return node

    def _count(self, node: yaml.Node) -> None:
        self._composed += 1
        children = node.value if isinstance(node, yaml.SequenceNode) else (
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else [])
        size = 1 + sum(self._size.get(id(c), 1) for c in children)
        self._size[id(node)] = size
        if size > self._composed + ALIAS_EXTRA_MAX:
            raise _refused(f"aliases expand this node to {size} nodes, more than {ALIAS_EXTRA_MAX} beyond "
                           "what the file holds (an alias bomb)", node.start_mark)


def _refused(problem: str, mark: Any) -> yaml.MarkedYAMLError:
    return yaml.MarkedYAMLError(problem=problem, problem_mark=mark)
