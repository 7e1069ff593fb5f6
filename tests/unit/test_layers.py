"""The packages import one way: each only from the layers below it, with no cycle.

Every import counts: those inside functions (they hide cycles, they do not remove them)
and those under ``if TYPE_CHECKING:`` (a type-only arrow still ties a lower room to an
upper one's names). No room imports another's private (underscore) module. The order is
DESIGN.md's; ``tests/import_picture.py`` parses the imports and prints the picture.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
from import_picture import LAYERS, LEVEL, PACKAGE, ROOT, edges, kinds_of, module_name, private_reaches, room, targets
from import_picture import upward as upward_edges

DESIGN_ORDER = ["errors", "ir", "plan", "{kernels, runtime}", "{frontend, passes}", "acl", "hccl", "profiling",
                "engine", "cluster", "npu", "api", "{calibrate, sweep}", "cli"]


def test_every_package_has_a_layer():
    found = {room(module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert found <= set(LEVEL), f"add {sorted(found - set(LEVEL))} to LAYERS in tests/import_picture.py"


def test_the_layers_are_designs_order():
    """The test's order is DESIGN's sentence (copied in DESIGN_ORDER), and the README says the same."""
    public = ["{" + ", ".join(sorted(layer)) + "}" if len(layer) > 1 else next(iter(layer)) for layer in LAYERS
              if not any(name.startswith("_") for name in layer)]
    assert public == DESIGN_ORDER
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert " → ".join(DESIGN_ORDER) in readme


def test_no_import_cycle_between_packages():
    g = nx.DiGraph((e.src_room, e.dst_room) for e in edges() if e.src_room != e.dst_room)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, f"import cycles: {cycles}"


def test_imports_only_point_down_type_only_ones_too():
    wrong = sorted({f"{e.src} -> {e.dst} [{e.kind}] ({e.where})" for e in upward_edges(edges())})
    assert not wrong, "imports against the layers: " + "; ".join(wrong)


def test_no_room_imports_another_rooms_private_module():
    wrong = sorted({f"{e.src} -> {e.dst} ({e.where})" for e in private_reaches(edges())})
    assert not wrong, "private modules reached from outside their package: " + "; ".join(wrong)


def test_the_checker_sees_function_level_and_type_only_imports():
    tree = ast.parse("def f():\n    from graphexec.engine import x\nif TYPE_CHECKING:\n    import graphexec.cli\n")
    kinds = kinds_of(tree)
    seen = [(t, kinds.get(id(n), "module")) for n in ast.walk(tree) for t in targets(n, "graphexec.plan", False)]
    assert sorted(seen) == [("graphexec.cli", "type"), ("graphexec.engine", "function")]


def test_the_checker_resolves_relative_imports_and_submodules():
    tree = ast.parse("from . import tasks\nfrom ..engine import compiled\n")
    found = [t for n in ast.walk(tree) for t in targets(n, "graphexec.plan.memory", False)]
    assert found == ["graphexec.plan.tasks", "graphexec.engine.compiled"]
    assert Path(PACKAGE / "plan" / "tasks.py").is_file()
