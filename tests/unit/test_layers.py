"""The packages import one way: each only from the layers below it, with no cycle.

Every import counts, also those inside functions (they hide cycles, they do not remove
them); only ``if TYPE_CHECKING:`` blocks are left out, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[2] / "graphexec"
# bottom to top; packages in one layer may not import each other
LAYERS = [
    {"errors"},
    {"_limits"},         # the host memory budget
    {"_files", "_arrays"},
    {"ir"},
    {"plan"},
    {"kernels", "runtime"},
    {"frontend", "passes"},
    {"acl"},
    {"hccl"},            # HCCL sits on the ACL runtime (its STATE: devices, streams, the server)
    {"profiling"},
    {"engine"},
    {"cluster"},         # several cards over the engine
    {"npu"},             # eager mode: tensors launched on the runtime, Module runs engine's plans
    {"api"},             # Session, compare: the face above one card and many
    {"sweep"},
    {"__init__"},
    {"cli"},             # the command line, over the public API
    {"__main__"},        # python -m graphexec
]
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _package(path: Path) -> str:
    rel = path.relative_to(PACKAGE).parts
    return rel[0].removesuffix(".py")


def _type_checking_only(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for n in ast.walk(node)}
    return skip


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        if node.module == "graphexec":
            return [f"graphexec.{a.name}" for a in node.names]
        return [node.module]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return []


def package_edges() -> dict[tuple[str, str], str]:
    """(importer, imported) package pairs, each with one file that makes it."""
    edges: dict[tuple[str, str], str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _package(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            for target in _targets(node):
                parts = target.split(".")
                if parts[0] == "graphexec" and len(parts) > 1 and parts[1] != src:
                    edges.setdefault((src, parts[1]), str(path.relative_to(PACKAGE)))
    return edges


def test_every_package_has_a_layer():
    found = {_package(p) for p in PACKAGE.rglob("*.py")}
    assert found <= set(LEVEL), f"add {sorted(found - set(LEVEL))} to LAYERS"


def test_no_import_cycle_between_packages():
    g = nx.DiGraph(list(package_edges()))
    cycles = list(nx.simple_cycles(g))
    assert not cycles, f"import cycles: {cycles}"


def test_imports_only_point_down():
    wrong = [f"{a} -> {b} ({where})" for (a, b), where in package_edges().items() if LEVEL[a] <= LEVEL[b]]
    assert not wrong, "imports against the layers: " + "; ".join(wrong)


def test_the_checker_sees_function_level_imports():
    tree = ast.parse("def f():\n    from graphexec.engine import x\nif TYPE_CHECKING:\n    import graphexec.cli\n")
    skip = _type_checking_only(tree)
    seen = [t for n in ast.walk(tree) if id(n) not in skip for t in _targets(n)]
    assert seen == ["graphexec.engine"]
