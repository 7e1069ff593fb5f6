"""onnxruntime's quantized GEMMs (com.microsoft): QGemm, DynamicQuantizeMatMul,
MatMulIntegerToFloat and the weight-only MatMulNBits.

The integer products are the exact GEMMs of ``quant_matmul.int_matmul`` (float32 BLAS where
that is exact, constant weights shifted once per node); scaling to float
follows onnxruntime: ``float32(acc) * (a_scale * b_scale)`` (per column of B), then the bias.
MatMulNBits dequantizes its packed weights to float32 once (cached when they are graph
constants) and runs one float GEMM; ``accuracy_level`` only tunes onnxruntime's kernels.
"""

from __future__ import annotations

import numpy as np

from graphexec.kernels import quant_shapes as shapes
from graphexec.kernels.quant import dynamic_uint8, ms_register
from graphexec.kernels.quant_matmul import given_inputs, int_matmul, multiplier, plus_bias, requantize
from graphexec.kernels.registry import OpContext, Unsupported, update

_F32 = np.dtype(np.float32)


def _to_float(acc: np.ndarray, scale: np.ndarray, bias: np.ndarray | None, dtype: np.dtype) -> np.ndarray:
    y = acc.astype(_F32) * scale
    if bias is not None:
        y += bias.astype(_F32)
    return y.astype(dtype, copy=False)


@ms_register("QGemm", shapes.qgemm)
def qgemm(ctx: OpContext, a: np.ndarray, a_s: np.ndarray, a_zp: np.ndarray, b: np.ndarray, b_s: np.ndarray,
          b_zp: np.ndarray | None = None, c: np.ndarray | None = None, y_s: np.ndarray | None = None,
          y_zp: np.ndarray | None = None) -> np.ndarray:
    """alpha·a_s·b_s·((A - a_zp)(B - b_zp) + C), C an int32 at that scale; quantized to Y
    when y_scale is given, float32 otherwise. B's scale and zero point may be per column."""
    trans_a, trans_b = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    acc = int_matmul(ctx, a.T if trans_a else a, a_zp, b.T if trans_b else b, b_zp, given_inputs((3, b), (5, b_zp)))
    if c is not None:
        acc = plus_bias(acc, c)
    alpha = np.array(ctx.attr("alpha", 1.0), _F32)
    if y_s is None:
        return _to_float(acc, multiplier(alpha, a_s, b_s), None, _F32)
    dtype = np.dtype(np.uint8) if y_zp is None else y_zp.dtype
    return requantize(acc, multiplier(alpha, a_s, b_s, y_scale=y_s), y_zp, dtype)


@ms_register("MatMulIntegerToFloat", shapes.matmul_integer_to_float)
def matmul_integer_to_float(ctx: OpContext, a: np.ndarray, b: np.ndarray, a_s: np.ndarray, b_s: np.ndarray,
                            a_zp: np.ndarray | None = None, b_zp: np.ndarray | None = None,
                            bias: np.ndarray | None = None) -> np.ndarray:
    """(A - a_zp)(B - b_zp)·a_s·b_s + bias, in the scales' float type."""
    acc = int_matmul(ctx, a, a_zp, b, b_zp, given_inputs((1, b), (5, b_zp)))
    return _to_float(acc, multiplier(a_s, b_s), bias, a_s.dtype)


@ms_register("DynamicQuantizeMatMul", shapes.dynamic_quantize_matmul)
def dynamic_quantize_matmul(ctx: OpContext, a: np.ndarray, b: np.ndarray, b_s: np.ndarray,
                            b_zp: np.ndarray | None = None, bias: np.ndarray | None = None) -> np.ndarray:
    """A quantized to uint8 over its own range (DynamicQuantizeLinear), then MatMulIntegerToFloat."""
    if a.dtype != _F32:
        raise Unsupported(f"A is {a.dtype}; expected float32")
    aq, a_s, a_zp = dynamic_uint8(a)
    acc = int_matmul(ctx, aq, np.asarray(a_zp), b, b_zp, given_inputs((1, b), (3, b_zp)))
    return _to_float(acc, multiplier(np.asarray(a_s), b_s), bias, _F32)


def unpack_bits(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` ``bits``-wide values of each row of bytes, least significant first."""
    if bits == 8:
        return packed[..., :count]
    if bits == 4:
        pair = np.stack([packed & 0xF, packed >> 4], axis=-1)
        return pair.reshape(packed.shape[:-1] + (-1,))[..., :count]
    stream = np.unpackbits(packed, axis=-1, bitorder="little")[..., :count * bits]
    weights = (1 << np.arange(bits)).astype(np.uint8)
    return (stream.reshape(packed.shape[:-1] + (count, bits)) * weights).sum(-1, dtype=np.uint8)


def _nbits_weights(ctx: OpContext, b: np.ndarray, scales: np.ndarray, zps: np.ndarray | None) -> np.ndarray:
    """The dequantized weights (q - zp)·scale per block of K, laid out (K, N) C-contiguous,
    the layout numpy's BLAS multiplies fastest from the right (the transposed view of an
    (N, K) array runs ~1.4x slower at a transformer's shapes); the 8-bit codes are
    transposed before they widen, so the layout costs a quarter of a float32 copy."""
    n, k, bits, block = (int(ctx.attr(key)) for key in ("N", "K", "bits", "block_size"))
    kb = -(-k // block)
    if not 2 <= bits <= 8 or b.dtype != np.uint8 or b.shape != (n, kb, block * bits // 8):
        raise Unsupported(f"B {b.dtype}{b.shape} for N={n} K={k} bits={bits} block_size={block}")
    q = np.ascontiguousarray(unpack_bits(b.reshape(n, kb, -1), bits, block).transpose(1, 2, 0)).astype(_F32)
    s = scales.astype(_F32).reshape(n, kb).T[:, None, :]
    if zps is None:
        q -= np.float32(1 << (bits - 1))
    elif zps.dtype == np.uint8:
        q -= unpack_bits(zps.reshape(n, -1), bits, kb).astype(_F32).T[:, None, :]
    else:
        q -= zps.astype(_F32).reshape(n, kb).T[:, None, :]
    q *= s
    return q.reshape(kb * block, n)[:k]


def _cached_weights(ctx: OpContext, b: np.ndarray, scales: np.ndarray, zps: np.ndarray | None) -> np.ndarray:
    """The dequantized (K, N) weights, kept on the node when B, scales and zero points are constants."""
    consts = ctx.const_inputs
    if not (len(consts) >= 3 and all(consts[1:3]) and (zps is None or (len(consts) > 3 and consts[3]))):
        return _nbits_weights(ctx, b, scales, zps)
    if "nbits" not in ctx.cache:
        ctx.cache["nbits"] = _nbits_weights(ctx, b, scales, zps)
    return ctx.cache["nbits"]


@ms_register("MatMulNBits", shapes.matmul_nbits)
def matmul_nbits(ctx: OpContext, a: np.ndarray, b: np.ndarray, scales: np.ndarray, zps: np.ndarray | None = None,
                 g_idx: np.ndarray | None = None, bias: np.ndarray | None = None) -> np.ndarray:
    """A @ dequantize(B).T + bias, with B packed (N, K/block_size, block_size·bits/8) uint8.
    An empty B is an omitted projection: zeros, plus the bias."""
    n, k, block = int(ctx.attr("N")), int(ctx.attr("K")), int(ctx.attr("block_size"))
    if a.shape[-1:] != (k,):
        raise ValueError(f"A {a.shape} does not end in K={k}")
    if g_idx is not None and g_idx.size and not np.array_equal(g_idx.reshape(-1), np.arange(k) // block):
        raise Unsupported("g_idx other than the plain block order")
    if b.size == 0:
        y = np.zeros(a.shape[:-1] + (n,), _F32)
    else:
        y = np.matmul(a.astype(_F32, copy=False), _cached_weights(ctx, b, scales, zps))
    if bias is not None:
        y += bias.astype(_F32)
    return y.astype(a.dtype, copy=False)


def _nbits_check(ctx: OpContext) -> str | None:
    """MatMulNBits' attribute refusals, at compile time (a g_idx's order is seen at run time only)."""
    missing = [key for key in ("N", "K", "bits", "block_size") if key not in ctx.attrs]
    if missing:
        return f"MatMulNBits needs attribute {missing[0]!r}"
    bits, block = int(ctx.attrs["bits"]), int(ctx.attrs["block_size"])
    if not 2 <= bits <= 8 or block < 1 or block * bits % 8:
        return f"bits={bits} block_size={block}; expected 2 to 8 bits in blocks of whole bytes"
    return None


update("MatMulNBits", "com.microsoft", check=_nbits_check)
