"""The quantized BERT ops that onnxruntime's dynamic quantizer writes (com.microsoft):
QAttention and QEmbedLayerNormalization.

QAttention is Attention with an 8-bit Q/K/V projection: ``(input - input_zp)(weight - weight_zp)``
is accumulated exactly (int32 in onnxruntime, exact float64 here), turned to float32 and scaled
by ``input_scale·weight_scale`` (per column when weight_scale is a vector), then the bias is
added, as MLAS's output processor does. Heads, masks, past/present and the softmax are
Attention's own (``contrib_attention``), so the two ops cannot drift apart.

QEmbedLayerNormalization dequantizes only the table rows it reads, ``(q - zp)·scale``, sums
word + position (+ segment) rows in float32 and layer-normalizes them with the dequantized
gamma and beta in onnxruntime's summation order (bit-exact); a token's position is its index
in its row (the op has no position_ids).

onnx infers no com.microsoft outputs, so both register output types (for memory planning)
and a cost: QAttention is Attention's cube work, and its operands being 8-bit, ``cube_dtype``
runs it at the int8 rate; QEmbedLayerNormalization is vector work on the rows it gathers,
not on its whole tables.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from graphexec.ir import TensorType
from graphexec.kernels.contrib_attention import attend, merge_heads_bsnh, score_bias, split_heads
from graphexec.kernels.contrib_cost import contrib_cost
from graphexec.kernels.contrib_util import DOMAIN, flag, ints, need, refuse, work
from graphexec.kernels.cost import Cost
from graphexec.kernels.custom import CostInput, CostRule, CustomKernel
from graphexec.kernels.quant_matmul import int_matmul
from graphexec.kernels.registry import KernelFn, OpContext, register

_F32, _I32 = np.dtype(np.float32), np.dtype(np.int32)
_INT8 = (np.dtype(np.int8), np.dtype(np.uint8))
# vector flops per hidden element of a token: each table row's dequantize (subtract, multiply)
# and its add, then the layer norm (mean, subtract, square, sum, scale, gamma, beta)
_DEQUANT_ADD_FLOPS, _LN_FLOPS = 3, 7


def _register(op: str, shape: Callable[..., list[TensorType]],
              cost: CostRule) -> Callable[[KernelFn], KernelFn]:
    """Register ``fn`` as com.microsoft's ``op`` with its shape and cost rules in the same entry; the
    shape rule gets every input by position (None for an omitted optional one)."""

    def wrap(fn: KernelFn) -> KernelFn:
        register(op, domain=DOMAIN, rules=CustomKernel(op, DOMAIN, fn, shape, cost, positional=True))(fn)
        return fn

    return wrap


def _static(t: TensorType) -> tuple[int, ...]:
    dims = tuple(d for d in t.shape or () if isinstance(d, int))
    if t.shape is None or len(dims) != len(t.shape):
        raise ValueError(f"{t} is not static")
    return dims


# ---- QAttention -------------------------------------------------------------------------------

def _qattention_types(x: TensorType, w: TensorType, bias: TensorType | None, x_s: TensorType, *rest: TensorType | None,
                      **attrs: Any) -> list[TensorType]:
    """output (B, S, hidden) and present (2, B, N, P + S, H) in the scales' float type; past is
    input 8."""
    try:
        (b, s, _), (_, n) = _static(x), _static(w)
        heads = int(attrs["num_heads"])
        past = rest[4] if len(rest) > 4 else None
        p = _static(past)[3] if past is not None else 0
        return [TensorType(x_s.dtype, (b, s, n // 3)), TensorType(x_s.dtype, (2, b, heads, p + s, n // 3 // heads))]
    except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError):
        return [TensorType()]


def _qattention_cost(c: CostInput) -> Cost | None:
    """Attention's cost (projection, QK^T and PV on the cube, softmax flops) from input (0),
    weight (1) and past (8); None (the default rule) when their shapes are unknown."""
    ins = list(c.inputs) + [None] * (9 - len(c.inputs))
    return contrib_cost("Attention", [ins[0], ins[1], None, None, ins[8]], float(c.in_bytes + c.out_bytes), c.attrs)


def _check_qattention(ctx: OpContext, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, heads: int) -> None:
    if x.ndim != 3 or w.ndim != 2 or w.shape[0] != x.shape[2] or w.shape[1] % (3 * heads):
        refuse(ctx, f"input {x.shape} and weight {w.shape}; expected (B, S, D) and (D, 3·hidden), "
                    f"hidden a multiple of num_heads={heads}")
    if x.dtype not in _INT8 or w.dtype not in _INT8:
        refuse(ctx, f"input {x.dtype} and weight {w.dtype}; expected int8 or uint8")
    if bias is None or bias.shape != (w.shape[1],):
        refuse(ctx, f"bias of shape {None if bias is None else bias.shape}; expected ({w.shape[1]},)")


def _param(ctx: OpContext, p: np.ndarray | None, what: str, sizes: tuple[int, ...],
           dtype: np.dtype | None = None) -> np.ndarray | None:
    """A scale or zero point, flat: one element (per tensor) or one per weight column."""
    if p is None:
        return None
    if p.size not in sizes or p.ndim > 1:
        refuse(ctx, f"{what} of shape {p.shape}; expected a scalar" + (f" or ({sizes[-1]},)" if len(sizes) > 1 else ""))
    if dtype is not None and p.dtype != dtype:
        refuse(ctx, f"{what} is {p.dtype}; expected {dtype}, its tensor's type")
    return p.reshape(-1)


def _project(ctx: OpContext, x: np.ndarray, w: np.ndarray, bias: np.ndarray, x_s: np.ndarray, w_s: np.ndarray,
             x_zp: np.ndarray | None, w_zp: np.ndarray | None) -> np.ndarray:
    """float32(acc)·(x_s·w_s) + bias with acc the exact integer product of the shifted operands
    (``int_matmul``: float32 BLAS when that is exact, else float64; constant weights are
    shifted and converted once per node)."""
    n = w.shape[1]
    xs, ws = _param(ctx, x_s, "input_scale", (1,)), _param(ctx, w_s, "weight_scale", (1, n))
    xz = _param(ctx, x_zp, "input_zero_point", (1,), x.dtype)
    wz = _param(ctx, w_zp, "weight_zero_point", (1, n), w.dtype)
    assert xs is not None and ws is not None  # _param returns what it is given
    scale = ws.astype(_F32) * xs.astype(_F32)
    acc = int_matmul(ctx, x, xz, w, wz, (1, 7) if wz is not None else (1,)).astype(_F32, copy=False)
    if np.broadcast_shapes(acc.shape, scale.shape) != acc.shape:
        return acc * scale + bias.astype(_F32)
    acc *= scale   # acc is the GEMM's own new array: the same two roundings, in place
    acc += bias.astype(_F32, copy=False)
    return acc


def _attend_projected(ctx: OpContext, proj: np.ndarray, mask: np.ndarray | None, past: np.ndarray | None,
                      heads: int) -> tuple[np.ndarray, np.ndarray]:
    """Attention's core on the projected (B, S, 3·hidden) Q|K|V: (output, present)."""
    q, k, v = (split_heads(p, heads) for p in np.split(proj, 3, axis=-1))
    b, _, s, hd = q.shape
    p = 0
    if past is not None:
        if past.ndim != 5 or past.shape[:3] != (2, b, heads) or past.shape[4] != hd:
            refuse(ctx, f"past of shape {past.shape}; expected (2, {b}, {heads}, P, {hd})")
        pw = work(ctx, past)[0]
        p = past.shape[3]
        k, v = np.concatenate([pw[0], k], axis=2), np.concatenate([pw[1], v], axis=2)
    sb = score_bias(ctx, mask, None, flag(ctx, "unidirectional"), (b, heads, s, p + s), p, q.dtype)
    scale = float(ctx.attrs.get("scale", 0.0)) or 1 / math.sqrt(hd)
    out, _ = attend(q, k, v, sb, scale)
    return merge_heads_bsnh(out), np.stack([k, v])


@_register("QAttention", _qattention_types, _qattention_cost)
def qattention(ctx: OpContext, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, x_s: np.ndarray,
               w_s: np.ndarray, mask_index: np.ndarray | None = None, x_zp: np.ndarray | None = None,
               w_zp: np.ndarray | None = None, past: np.ndarray | None = None):
    """Self attention whose Q/K/V projection is an 8-bit GEMM: input (B, S, D) x weight (D, 3·hidden)
    dequantized by input_scale·weight_scale, plus bias, then Attention; ``past`` (2, B, N, P, H) is
    prepended to K/V and returned with them as ``present``. Outputs are in the scales' float type."""
    heads = int(need(ctx, "num_heads"))
    if flag(ctx, "do_rotary") or flag(ctx, "past_present_share_buffer"):
        refuse(ctx, "do_rotary and past_present_share_buffer are not supported (nor by onnxruntime's CPU kernel)")
    _check_qattention(ctx, x, w, bias, heads)
    assert bias is not None  # _check_qattention refuses a missing bias
    if x_s.dtype.kind != "f" or w_s.dtype != x_s.dtype or bias.dtype != x_s.dtype:
        refuse(ctx, f"bias {bias.dtype}, input_scale {x_s.dtype}, weight_scale {w_s.dtype}; expected one float type")
    proj = _project(ctx, x, w, bias, x_s, w_s, x_zp, w_zp)
    y, present = _attend_projected(ctx, proj, mask_index, past, heads)
    dt = x_s.dtype
    return (y.astype(dt), present.astype(dt)) if ctx.num_outputs > 1 else y.astype(dt)


# ---- QEmbedLayerNormalization ------------------------------------------------------------------

_TABLES = ("word_embedding", "position_embedding", "segment_embedding", "gamma", "beta")


def _qembed_types(ids: TensorType, seg_ids: TensorType | None, word: TensorType, *rest: TensorType | None,
                  **attrs: Any) -> list[TensorType]:
    """layernorm_out (B, S, hidden) float32 and mask_index_out (B,) int32."""
    try:
        b, s = _static(ids)
        return [TensorType(_F32, (b, s, _static(word)[1])), TensorType(_I32, (b,))]
    except (ValueError, IndexError):
        return [TensorType()]


def _qembed_cost(c: CostInput) -> dict[str, float] | None:
    """Vector work on the B·S gathered rows of each table (and gamma, beta), not on the tables:
    the default rule would count every table element as work and as bytes moved."""
    ids, word = c.inputs[0], c.inputs[2] if len(c.inputs) > 2 else None
    if not ids or not word or len(ids) != 2 or len(word) != 2:
        return None
    tokens, hidden = ids[0] * ids[1], word[1]
    tables = 3 if len(c.inputs) > 4 and c.inputs[4] else 2
    flops = tokens * hidden * (_DEQUANT_ADD_FLOPS * tables + _LN_FLOPS)
    index_bytes = 4 * tokens * sum(1 for i in (0, 1, 7) if i < len(c.inputs) and c.inputs[i])
    return {"flops": flops, "bytes": tokens * hidden * tables + 2 * hidden + index_bytes + c.out_bytes}


def _dequantize(ctx: OpContext, q: np.ndarray, scale: np.ndarray | None, zp: np.ndarray | None,
                what: str) -> np.ndarray:
    """(q - zp)·scale in float32, as onnxruntime's per-tensor Dequantize."""
    if q.dtype not in _INT8:
        refuse(ctx, f"{what} is {q.dtype}; expected int8 or uint8")
    if scale is None:
        refuse(ctx, f"{what} needs its scale")
    s = _param(ctx, scale, f"{what}_scale", (1,))
    z = _param(ctx, zp, f"{what}_zero_point", (1,), q.dtype)
    assert s is not None  # _param returns what it is given
    v = q.astype(_F32) if z is None else q.astype(_F32) - z.astype(_F32)
    return v * s.astype(_F32)


def _rows(ctx: OpContext, table: np.ndarray, ids: np.ndarray, what: str) -> np.ndarray:
    """The table's rows at ``ids`` (still quantized: only these are dequantized)."""
    if table.ndim != 2:
        refuse(ctx, f"the table {what} indexes has shape {table.shape}; expected (rows, hidden)")
    if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
        refuse(ctx, f"{what} outside [0, {table.shape[0]})")
    return table[ids]


def _embedding_sum(ctx: OpContext, ids: np.ndarray, seg_ids: np.ndarray | None,
                   tables: tuple[np.ndarray | None, ...], params: tuple[np.ndarray | None, ...]) -> np.ndarray:
    """word + position (+ segment) rows, dequantized, in float32 (B, S, hidden)."""
    def deq(i: int, rows: np.ndarray) -> np.ndarray:
        return _dequantize(ctx, rows, params[i], params[5 + i], _TABLES[i])

    word, pos, seg = tables[:3]
    assert word is not None and pos is not None  # required inputs
    e = deq(0, _rows(ctx, word, ids, "input_ids")) + deq(1, _rows(ctx, pos, np.arange(ids.shape[1]), "positions"))
    if (seg_ids is None) != (seg is None):
        refuse(ctx, "segment_ids and segment_embedding must be given together")
    if seg_ids is not None and seg is not None:
        sid = ints(ctx, seg_ids, "segment_ids")
        if sid.shape != ids.shape:
            refuse(ctx, f"segment_ids of shape {sid.shape}; expected input_ids' {ids.shape}")
        e = e + deq(2, _rows(ctx, seg, sid, "segment_ids"))
    return e


def _layer_norm(e: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """(e - mean) / sqrt(var + eps) * gamma + beta over the last axis, in onnxruntime's order: its
    loop sums left to right in float32 (cumsum does too; numpy's sum is pairwise) and divides by
    the deviation, so the result is bit-exact with it."""
    h = np.float32(e.shape[-1])
    a = e - np.cumsum(e, axis=-1, dtype=_F32)[..., -1:] / h
    var = np.cumsum(a * a, axis=-1, dtype=_F32)[..., -1:] / h
    return a / np.sqrt(var + np.float32(eps)) * gamma + beta


@_register("QEmbedLayerNormalization", _qembed_types, _qembed_cost)
def qembed_layer_norm(ctx: OpContext, input_ids: np.ndarray, segment_ids: np.ndarray | None, word: np.ndarray,
                      position: np.ndarray, segment: np.ndarray | None, gamma: np.ndarray, beta: np.ndarray,
                      mask: np.ndarray | None = None, *params: np.ndarray | None):
    """EmbedLayerNormalization on 8-bit tables: ``params`` are the scales of word, position,
    segment, gamma and beta, then their zero points. mask_index_out counts each row's mask ones
    (zeros without a mask), as onnxruntime's kernel does."""
    if len(params) != 2 * len(_TABLES):
        refuse(ctx, f"{8 + len(params)} inputs; expected 18 (the tables' scales, then their zero points)")
    ids = ints(ctx, input_ids, "input_ids")
    if ids.ndim != 2:
        refuse(ctx, f"input_ids of shape {ids.shape}; expected (batch, sequence)")
    e = _embedding_sum(ctx, ids, segment_ids, (word, position, segment), params)
    g, b = _dequantize(ctx, gamma, params[3], params[8], "gamma"), _dequantize(ctx, beta, params[4], params[9], "beta")
    if g.shape != e.shape[-1:] or b.shape != e.shape[-1:]:
        refuse(ctx, f"gamma {gamma.shape} and beta {beta.shape}; expected ({e.shape[-1]},)")
    y = _layer_norm(e, g, b, float(ctx.attrs.get("epsilon", 1e-12)))
    if mask is None:
        index = np.zeros(ids.shape[0], dtype=np.int32)
    else:
        m = ints(ctx, mask, "mask")
        if m.shape != ids.shape:
            refuse(ctx, f"mask of shape {m.shape}; expected input_ids' {ids.shape}")
        index = (m == 1).sum(axis=1).astype(np.int32)
    return (y.astype(_F32), index)[:max(ctx.num_outputs, 1)]
