"""``--input`` in every form a user has at hand: ``NAME=FILE.npy``, ``NAME=FILE.npz`` (the
value NAME of what ``--save`` wrote), ``NAME=FILE.pb`` (an ONNX TensorProto), and with no
``NAME=``: a ``.npz`` whose arrays are named by input, a ``.pb`` that names its input, or a
folder of ``input_0.pb, input_1.pb, ...`` as onnxruntime_perf_test and onnx's backend tests
lay out their test data (a folder of ``test_data_set_N`` folders takes the first set). A
TensorProto with no name is the input of its index (``input_K.pb`` -> the K-th input)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from graphexec._limits import over_budget
from graphexec.cli.files import read_input
from graphexec.errors import FeedError
from graphexec.ir import Graph

PB = re.compile(r"input_(\d+)\.pb$")


def read_inputs(items: Sequence[str] | None, graph: Graph, profile: Any = None) -> dict[str, Any]:
    """The feeds every ``--input`` gives, by input name; a name given twice is an error."""
    feeds: dict[str, Any] = {}
    for item in items or ():
        name, sep, path = item.partition("=")
        if sep and not (name and path):
            raise FeedError(f"--input {item!r} must look like NAME=FILE or FILE")
        got = _one(name, path, profile) if sep else _whole(item, graph, profile)
        for k, v in got.items():
            if k in feeds:
                raise FeedError(f"--input {item}: input {k!r} is given twice")
            feeds[k] = v
    return feeds


def given_names(items: Sequence[str] | None, graph: Graph) -> set[str]:
    """The inputs ``--input`` names, without reading the arrays (for what ``run`` made itself)."""
    names = set()
    for item in items or ():
        name, sep, _ = item.partition("=")
        names |= {name} if sep else set(graph.inputs)   # a whole file or folder: checked when read
    return names


def _one(name: str, path: str, profile: Any) -> dict[str, Any]:
    if path.endswith(".pb"):
        return {name: _pb(path, profile)[1]}
    return {name: read_input(name, path, profile)}


def _whole(path: str, graph: Graph, profile: Any) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        return _folder(p, graph, profile)
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            keys = [k.split("#")[0] for k in z.files]
        unknown = sorted({k for k in keys if k not in graph.inputs})
        if unknown:
            raise FeedError(f"--input {path}: {unknown[0]!r} is not an input of the graph; inputs are: "
                            f"{', '.join(graph.inputs)}")
        return {k: read_input(k, path, profile) for k in dict.fromkeys(keys)}
    if path.endswith(".pb"):
        name, value = _pb(path, profile)
        return {_bind(name, 0, path, graph): value}
    raise FeedError(f"--input {path}: give NAME=FILE, or a .npz, a .pb or a folder of input_0.pb, input_1.pb, ...")


def _folder(folder: Path, graph: Graph, profile: Any) -> dict[str, Any]:
    sets = sorted(d for d in folder.iterdir() if d.is_dir() and d.name.startswith("test_data_set_"))
    if sets and not any(PB.match(f.name) for f in folder.iterdir()):
        folder = sets[0]
    files = sorted(((int(m.group(1)), f) for f in folder.iterdir() if (m := PB.match(f.name))), key=lambda x: x[0])
    if not files:
        raise FeedError(f"--input {folder}: no input_0.pb, input_1.pb, ... in this folder")
    feeds = {}
    for index, f in files:
        name, value = _pb(str(f), profile)
        feeds[_bind(name, index, str(f), graph)] = value
    return feeds


def _bind(name: str, index: int, path: str, graph: Graph) -> str:
    if name:
        if name not in graph.inputs:
            raise FeedError(f"--input {path}: the tensor is named {name!r}, which is not an input of the graph; "
                            f"inputs are: {', '.join(graph.inputs)}")
        return name
    if index >= len(graph.inputs):
        raise FeedError(f"--input {path}: input {index} of a graph with {len(graph.inputs)} inputs")
    return graph.inputs[index]


def _pb(path: str, profile: Any) -> tuple[str, np.ndarray]:
    """An ONNX TensorProto file: its name and array (its size checked before it is read)."""
    from onnx import TensorProto, numpy_helper

    if not os.path.isfile(path):
        raise FeedError(f"--input {path}: no such file")
    hbm = None if profile is None else (profile.name, profile.hbm_capacity_bytes)
    problem = over_budget(os.path.getsize(path), hbm)
    if problem:
        raise FeedError(f"--input {path}: {problem}")
    tensor = TensorProto()
    try:
        tensor.ParseFromString(Path(path).read_bytes())
        return tensor.name, numpy_helper.to_array(tensor)
    except Exception as e:   # a protobuf or conversion failure: the file is not a tensor
        raise FeedError(f"--input {path}: not an ONNX TensorProto ({type(e).__name__}: {e})") from None
