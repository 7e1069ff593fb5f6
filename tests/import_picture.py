"""The package's import picture: rooms, arrows that run back up, circles, private reaches.

Every import counts: module level, inside functions (they hide circles, they do not remove
them) and under ``if TYPE_CHECKING:`` (a type-only arrow still ties the lower room to the
upper one's names); each edge says which kind it is. tests/unit/test_layers.py asserts on
this picture; ``python tests/import_picture.py`` prints it.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "graphexec"

# DESIGN.md's order, bottom to top; rooms in one layer may not import each other. The
# top-level private modules (_limits, _switch, _render, _files, _arrays) are the root package's own helpers.
LAYERS: list[set[str]] = [
    {"errors"},
    {"_limits", "_switch", "_render"},
    {"_files", "_arrays"},
    {"ir"},
    {"plan"},
    {"kernels", "runtime"},
    {"frontend", "passes"},
    {"acl"},
    {"hccl"},
    {"profiling"},
    {"engine"},
    {"cluster"},
    {"npu"},
    {"api"},
    {"sweep", "calibrate"},
    {"__init__"},
    {"cli"},
    {"__main__"},
]
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}


@dataclass(frozen=True)
class Edge:
    """One import: from module ``src`` of room ``src_room`` to module ``dst``."""

    src: str
    dst: str
    kind: str   # "module", "function" or "type"
    where: str

    @property
    def src_room(self) -> str:
        return room(self.src)

    @property
    def dst_room(self) -> str:
        return room(self.dst)


def room(module: str) -> str:
    """graphexec.engine.compiled -> engine; graphexec._files -> _files; graphexec -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def kinds_of(tree: ast.Module) -> dict[int, str]:
    """id(node) -> "type" under TYPE_CHECKING, "function" inside a def; module level otherwise."""
    kind: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                kind.setdefault(id(inner), "function")
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in ast.walk(node):
                kind[id(inner)] = "type"
    return kind


def targets(node: ast.AST, here: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parent = here.split(".")[: len(here.split(".")) - node.level + (1 if is_package else 0)]
        base = ".".join([*parent, *([base] if base else [])])
    # `from graphexec.x import y`: y may be a module (graphexec.x.y) or a name in graphexec.x
    return [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def edges() -> list[Edge]:
    """Every import between graphexec's modules."""
    out: list[Edge] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        kinds = kinds_of(tree)
        for node in ast.walk(tree):
            for target in targets(node, here, path.name == "__init__.py"):
                if target.split(".")[0] == "graphexec" and target != here:
                    out.append(Edge(here, target, kinds.get(id(node), "module"), str(path.relative_to(ROOT))))
    return out


def upward(all_edges: list[Edge]) -> list[Edge]:
    """Edges from a room to one in its own layer or above (same-room edges are inside a room)."""
    return [e for e in all_edges if e.src_room != e.dst_room and LEVEL[e.src_room] <= LEVEL[e.dst_room]]


def private_reaches(all_edges: list[Edge]) -> list[Edge]:
    """Imports of another room's underscore module (the root's own _files etc. are shared)."""
    def private(e: Edge) -> bool:
        parts = e.dst.split(".")
        return len(parts) > 2 and any(p.startswith("_") and p != "__init__" for p in parts[2:])
    return [e for e in all_edges if e.src_room != e.dst_room and private(e)]


def room_circles(all_edges: list[Edge]) -> list[list[str]]:
    g = nx.DiGraph((e.src_room, e.dst_room) for e in all_edges if e.src_room != e.dst_room)
    return sorted(sorted(c) for c in nx.simple_cycles(g))


def module_circles(all_edges: list[Edge]) -> list[list[str]]:
    """Strongly connected sets of modules (every import kind counted), largest first."""
    g = nx.DiGraph((e.src, e.dst) for e in all_edges)
    return sorted((sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1), key=len, reverse=True)


def rooms() -> dict[str, tuple[int, int]]:
    """room -> (files, lines)."""
    out: dict[str, tuple[int, int]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = room(module_name(path))
        files, lines = out.get(name, (0, 0))
        out[name] = (files + 1, lines + len(path.read_text(encoding="utf-8").splitlines()))
    return dict(sorted(out.items(), key=lambda kv: LEVEL.get(kv[0], 99)))


def main() -> int:
    all_edges = edges()
    print("rooms (files, lines), bottom to top:")
    for name, (files, lines) in rooms().items():
        print(f"  {name:10s} {files:3d} {lines:6d}" + ("" if name in LEVEL else "   (no layer)"))
    up = sorted(set(upward([e for e in all_edges if e.src_room in LEVEL and e.dst_room in LEVEL])), key=str)
    print(f"arrows running back up: {len(up)} "
          f"({sum(e.kind == 'type' for e in up)} type-only, {sum(e.kind == 'function' for e in up)} in functions)")
    for e in up:
        print(f"  {e.src} -> {e.dst} [{e.kind}]")
    priv = sorted(set(private_reaches(all_edges)), key=str)
    print(f"imports of another room's private module: {len(priv)}")
    for e in priv:
        print(f"  {e.src} -> {e.dst} [{e.kind}]")
    print(f"room circles: {room_circles(all_edges)}")
    circles = module_circles(all_edges)
    print(f"module circles: {len(circles)} (sizes {[len(c) for c in circles]})")
    for c in circles:
        print("  " + ", ".join(m.removeprefix("graphexec.") for m in c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
