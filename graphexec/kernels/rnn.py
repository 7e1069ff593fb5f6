"""Recurrent kernels: LSTM, GRU, RNN (every opset: 1, 7, 14 with ``layout``, 22) and
com.microsoft's DynamicQuantizeLSTM.

The input projection X @ W^T of every time step and both directions is one GEMM up
front, so the time loop (``rnn_cells.py``) does only the recurrent GEMM per step. The
weights' re-layout is kept in the node's cache when they are constants. float16 is
computed in float32 and cast back (like ``nn.py``); float64 stays float64.

``sequence_lens`` follows onnxruntime: past its length a sequence writes zeros to Y,
its final state is that of its last valid step, the reverse direction starts at each
sequence's own end, and a sequence of length 0 has zero final states.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from graphexec.kernels.registry import OpContext, Unsupported, register
from graphexec.kernels.rnn_cells import Act, Recurrence, RecurrenceInto, gru_loop, lstm_loop, resolve, rnn_loop, stacked

# float16 is computed in float32, the others in themselves
_COMPUTE: dict[np.dtype, np.dtype] = {np.dtype(np.float16): np.dtype(np.float32),
                                      np.dtype(np.float32): np.dtype(np.float32),
                                      np.dtype(np.float64): np.dtype(np.float64)}
_DEFAULT_ACTS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"), "RNN": ("Tanh",)}
_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}


@dataclass(frozen=True, slots=True)
class Setup:
    """What every recurrent op derives from X, the attributes and ``sequence_lens``."""

    x: np.ndarray                  # [seq, batch, input], layout 0, compute dtype
    lens: np.ndarray               # [batch] int64
    reverse: tuple[bool, ...]      # per direction
    hidden: int
    out_dtype: np.dtype
    layout: int
    clip: float | None
    order: np.ndarray | None       # [steps, batch] time index of each reverse step, when lengths differ
    active: np.ndarray | None      # [steps, 1, batch, 1] which sequences still run, when lengths differ

    @property
    def dirs(self) -> int:
        return len(self.reverse)

    @property
    def steps(self) -> int:
        return int(self.lens.max(initial=0))

    @property
    def dt(self) -> np.dtype:
        return self.x.dtype


@dataclass(frozen=True, slots=True)
class Weights:
    """A node's weights laid out for the GEMMs: all directions' W^T side by side."""

    wt: np.ndarray                 # [input, dirs * gates * H]
    rt: np.ndarray                 # [dirs, H, gates * H]
    bias: np.ndarray               # [dirs * gates * H]: Wb + Rb, where Rb can be folded
    rbh: np.ndarray | None = None  # [dirs, 1, H]: GRU's Rbh under linear_before_reset


def _setup(ctx: OpContext, x: np.ndarray, lens: np.ndarray | None, hidden: int) -> Setup:
    """Checks X, the attributes and the lengths; ``order`` and ``active`` exist only when
    lengths differ, so the common case pays for no gather and no masking."""
    dt = _COMPUTE.get(x.dtype)
    if dt is None:
        raise Unsupported(f"{ctx.op}: dtype {x.dtype}")
    direction = ctx.attr("direction", "forward")
    if direction not in _DIRECTIONS:
        raise ValueError(f"direction {direction!r} is not forward, reverse or bidirectional")
    if int(ctx.attr("hidden_size", hidden)) != hidden:
        raise ValueError(f"hidden_size {ctx.attr('hidden_size')} but R says {hidden}")
    layout = int(ctx.attr("layout", 0)) if ctx.opset >= 14 else 0
    if x.ndim != 3:
        raise ValueError(f"X must be 3-d, got {x.shape}")
    xs = (x.transpose(1, 0, 2) if layout else x).astype(dt, copy=False)
    seq, batch = xs.shape[:2]
    ls = np.full(batch, seq, np.int64) if lens is None else np.asarray(lens).astype(np.int64).reshape(-1)
    if ls.shape != (batch,) or (ls < 0).any() or (ls > seq).any():
        raise ValueError(f"sequence_lens {ls.tolist()} must hold {batch} lengths in [0, {seq}]")
    clip = ctx.attr("clip", None)
    reverse = _DIRECTIONS[direction]
    uniform = batch == 0 or ls.min() == ls.max()
    steps = np.arange(int(ls.max(initial=0)))[:, None]
    order = None if uniform or not any(reverse) else np.where(steps < ls, ls - 1 - steps, steps)
    active = None if uniform else (steps < ls)[:, None, :, None]
    return Setup(xs, ls, reverse, hidden, np.dtype(x.dtype), layout,
                 None if clip is None else float(clip), order, active)


def _in_order(s: Setup, a: np.ndarray, reverse: bool) -> np.ndarray:
    """``a`` [steps, batch, ...] between time order and processing order (either way: the
    reversal within each length is its own inverse)."""
    if not reverse:
        return a
    if s.order is None:
        return a[::-1]
    return a[s.order, np.arange(a.shape[1])]


def _cached(ctx: OpContext, key: str, args: tuple[tuple[int, Any], ...], make: Callable[[], Any]) -> Any:
    """``make()``, kept in the node's cache when every given input among ``args``
    (index, value) is a constant of the graph, so the re-layout is paid once."""
    consts = ctx.const_inputs
    if not all(i < len(consts) and consts[i] for i, v in args if v is not None):
        return make()
    if key not in ctx.cache:
        ctx.cache[key] = make()
    return ctx.cache[key]


def _weights(s: Setup, w: np.ndarray, r: np.ndarray, b: np.ndarray | None, gates: int,
             keep_rbh: bool = False) -> Weights:
    """W [dirs, gates*H, input], R [dirs, gates*H, H], B [dirs, 2*gates*H] laid out for the GEMMs."""
    gh = gates * s.hidden
    if w.shape != (s.dirs, gh, s.x.shape[2]) or r.shape != (s.dirs, gh, s.hidden):
        raise ValueError(f"W {w.shape} / R {r.shape} do not fit {s.dirs} directions, hidden {s.hidden}, "
                         f"input {s.x.shape[2]}")
    wt = w.astype(s.dt).transpose(2, 0, 1).reshape(w.shape[2], s.dirs * gh)
    rt = np.ascontiguousarray(r.astype(s.dt).transpose(0, 2, 1))
    return _with_bias(s, wt, rt, b, gh, keep_rbh)


def _with_bias(s: Setup, wt: np.ndarray, rt: np.ndarray, b: np.ndarray | None, gh: int,
               keep_rbh: bool) -> Weights:
    if b is None:
        return Weights(wt, rt, np.zeros(s.dirs * gh, s.dt))
    if b.shape != (s.dirs, 2 * gh):
        raise ValueError(f"B {b.shape} is not [{s.dirs}, {2 * gh}]")
    wb, rb = b[:, :gh].astype(s.dt), b[:, gh:].astype(s.dt)
    rbh = None
    if keep_rbh:
        rbh = rb[:, None, gh - s.hidden:].copy()
        rb[:, gh - s.hidden:] = 0
    return Weights(wt, rt, (wb + rb).reshape(-1), rbh)


def _project(s: Setup, x: np.ndarray, wts: Weights) -> np.ndarray:
    """X @ W^T + biases for every step and direction in one GEMM, per direction in
    processing order: [steps, dirs, batch, gates*H]."""
    steps, batch = s.steps, x.shape[1]
    flat = x[:steps].reshape(steps * batch, x.shape[2]) @ wts.wt
    flat += wts.bias
    proj = flat.reshape(steps, batch, s.dirs, -1)
    per_dir = [_in_order(s, proj[:, :, d], rev) for d, rev in enumerate(s.reverse)]
    return per_dir[0][:, None] if s.dirs == 1 else np.stack(per_dir, axis=1)


def _state(s: Setup, v: np.ndarray | None) -> np.ndarray:
    """initial_h / initial_c as [dirs, batch, H] (zeros when omitted)."""
    shape = (s.dirs, s.x.shape[1], s.hidden)
    if v is None:
        return np.zeros(shape, s.dt)
    v = (v.transpose(1, 0, 2) if s.layout else v).astype(s.dt)
    if v.shape != shape:
        raise ValueError(f"initial state {v.shape} is not {shape}")
    return v


def _acts(ctx: OpContext, op: str, s: Setup) -> tuple[Act, ...]:
    per_dir = resolve(ctx.attr("activations", None), ctx.attr("activation_alpha", None),
                      ctx.attr("activation_beta", None), _DEFAULT_ACTS[op], s.dirs, positional=op == "RNN")
    return tuple(stacked([acts[k] for acts in per_dir]) for k in range(len(_DEFAULT_ACTS[op])))


def _finish(ctx: OpContext, s: Setup, ys: np.ndarray, *states: np.ndarray) -> tuple[np.ndarray, ...]:
    """Y [seq, dirs, batch, H] in time order plus the final states, in the node's layout."""
    seq, batch = s.x.shape[:2]
    y = np.zeros((seq, s.dirs, batch, s.hidden), s.out_dtype)
    for d, rev in enumerate(s.reverse):
        y[:s.steps, d] = _in_order(s, ys[:, d], rev)
    empty = (s.lens == 0)[None, :, None]
    finals = [np.where(empty, 0, st).astype(s.out_dtype, copy=False) for st in states]
    if s.layout:
        y = np.ascontiguousarray(y.transpose(2, 0, 1, 3))
        finals = [np.ascontiguousarray(f.transpose(1, 0, 2)) for f in finals]
    return (y, *finals)[:ctx.num_outputs]


def _plain(rt: np.ndarray) -> Recurrence:
    return lambda h, t: h @ rt


def _plain_into(rt: np.ndarray) -> RecurrenceInto:
    def rec(h: np.ndarray, out: np.ndarray) -> None:
        np.matmul(h, rt, out=out)
    return rec


def _peepholes(s: Setup, p: np.ndarray | None) -> np.ndarray | None:
    """P [dirs, 3H] as [3 (i, o, f), dirs, 1, H], to broadcast over the batch."""
    if p is None:
        return None
    if p.shape != (s.dirs, 3 * s.hidden):
        raise ValueError(f"P {p.shape} is not [{s.dirs}, {3 * s.hidden}]")
    return p.astype(s.dt).reshape(s.dirs, 3, 1, s.hidden).transpose(1, 0, 2, 3)


@register("LSTM")
def lstm(ctx: OpContext, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None = None,
         lens: np.ndarray | None = None, h0: np.ndarray | None = None, c0: np.ndarray | None = None,
         p: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Gates i, o, f, c; peepholes P; input_forget couples f = 1 - i."""
    s = _setup(ctx, x, lens, r.shape[-1])
    wts = _cached(ctx, f"w{s.dt}", ((1, w), (2, r), (3, b)), lambda: _weights(s, w, r, b, 4))
    f, g, h = _acts(ctx, "LSTM", s)
    ys, hn, cn = lstm_loop(_project(s, s.x, wts), _plain(wts.rt), _state(s, h0), _state(s, c0),
                           _peepholes(s, p), (f, g, h), s.clip, bool(ctx.attr("input_forget", 0)), s.active,
                           _plain_into(wts.rt))
    return _finish(ctx, s, ys, hn, cn)


@register("GRU")
def gru(ctx: OpContext, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None = None,
        lens: np.ndarray | None = None, h0: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Gates z, r, h; linear_before_reset applies R_h (and Rb_h) before the reset gate."""
    s = _setup(ctx, x, lens, r.shape[-1])
    lbr = bool(ctx.attr("linear_before_reset", 0))
    wts = _cached(ctx, f"w{s.dt}{lbr}", ((1, w), (2, r), (3, b)), lambda: _weights(s, w, r, b, 3, lbr))
    f, g = _acts(ctx, "GRU", s)
    ys, hn = gru_loop(_project(s, s.x, wts), wts.rt, _state(s, h0), wts.rbh, (f, g), s.clip, lbr, s.active)
    return _finish(ctx, s, ys, hn)


@register("RNN")
def rnn(ctx: OpContext, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None = None,
        lens: np.ndarray | None = None, h0: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """H = f(X W^T + H R^T + Wb + Rb)."""
    s = _setup(ctx, x, lens, r.shape[-1])
    wts = _cached(ctx, f"w{s.dt}", ((1, w), (2, r), (3, b)), lambda: _weights(s, w, r, b, 1))
    (f,) = _acts(ctx, "RNN", s)
    ys, hn = rnn_loop(_project(s, s.x, wts), wts.rt, _state(s, h0), f, s.clip, s.active)
    return _finish(ctx, s, ys, hn)


def fake_quant(x: np.ndarray, axes: tuple[int, ...] | None = None) -> np.ndarray:
    """``x`` after onnxruntime's dynamic uint8 quantization and back: scale and zero point
    from its range (widened to hold 0) over ``axes``, values rounded half to even."""
    if x.size == 0:
        return x
    lo = np.minimum(x.min(axis=axes, keepdims=True), 0)
    hi = np.maximum(x.max(axis=axes, keepdims=True), 0)
    scale = np.where(hi > lo, (hi - lo) / np.float32(255), np.float32(1)).astype(np.float32)
    zp = np.rint(np.clip(-lo / scale, 0, 255))
    q = np.clip(np.rint(x / scale) + zp, 0, 255)
    return ((q - zp) * scale).astype(np.float32)


def _fake_quant_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``fake_quant(x, (1, 2))`` into ``out``: the same float32 values, with each direction's
    scale and zero point worked out on numpy float32 scalars and four ufunc calls on the
    array (the per-step cost of a DynamicQuantizeLSTM is mostly numpy calls on small arrays):
    clip(rint(x / s) + zp, 0, 255) - zp is clip(rint(x / s), -zp, 255 - zp) + 0, every term an
    integer that float32 holds exactly (the + 0 turns rint's -0 into the +0 the sum gave)."""
    d = x.shape[0]
    flat = x.reshape(d, -1)
    scales, los, his = [], [], []
    for lo, hi in zip(_MIN(flat, axis=1), _MAX(flat, axis=1)):
        lo, hi = min(lo, _ZERO), max(hi, _ZERO)
        scale = (hi - lo) / np.float32(255) if hi > lo else np.float32(1)
        shift = -lo / scale
        if not (0 < scale <= _F32_MAX and shift <= _F32_MAX):   # NaN, inf, a scale that underflows:
            np.copyto(out, fake_quant(x, (1, 2)))              # the array version's edge cases
            return out
        zp = min(max(round(float(shift)), 0), 255)   # rint of the clipped value
        scales.append(scale)
        los.append(np.float32(-zp))
        his.append(np.float32(255 - zp))
    sc: Any = scales[0] if d == 1 else np.array(scales, np.float32).reshape(d, 1, 1)
    lo_: Any = los[0] if d == 1 else np.array(los, np.float32).reshape(d, 1, 1)
    hi_: Any = his[0] if d == 1 else np.array(his, np.float32).reshape(d, 1, 1)
    np.divide(x, sc, out=out)
    np.rint(out, out=out)
    _CLIP(out, lo_, hi_, out=out)
    out += _ZERO
    out *= sc
    return out


_MIN, _MAX = np.minimum.reduce, np.maximum.reduce
_CLIP: Any = np._core.umath.clip  # type: ignore[attr-defined]  # the ufunc: np.clip's wrappers cost more here
_F32_MAX, _ZERO = float(np.finfo(np.float32).max), np.float32(0)


def _dequantize(w: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, dirs: int) -> np.ndarray:
    """Quantized [dirs, K, 4H] weights as float32, per direction or per output column."""
    sc = np.asarray(scale, np.float32).reshape(dirs, 1, -1)
    z = np.zeros((dirs, 1, 1), np.float32) if zp is None else np.asarray(zp).astype(np.float32).reshape(dirs, 1, -1)
    return (w.astype(np.float32) - z) * sc


def _quantized_rec(s: Setup, rt: np.ndarray) -> Recurrence:
    """h @ R^T with h quantized per direction at each step, as onnxruntime does; sequences
    that ended before the previous step hold zeros there (onnxruntime's Y rows)."""
    def rec(h: np.ndarray, t: int) -> np.ndarray:
        seen = h if s.active is None or t == 0 else np.where(s.active[t - 1], h, 0)
        return fake_quant(seen, (1, 2)) @ rt
    return rec


def _quantized_into(rt: np.ndarray, shape: tuple[int, ...]) -> RecurrenceInto:
    """``_quantized_rec`` writing into the gates' array (every sequence runs to the end)."""
    hq = np.empty(shape, np.float32)

    def rec(h: np.ndarray, out: np.ndarray) -> None:
        np.matmul(_fake_quant_into(h, hq) if h.size else fake_quant(h, (1, 2)), rt, out=out)
    return rec


@register("DynamicQuantizeLSTM", domain="com.microsoft")
def dynamic_quantize_lstm(ctx: OpContext, x: np.ndarray, w: np.ndarray, r: np.ndarray,
                          b: np.ndarray | None = None, lens: np.ndarray | None = None,
                          h0: np.ndarray | None = None, c0: np.ndarray | None = None,
                          p: np.ndarray | None = None, w_scale: np.ndarray | None = None,
                          w_zp: np.ndarray | None = None, r_scale: np.ndarray | None = None,
                          r_zp: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """LSTM with int8/uint8 W [dirs, input, 4H] and R [dirs, H, 4H]: X and each step's h
    are quantized dynamically to uint8, so the products are those of the quantized values."""
    if x.dtype != np.float32 or w_scale is None or r_scale is None:
        raise Unsupported("DynamicQuantizeLSTM: float32 X with W and R scales")
    s = _setup(ctx, x, lens, r.shape[1])
    if w.shape != (s.dirs, x.shape[2], 4 * s.hidden) or r.shape != (s.dirs, s.hidden, 4 * s.hidden):
        raise ValueError(f"W {w.shape} / R {r.shape} do not fit {s.dirs} directions, hidden {s.hidden}")

    def make() -> Weights:
        wd = _dequantize(w, w_scale, w_zp, s.dirs)
        wt = wd.transpose(1, 0, 2).reshape(w.shape[1], -1)
        return _with_bias(s, wt, _dequantize(r, r_scale, r_zp, s.dirs), b, 4 * s.hidden, False)

    args = ((1, w), (2, r), (3, b), (8, w_scale), (9, w_zp), (10, r_scale), (11, r_zp))
    wts = _cached(ctx, "wq", args, make)
    acts = _acts(ctx, "LSTM", s)
    xw = _project(s, fake_quant(s.x[:s.steps]), wts)
    h, c = _state(s, h0), _state(s, c0)
    ys, hn, cn = lstm_loop(xw, _quantized_rec(s, wts.rt), h, c, _peepholes(s, p), (acts[0], acts[1], acts[2]),
                           s.clip, bool(ctx.attr("input_forget", 0)), s.active, _quantized_into(wts.rt, h.shape))
    return _finish(ctx, s, ys, hn, cn)
