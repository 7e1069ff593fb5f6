"""The recurrent cells of the LSTM, GRU and RNN kernels: activations and time loops.

Every loop steps both directions of a bidirectional node at once. Its arrays carry a
leading direction axis, and ``rnn.py`` has already put each direction's projected input
in processing order (the reverse direction reversed within each sequence's own length),
so step ``t`` is one batched matmul for all directions and one set of gate updates.

A sequence that has ended keeps its state (its final state is that of its last valid
step) and writes zeros to ``Y``; ``active`` says which sequences still run at each step,
and is None when all run to the end (the common case, with no masking cost).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

Act = Callable[[np.ndarray], np.ndarray]
Recurrence = Callable[[np.ndarray, int], np.ndarray]   # (h, step) -> h @ R^T per direction
RecurrenceInto = Callable[[np.ndarray, np.ndarray], None]   # (h, out): out = h @ R^T per direction

# which of (alpha, beta) each activation takes, and the defaults of the ONNX ops they name
_TAKES = {"relu": (False, False), "tanh": (False, False), "sigmoid": (False, False),
          "affine": (True, True), "leakyrelu": (True, False), "thresholdedrelu": (True, False),
          "scaledtanh": (True, True), "hardsigmoid": (True, True), "elu": (True, False),
          "softsign": (False, False), "softplus": (False, False)}
_DEFAULTS = {"affine": (1.0, 0.0), "leakyrelu": (0.01, 0.0), "thresholdedrelu": (1.0, 0.0),
             "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, 0.0)}


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) written as 0.5 * tanh(x / 2) + 0.5, in place: tanh saturates instead
    of overflowing, so large gate inputs raise no warning and give exactly 0 or 1."""
    x *= 0.5
    np.tanh(x, out=x)
    x *= 0.5
    x += 0.5
    return x


def _elu(x: np.ndarray, a: float) -> np.ndarray:
    # expm1 of min(x, 0) only: the positive branch's exp would overflow unused
    return np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0)))


@lru_cache(maxsize=None)
def activation(name: str, alpha: float, beta: float) -> Act:
    """The activation ``name`` (lower case) with its alpha and beta; cached, so equal
    specs are the same object and directions with equal activations can share one call.

    An activation may overwrite its argument: the loops pass only temporaries, and the
    common sigmoid and tanh then allocate nothing per step.
    """
    table: dict[str, Act] = {
        "relu": lambda x: np.maximum(x, 0),
        "tanh": lambda x: np.tanh(x, out=x),
        "sigmoid": sigmoid,
        "affine": lambda x: x * alpha + beta,
        "leakyrelu": lambda x: np.where(x >= 0, x, x * alpha),
        "thresholdedrelu": lambda x: np.where(x > alpha, x, 0),
        "scaledtanh": lambda x: np.tanh(x * beta) * alpha,
        "hardsigmoid": lambda x: np.clip(x * alpha + beta, 0, 1),
        "elu": lambda x: _elu(x, alpha),
        "softsign": lambda x: x / (np.abs(x) + 1),
        "softplus": lambda x: np.logaddexp(x.dtype.type(0), x),   # log(1 + e^x) without overflow
    }
    return table[name]


def resolve(names: Sequence[str] | None, alphas: Sequence[float] | None, betas: Sequence[float] | None,
            defaults: tuple[str, ...], dirs: int, positional: bool) -> list[tuple[Act, ...]]:
    """Per direction, the node's activation functions.

    LSTM and GRU consume ``activation_alpha``/``beta`` in order, one value per function
    that takes one (onnxruntime's reading of the spec); RNN's lists are positional, one
    entry per function (onnxruntime's and onnx's reference RNN). A value the list lacks is
    the default of the ONNX op of that name. One direction's list serves both when a
    bidirectional node gives only one.
    """
    k = len(defaults)
    names = list(names) if names else list(defaults) * dirs
    if len(names) == k and dirs == 2:
        names = names * 2
    if len(names) != k * dirs:
        raise ValueError(f"expected {k * dirs} activations, got {names}")
    al, be = list(alphas or ()), list(betas or ())
    ia = ib = 0
    acts = []
    for j, raw in enumerate(names):
        name = raw.lower()
        if name not in _TAKES:
            raise ValueError(f"unknown activation {raw!r}")
        a, b = _DEFAULTS.get(name, (0.0, 0.0))
        takes_a, takes_b = _TAKES[name]
        if positional:
            a = al[j] if j < len(al) else a
            b = be[j] if j < len(be) else b
        else:
            if takes_a and ia < len(al):
                a, ia = al[ia], ia + 1
            if takes_b and ib < len(be):
                b, ib = be[ib], ib + 1
        acts.append(activation(name, float(a), float(b)))
    return [tuple(acts[d * k:(d + 1) * k]) for d in range(dirs)]


def stacked(acts: Sequence[Act]) -> Act:
    """One function over the direction axis: the shared one, or each direction's own."""
    if all(a is acts[0] for a in acts):
        return acts[0]

    def apply(x: np.ndarray) -> np.ndarray:
        return np.stack([a(x[d]) for d, a in enumerate(acts)])

    return apply


def _clip(x: np.ndarray, bound: float | None) -> np.ndarray:
    """The activation input bounded to [-clip, clip], in place (``x`` is a temporary)."""
    return x if bound is None else np.clip(x, -bound, bound, out=x)


def _outputs(xw: np.ndarray, h: np.ndarray, active: np.ndarray | None) -> np.ndarray:
    """Y in processing order; zeros where sequences have ended, when some end early."""
    shape = (xw.shape[0],) + h.shape
    return np.empty(shape, h.dtype) if active is None else np.zeros(shape, h.dtype)


def _emit(ys: np.ndarray, t: int, active: np.ndarray | None, new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Write step ``t`` of Y and return the state to carry: ``new`` for the sequences still
    running; an ended one leaves its zeros in Y and keeps ``old``, its last valid state."""
    if active is None:
        ys[t] = new
        return new
    np.copyto(ys[t], new, where=active[t])
    return np.where(active[t], new, old)


def lstm_loop(xw: np.ndarray, rec: Recurrence, h: np.ndarray, c: np.ndarray, p: np.ndarray | None,
              acts: tuple[Act, Act, Act], clip: float | None, input_forget: bool,
              active: np.ndarray | None, rec_into: RecurrenceInto | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LSTM over ``xw`` [steps, dirs, batch, 4H] (gates i, o, f, c; biases folded in).

    ``p`` is the peepholes [3, dirs, 1, H] (i, o, f) or None. Returns Y in processing
    order [steps, dirs, batch, H] and the final h and c [dirs, batch, H]. ``rec_into``,
    ``rec`` writing into a given array, lets the common case (no peepholes, no coupled
    forget gate, every sequence to the end) run ``_lstm_plain``.
    """
    if rec_into is not None and p is None and not input_forget and active is None:
        return _lstm_plain(xw, rec_into, h, c, acts, clip)
    n = h.shape[-1]
    f, g, hh = acts
    ys = _outputs(xw, h, active)
    for t in range(xw.shape[0]):
        gates = rec(h, t)
        gates += xw[t]
        if p is None:   # i, o, f are adjacent and need no cell state: one call for the three
            iof = f(_clip(gates[..., :3 * n], clip))
            i, o, fg = iof[..., :n], iof[..., n:2 * n], iof[..., 2 * n:]
        else:
            i = f(_clip(gates[..., :n] + p[0] * c, clip))
            fg = f(_clip(gates[..., 2 * n:3 * n] + p[2] * c, clip))
        if input_forget:
            fg = 1 - i
        c_new = fg * c + i * g(_clip(gates[..., 3 * n:], clip))
        if p is not None:   # the output gate peeks at the new cell state
            o = f(_clip(gates[..., n:2 * n] + p[1] * c_new, clip))
        h_new = o * hh(c_new.copy())
        c = c_new if active is None else np.where(active[t], c_new, c)
        h = _emit(ys, t, active, h_new, h)
    return ys, h, c


def _lstm_plain(xw: np.ndarray, rec_into: RecurrenceInto, h: np.ndarray, c: np.ndarray,
                acts: tuple[Act, Act, Act], clip: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``lstm_loop``'s common case, the same operations on the same values (so the same bits)
    with fewer temporaries: the gates reuse one array, ``c`` (a fresh array of the caller's)
    is updated in place and h is written straight into its row of Y."""
    n = h.shape[-1]
    f, g, hh = acts
    ys = np.empty((xw.shape[0],) + h.shape, h.dtype)
    gates = np.empty(xw.shape[1:], xw.dtype)
    cell = np.empty(h.shape, h.dtype)
    # the gates' views, made once: an in-place activation (sigmoid, tanh) returns the very view
    g_iof, g_c = gates[..., :3 * n], gates[..., 3 * n:]
    views = g_iof[..., :n], g_iof[..., n:2 * n], g_iof[..., 2 * n:]
    for t in range(xw.shape[0]):
        rec_into(h, gates)
        gates += xw[t]
        iof = f(g_iof if clip is None else _clip(g_iof, clip))
        i, o, fg = views if iof is g_iof else (iof[..., :n], iof[..., n:2 * n], iof[..., 2 * n:])
        cand = g(g_c if clip is None else _clip(g_c, clip))
        np.multiply(i, cand, out=cand)
        np.multiply(fg, c, out=c)
        c += cand                           # fg * c + i * cand, the sum commutes bit for bit
        np.copyto(cell, c)
        h = np.multiply(o, hh(cell), out=ys[t])
    return ys, h, c


def gru_loop(xw: np.ndarray, rt: np.ndarray, h: np.ndarray, rbh: np.ndarray | None, acts: tuple[Act, Act],
             clip: float | None, linear_before_reset: bool,
             active: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """GRU over ``xw`` [steps, dirs, batch, 3H] (gates z, r, h; Wb and the Rb that can be
    folded are in it). ``rt`` is R^T [dirs, H, 3H]; ``rbh`` is Rbh [dirs, 1, H] when
    ``linear_before_reset`` keeps it inside the reset product. Returns Y and the final h."""
    n = h.shape[-1]
    f, g = acts
    ys = _outputs(xw, h, active)
    rt_zr = np.ascontiguousarray(rt[..., :2 * n])
    rt_h = np.ascontiguousarray(rt[..., 2 * n:])
    for t in range(xw.shape[0]):
        x = xw[t]
        if linear_before_reset:   # one GEMM: h @ [Rz Rr Rh]^T
            hr = h @ rt
            zr = f(_clip(x[..., :2 * n] + hr[..., :2 * n], clip))
            lin = hr[..., 2 * n:] if rbh is None else hr[..., 2 * n:] + rbh
            cand = g(_clip(x[..., 2 * n:] + zr[..., n:] * lin, clip))
        else:   # the reset gate scales h before Rh: a second GEMM after the first
            zr = f(_clip(x[..., :2 * n] + h @ rt_zr, clip))
            cand = g(_clip(x[..., 2 * n:] + (zr[..., n:] * h) @ rt_h, clip))
        h = _emit(ys, t, active, cand + zr[..., :n] * (h - cand), h)    # (1 - z) * cand + z * h
    return ys, h


def rnn_loop(xw: np.ndarray, rt: np.ndarray, h: np.ndarray, act: Act, clip: float | None,
             active: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Simple RNN over ``xw`` [steps, dirs, batch, H]: h = f(x W^T + h R^T + Wb + Rb)."""
    ys = _outputs(xw, h, active)
    for t in range(xw.shape[0]):
        h = _emit(ys, t, active, act(_clip(xw[t] + h @ rt, clip)), h)
    return ys, h
