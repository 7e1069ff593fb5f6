"""The fusion rules graphexec implements, by GE's names, and ATC's fusion switch file.

ATC's ``--fusion_switch_file`` turns built-in rules off. CANN documents two shapes:
the JSON one (``{"Switch": {"GraphFusion": {"RuleName": "off", "ALL": "off"},
"UBFusion": {...}}}``, TorchAir's ``fusion_switch_file`` and newer ATC) and the plain
one (a line ``RuleName:off`` per rule, ``fusion_switch.cfg`` in the ATC and AOE
manuals). Names of GE rules graphexec does not implement are accepted and change
nothing, as ATC accepts the names of rules that match nothing in a model.
"""

from __future__ import annotations

import json
from pathlib import Path

from graphexec.errors import GraphExecError

# graph fusion (FE rewrites the graph), in the order they run
GRAPH_RULES = (
    "ConvBatchnormFusionPass",      # Conv -> BatchNormalization: the BN folded into the filter and bias
    "ConvScaleFusionPass",          # Conv -> per-channel Mul/Add (a Scale layer) folded the same way
    "LayerNormONNXFusionPass",      # ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add -> LayerNorm
    "GeluONNXFusionPass",           # Div, Erf, Add, Mul, Mul -> Gelu
    "MatMulBiasAddFusionPass",      # MatMul -> Add(constant bias) -> MatMul with a bias
)
# UB fusion (one TBE kernel keeps the intermediates in the unified buffer)
UB_RULES = (
    "TbeConvDoubleInFusionPass",    # Conv -> Add(other input) [-> elementwise]: residual tails
    "ConvElemwiseUbFusion",         # Conv -> one-input elementwise (Relu, ...): graphexec's name, see graph_fusion.py
    "ATbeMatmulElemwiseFusionPass",  # MatMul/Gemm -> elementwise (activation)
    "TbeReduceElemwiseFusionPass",  # elementwise (scale, mask) -> Softmax: attention scores
    "TbeEltwiseFusionPass",         # up to 6 consecutive elementwise ops
    "AutomaticUbFusion",            # elementwise chains up to 28 (where TbeEltwiseFusionPass is off)
)
RULES = GRAPH_RULES + UB_RULES
_GROUPS = {"GraphFusion": GRAPH_RULES, "UBFusion": UB_RULES}


def read_switch_file(path: str | Path) -> frozenset[str]:
    """The rules a switch file turns off; a file that is neither shape is a one-line error."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise GraphExecError(f"{p}: cannot read the fusion switch file: {e.strerror or e}") from None
    return parse_switches(text, str(p))


def parse_switches(text: str, where: str = "fusion switch file") -> frozenset[str]:
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as e:
            raise GraphExecError(f"{where}: not valid JSON: {e.msg} (line {e.lineno})") from None
        return _from_json(data, where)
    return _from_lines(text, where)


def _switch(value: object, where: str, name: str) -> bool:
    """True for "on", False for "off" (ATC's two values, any case)."""
    v = str(value).strip().lower()
    if v not in ("on", "off"):
        raise GraphExecError(f"{where}: rule {name!r} must be 'on' or 'off', not {value!r}")
    return v == "on"


def _from_json(data: object, where: str) -> frozenset[str]:
    switch = data.get("Switch") if isinstance(data, dict) else None
    if not isinstance(switch, dict):
        raise GraphExecError(f"{where}: expected {{\"Switch\": {{\"GraphFusion\": {{...}}, \"UBFusion\": {{...}}}}}}")
    off: set[str] = set()
    for group, rules in switch.items():
        if group not in _GROUPS or not isinstance(rules, dict):
            raise GraphExecError(f"{where}: unknown switch group {group!r} (GraphFusion or UBFusion)")
        states = {name: _switch(v, where, name) for name, v in rules.items()}
        if states.get("ALL") is False:
            off.update(_GROUPS[group])
        off.update(n for n, on in states.items() if not on and n != "ALL")
        off.difference_update(n for n, on in states.items() if on and n != "ALL")
    return frozenset(off)


def _from_lines(text: str, where: str) -> frozenset[str]:
    off: set[str] = set()
    for i, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise GraphExecError(f"{where}: line {i}: expected 'RuleName:on' or 'RuleName:off', got {line!r}")
        if not _switch(value, f"{where}: line {i}", name.strip()):
            off.add(name.strip())
        else:
            off.discard(name.strip())
    if "ALL" in off:   # the plain shape's ALL turns every rule off
        off.discard("ALL")
        off.update(RULES)
    return frozenset(off)
