"""Issue 39's classes 1-5, 8 and 9 (untrusted names, `view` input, profiles, the exit-time
profile, eager arguments, loop budgets, the sweep front end), each case with its exact
line and exit code. ``Case`` is round two's: the maker gets a fresh folder ``d`` and
returns the command line. The corpus report (conftest.py) counts them per class.
"""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import helper

from hardening import bad_inputs as B
from hardening.round_two import Case, Make

# what a hostile name carries: a screen clear, an OSC title, BEL, CR, a bidi override and isolate
HOSTILE = "\x1b[2J\x1b]0;pwn\x07\r\u202e\u2066"
SHOWN = "\\x1b[2J\\x1b]0;pwn\\x07\\x0d\\u202e\\u2066"   # the same, as a terminal is shown it
REPR = SHOWN.replace("\\x0d", "\\r")   # where the message quotes the name with repr()
SPACED = SHOWN.replace("\\x0d", " ")    # an error message is one line: its whitespace runs are one space
mk = helper.make_node


def _named(nodes: list[onnx.NodeProto], file: str = "m.onnx", **kw: object) -> Make:
    return lambda d: ["run", B.write(d, file, B.model(nodes, **kw))]  # type: ignore[arg-type]


def _relu_with(*args: str) -> Make:
    return lambda d: ["run", B.write(d, "m.onnx", B.relu_model()), *args]


NAMES = [
    Case("names", "dangling_input_named_hostile",
         _named([mk("Add", ["x", "g" + HOSTILE], ["y"], name="add")]),
         "{d}/m.onnx: node add (Add) reads 'g" + REPR + "', which no node, input or initializer produces"),
    Case("names", "node_named_hostile_in_a_cycle",
         _named([mk("Add", ["x", "b"], ["a"], name="A" + HOSTILE), mk("Relu", ["a"], ["b"], name="B"),
                 mk("Relu", ["a"], ["y"], name="C")]),
         "{d}/m.onnx: the graph has a cycle: A" + SPACED + " (Add) -> B (Relu) -> A" + SPACED + " (Add)"),
    Case("names", "file_named_hostile", lambda d: ["run", d / f"m{HOSTILE}.onnx"],
         "{d}/m" + SPACED + ".onnx: no such file"),
    Case("names", "feed_named_hostile", _relu_with("--shape", f"z{HOSTILE}=2,3"),
         "a shape is given for 'z" + REPR + "', which is not an input of the graph; inputs are: x"),
    Case("names", "input_file_named_hostile", _relu_with("--input", f"x=nope{HOSTILE}.npy"),
         "--input x: nope" + SPACED + ".npy: no such file"),
    Case("names", "output_written_twice_newline",
         _named([mk("Relu", ["x"], ["y\nfake line"], name="r1"), mk("Relu", ["x"], ["y\nfake line"], name="r2")],
                outputs=("y\nfake line",)),
         "{d}/m.onnx: value 'y\\nfake line' is written twice (again by node r2 (Relu))"),
    Case("names", "yaml_node_named_bidi",
         lambda d: ["run", B.write(d, "g.yaml", B.yaml_graph(replace={"name: act, op: Relu":
                                                                      'name: "a\\u202Ect", op: Frobnicate'}))],
         "{d}/g.yaml:8:25: node 'a\\u202ect': unknown op 'Frobnicate'; closest known: Concat"),
    Case("names", "device_profile_named_hostile",
         lambda d: ["run", B.write(d, "m.onnx", B.relu_model()), "--device", str(d / f"dev{HOSTILE}.yaml")],
         "{d}/dev" + SPACED + ".yaml: cannot read device profile: No such file or directory"),
]

ROUND_THREE: list[Case] = NAMES


def hostile_model(folder: Path) -> Path:
    """A valid model whose graph, node, tensor and file names carry ``HOSTILE``, a newline and
    a leading formula character: what class 1 renders on every medium."""
    bad = "=cmd|' /C calc'!A0" + HOSTILE
    nodes = [mk("Relu", ["x"], ["@t" + HOSTILE], name=bad), mk("Neg", ["@t" + HOSTILE], ["+y\nfake"], name="-n2\nfake")]
    return B.write(folder, f"m{HOSTILE}.onnx", B.model(nodes, outputs=("+y\nfake",), name="g" + HOSTILE))
