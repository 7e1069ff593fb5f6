"""Cost rules: the work a node does (flops, bytes moved), its unit and its tiling.

The simulator turns these into time with the device profile's roofline, so the
numbers here are counts, never times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from graphexec.kernels import registry

CUBE_OPS = {"Conv", "ConvTranspose", "MatMul", "Gemm", "MatMulInteger", "QLinearMatMul",
            "QLinearConv", "ConvInteger", "Einsum",
            # com.microsoft's quantized GEMMs
            "QGemm", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulNBits"}
# the inputs a cube op multiplies, where they are not inputs 0 and 1
_OPERANDS = {"QLinearMatMul": (0, 3), "QLinearConv": (0, 3), "QGemm": (0, 3), "MatMulNBits": (0,),
             "DynamicQuantizeMatMul": (1,), "DynamicQuantizeLSTM": (1, 2)}
_INT8 = ("int8", "uint8")
FRACTAL = 16           # the cube works on 16x16x16 fractals
VECTOR_TILE_BYTES = 32 * 1024   # assumption: a vector core processes its UB in ~32 KiB tiles
MAX_BLOCK_DIM = 65535


@dataclass(frozen=True, slots=True)
class Cost:
    flops: float
    bytes: float
    unit: str
    block_dim: int


def work(value: object, what: str) -> float:
    """A cost figure (flops, bytes) as a float, or ValueError naming it: NaN would never
    end on the simulated clock, infinity never start, a negative one run backwards."""
    try:
        v = float(value)   # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{what} must be finite and >= 0, got {value!r}")
    return v


def _numel(shape: tuple[int, ...] | None) -> int:
    return math.prod(shape) if shape else 1


def _matmul_mnk(op: str, ins: list, out: tuple[int, ...], attrs: dict) -> tuple[int, int, int]:
    """(M, N, K) of a cube op; M folds batch and spatial dims of the output."""
    if op in ("Conv", "QLinearConv", "ConvInteger"):
        w = (ins[3] if op == "QLinearConv" and len(ins) > 3 else ins[1]) or (1, 1, 1)
        k = _numel(w[1:])
        c = (out[-1] if attrs.get("channels_last", 0) else out[1]) if len(out) > 1 else 1
        return _numel(out) // max(c, 1), c, k
    if op == "ConvTranspose":
        w = ins[1] or (1, 1, 1)
        return _numel(ins[0]) // max(w[0], 1), _numel(w[1:]) * attrs.get("group", 1), w[0]
    a = ins[0] or (1,)
    k = a[-1] if a else 1
    if op in ("Gemm", "QGemm") and attrs.get("transA", 0) and len(a) == 2:
        k = a[0]
    n = out[-1] if out else 1
    return max(_numel(out) // max(n, 1), 1), n, k


def cube_dtype(op: str, in_dtypes: list[str | None], attrs: dict) -> str | None:
    """The dtype a cube op multiplies in, which sets its peak rate: that of its operands, not
    of its output (an int8 GEMM with int32 or float output runs at the int8 rate; a dynamically
    quantized one too). MatMulNBits multiplies in A's float type, or int8 at accuracy_level 4.
    None when the operands' types are unknown."""
    if op == "MatMulNBits" and attrs.get("accuracy_level", 0) == 4:
        return "int8"
    known = [in_dtypes[i] for i in _OPERANDS.get(op, (0, 1)) if i < len(in_dtypes) and in_dtypes[i]]
    if not known:
        return None
    return "int8" if all(d in _INT8 for d in known) else known[0]


def node_cost(op: str, in_shapes: list, in_bytes: int, out_shapes: list, out_bytes: int,
              attrs: dict, on_aicpu: bool, domain: str = "") -> Cost:
    """The cost of one node from the static shapes of its inputs and outputs.

    A custom kernel's own cost rule (``@gx.kernel(..., cost=...)``) wins when it has one.
    """
    if domain and not on_aicpu:
        from graphexec.kernels.custom import CostInput, custom_cost  # custom imports this module

        custom = custom_cost(op, domain, CostInput(in_shapes, out_shapes, in_bytes, out_bytes, attrs))
        if custom is not None:
            return custom
    moved = float(in_bytes + out_bytes)
    out = tuple(out_shapes[0]) if out_shapes and out_shapes[0] is not None else ()
    if on_aicpu:
        return Cost(float(_numel(out)), moved, "aicpu", 1)
    own = registry.cost_rule(op, domain)
    if own is not None:
        rule = own(in_shapes, out_shapes, moved, attrs)
        if rule is not None:
            return rule
    if domain == "com.microsoft":
        from graphexec.kernels.contrib_cost import contrib_cost  # contrib_cost imports this module

        fused = contrib_cost(op, in_shapes, moved, attrs)
        if fused is not None:
            return fused
    recurrent = rnn_cost(op, in_shapes, moved, attrs)
    if recurrent is not None:
        return recurrent
    if op in CUBE_OPS and out:
        m, n, k = _matmul_mnk(op, in_shapes, out, attrs)
        tiles = math.ceil(m / FRACTAL) * math.ceil(n / FRACTAL)
        return Cost(2.0 * m * n * k, moved, "cube", max(1, min(tiles, MAX_BLOCK_DIM)))
    blocks = max(1, min(math.ceil(max(out_bytes, 1) / VECTOR_TILE_BYTES), MAX_BLOCK_DIM))
    if op in GATHERS or op in SLICES or op in SCATTERS:
        return Cost(float(sum(_numel(s) for s in out_shapes if s is not None)),
                    _moved(op, in_shapes, in_bytes, out_shapes, out_bytes), "vector", blocks)
    n_out = sum(_numel(s) for s in out_shapes if s is not None)
    if op in WINDOWED and attrs.get("kernel_shape"):   # a pooling kernel reduces its whole window per output
        return Cost(float(_numel(out) * _numel(tuple(attrs["kernel_shape"]))), moved, "vector", blocks)
    work = max(sum(_numel(s) for s in in_shapes if s is not None), n_out)
    return Cost(float(work), moved, "vector", blocks)


# pooling ops whose every output reduces a window of ``kernel_shape`` inputs (one max or add
# each): a 3x3 stride-1 MaxPool does 9 per output, not one per element it reads
WINDOWED = {"MaxPool", "AveragePool", "LpPool"}


# ops that read only the part of their first input they copy out (and their indices)
GATHERS = {"Gather", "GatherND", "GatherElements"}
SLICES = {"Slice"}
# ops that update part of their data in place (CANN's ScatterNdUpdate works on the variable itself)
SCATTERS = {"ScatterND", "ScatterElements", "Scatter"}


def _moved(op: str, ins: list, in_bytes: int, outs: list, out_bytes: int) -> float:
    """Bytes a data-moving op really moves: a gather or slice reads the elements it
    writes (not the whole table) plus its indices; a scatter reads its updates and indices
    and writes the updated elements. The first input's bytes (whole) are what ``in_bytes``
    counts beyond the rest, at the output's element size."""
    data = ins[0] if ins else None
    n_out = sum(_numel(s) for s in outs if s is not None)
    item = out_bytes / n_out if n_out else 0.0
    rest = max(0.0, in_bytes - (_numel(data) * item if data is not None else 0.0))   # indices, starts, updates
    if op in SCATTERS:   # data, indices, updates: the updates read and written, the indices read
        updates = _numel(ins[2]) * item if len(ins) > 2 and ins[2] is not None else rest
        return float(2 * updates + max(0.0, rest - updates))
    return float(2 * out_bytes + rest)


RNN_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1, "DynamicQuantizeLSTM": 4}
# elementwise ops per hidden unit and step: gate activations, cell/state updates (and h's quantization)
_RNN_VECTOR_OPS = {"LSTM": 12, "GRU": 10, "RNN": 3, "DynamicQuantizeLSTM": 16}


def rnn_cost(op: str, ins: list, moved: float, attrs: dict) -> Cost | None:
    """LSTM/GRU/RNN are cube work: X @ W^T and h @ R^T come to 2 * seq * batch * dirs *
    gates*H * (input + H) flops, plus the gates' vector part; None for other ops or
    unknown shapes. The cube tiles are those of one step's GEMM (batch*dirs x gates*H):
    the steps themselves run one after another."""
    gates = RNN_GATES.get(op)
    x, r = (ins[0], ins[2]) if len(ins) > 2 else (None, None)
    if gates is None or not x or not r or len(x) != 3 or len(r) != 3:
        return None
    seq, batch, inp = (x[1], x[0], x[2]) if attrs.get("layout", 0) else x
    dirs, hidden = r[0], (r[1] if op == "DynamicQuantizeLSTM" else r[2])
    rows = seq * batch * dirs
    flops = 2.0 * rows * gates * hidden * (inp + hidden) + float(rows * hidden * _RNN_VECTOR_OPS[op])
    tiles = math.ceil(batch * dirs / FRACTAL) * math.ceil(gates * hidden / FRACTAL)
    return Cost(flops, moved, "cube", max(1, min(tiles, MAX_BLOCK_DIM)))
