"""Cost rules of ONNX Runtime's fused com.microsoft ops, from their input shapes.

These ops reach the cost model with unknown output shapes (onnx's shape inference does
not know them), so each rule reads the inputs. Attention is cube work, its projections
and the QK^T and PV products, plus the softmax on the vector unit, counted as flops
(5 per score: scale, bias, max, exp, divide); the fused GEMMs and convolutions are cube
work. Other ops here keep the default vector rule.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from graphexec.kernels.cost import FRACTAL, MAX_BLOCK_DIM, Cost

Shape = tuple[int, ...]
_SOFTMAX_FLOPS = 5


def _tiles(*mn: tuple[int, int, int]) -> int:
    """Block dim: the most 16x16 output tiles of any of the (batch, M, N) products."""
    most = max(b * math.ceil(m / FRACTAL) * math.ceil(n / FRACTAL) for b, m, n in mn)
    return max(1, min(most, MAX_BLOCK_DIM))


def _shape(ins: list, i: int) -> Shape | None:
    return tuple(ins[i]) if i < len(ins) and ins[i] is not None else None


def _attention_core(b: int, n: int, s: int, t: int, h: int, hv: int) -> tuple[float, tuple[int, int, int]]:
    """Flops of per-head softmax(Q K^T) V and the tiling of its score matrix."""
    return 2.0 * b * n * s * t * (h + hv) + _SOFTMAX_FLOPS * b * n * s * t, (b * n, s, t)


def _attention(ins: list, attrs: dict) -> tuple[float, list[tuple[int, int, int]]] | None:
    x, w, past = _shape(ins, 0), _shape(ins, 1), _shape(ins, 4)
    if not x or not w or len(x) != 3 or len(w) != 2:
        return None
    b, s, din = x
    n = int(attrs.get("num_heads", 1)) or 1
    dq, _, dv = [int(v) for v in attrs.get("qkv_hidden_sizes", [])] or [w[1] // 3] * 3
    t = s + (past[3] if past and len(past) == 5 else 0)
    core, mn = _attention_core(b, n, s, t, dq // n, dv // n)
    return 2.0 * b * s * din * w[1] + core, [(1, b * s, w[1]), mn]


def _mha(ins: list, attrs: dict) -> tuple[float, list[tuple[int, int, int]]] | None:
    q, k, v, past = _shape(ins, 0), _shape(ins, 1), _shape(ins, 2), _shape(ins, 6)
    n = int(attrs.get("num_heads", 1)) or 1
    if not q or len(q) not in (3, 5):
        return None
    b, s = q[:2]
    h = q[4] if len(q) == 5 else q[2] // n
    if len(q) == 5 or not k:
        t, hv = s, h
    elif len(k) == 5:
        t, hv = k[1], k[4]
    else:
        t = k[2] if len(k) == 4 else k[1]
        vs = v or k
        hv = vs[-1] if len(vs) == 4 else vs[-1] // n
    t += past[2] if past and len(past) == 4 else 0
    core, mn = _attention_core(b, n, s, t, h, hv)
    return core, [mn]


def _gqa(ins: list, attrs: dict) -> tuple[float, list[tuple[int, int, int]]] | None:
    q, k, past = _shape(ins, 0), _shape(ins, 1), _shape(ins, 3)
    n, kvh = int(attrs.get("num_heads", 1)) or 1, int(attrs.get("kv_num_heads", 1)) or 1
    if not q or len(q) != 3:
        return None
    b, s, d = q
    h = d // n if k else d // (n + 2 * kvh)
    t = max(s + (past[2] if past and len(past) == 4 else 0), 1)  # an upper bound: seqlens_k is a run-time value
    core, mn = _attention_core(b, n, s, t, h, h)
    return core, [mn]


def _matmul_shapes(a: Shape, b: Shape, attrs: dict, batch_flags: bool) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of FusedMatMul under its transposes."""
    def prep(x: Shape, tb: bool, t: bool) -> Shape:
        if tb and len(x) >= 3:
            x = x[1:-1] + x[:1] + x[-1:]
        return x[:-2] + (x[-1], x[-2]) if t and len(x) >= 2 else x
    a = prep(a, batch_flags and bool(attrs.get("transBatchA", 0)), bool(attrs.get("transA", 0)))
    b = prep(b, batch_flags and bool(attrs.get("transBatchB", 0)), bool(attrs.get("transB", 0)))
    m, k = (a[-2], a[-1]) if len(a) >= 2 else (1, a[0])
    nn = b[-1] if len(b) >= 2 else 1
    try:
        batch = math.prod(np.broadcast_shapes(a[:-2], b[:-2]))
    except ValueError:  # shapes the kernel refuses: count one product
        batch = 1
    return batch, m, nn, k


def _fused_matmul(ins: list, attrs: dict, batch_flags: bool = True) -> tuple[float, list[tuple[int, int, int]]] | None:
    a, b = _shape(ins, 0), _shape(ins, 1)
    if not a or not b:
        return None
    batch, m, n, k = _matmul_shapes(a, b, attrs, batch_flags)
    return 2.0 * batch * m * n * k, [(batch, m, n)]


def _gemm(ins: list, attrs: dict) -> tuple[float, list[tuple[int, int, int]]] | None:
    a, b = _shape(ins, 0), _shape(ins, 1)
    if not a or not b or len(a) != 2 or len(b) != 2:
        return None
    m, k = (a[1], a[0]) if attrs.get("transA", 0) else a
    n = b[0] if attrs.get("transB", 0) else b[1]
    return 2.0 * m * n * k, [(1, m, n)]


def _gemm_fast_gelu(ins: list, attrs: dict) -> tuple[float, list[tuple[int, int, int]]] | None:
    x, w = _shape(ins, 0), _shape(ins, 1)
    if not x or not w or len(w) != 2:
        return None
    m = math.prod(x[:-1])
    return 2.0 * m * w[1] * x[-1] + 8.0 * m * w[1], [(1, m, w[1])]


def _conv(ins: list, attrs: dict, channels_last: bool) -> tuple[float, list[tuple[int, int, int]]] | None:
    x, w = _shape(ins, 0), _shape(ins, 1)
    if not x or not w or len(x) != len(w) or len(x) < 3:
        return None
    spatial, wk = (x[1:-1], w[1:-1]) if channels_last else (x[2:], w[2:])
    nd = len(spatial)
    strides = attrs.get("strides") or [1] * nd
    dil = attrs.get("dilations") or [1] * nd
    pads = attrs.get("pads") or [0] * (2 * nd)
    same = str(attrs.get("auto_pad", "NOTSET")).startswith("SAME")
    out = [math.ceil(i / st) if same else (i + pads[j] + pads[j + nd] - d * (k - 1) - 1) // st + 1
           for j, (i, k, st, d) in enumerate(zip(spatial, wk, strides, dil))]
    m = x[0] * math.prod(out)
    k = math.prod(w[1:])
    return 2.0 * m * w[0] * k, [(1, m, w[0])]


_RULES: dict[str, Callable[[list, dict], tuple[float, list[tuple[int, int, int]]] | None]] = {
    "Attention": _attention, "MultiHeadAttention": _mha, "GroupQueryAttention": _gqa,
    "FusedMatMul": _fused_matmul, "TransposeMatMul": lambda i, a: _fused_matmul(i, a, False),
    "FusedGemm": _gemm, "GemmFastGelu": _gemm_fast_gelu,
    "FusedConv": lambda i, a: _conv(i, a, False), "NhwcConv": lambda i, a: _conv(i, a, True),
}


def contrib_cost(op: str, in_shapes: list, moved: float, attrs: dict) -> Cost | None:
    """The cost of a com.microsoft cube op, or None (unknown input shapes, or a vector op)."""
    rule = _RULES.get(op)
    got = rule(in_shapes, attrs) if rule is not None else None
    if got is None:
        return None
    flops, products = got
    return Cost(flops, moved, "cube", _tiles(*products))
