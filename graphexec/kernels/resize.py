"""Resize (opsets 10-19): nearest / linear / cubic, separable, one gather per tap and axis.

Interpolation is separable, so an N-d resize is a 1-d resize per resized axis:
source coordinates and tap weights are computed per output index (a tiny 1-d
table) and applied with ``np.take`` over the whole tensor. Coordinates follow the
spec formulas in float64 with ``output_width = scale * input_width`` (fractional
when scales are given), as onnx's reference and backend test data do.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from graphexec.kernels.registry import OpContext, Unsupported, register

_MODES_BY_OPSET = {
    10: {"asymmetric"},
    11: {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
         "tf_crop_and_resize"},
    13: {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"},
    19: {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
         "tf_crop_and_resize"},
}


def _allowed_modes(opset: int) -> set[str]:
    """Coordinate modes that exist at ``opset``."""
    return _MODES_BY_OPSET[max(v for v in _MODES_BY_OPSET if v <= opset)]


def _source_coords(mode: str, y: np.ndarray, scale: float, n: int, out: int,
                   roi: tuple[Any, Any] | None) -> np.ndarray:
    """Source coordinate of each output index along one axis (spec formulas, float64)."""
    width = scale * n  # the fractional output length when a scale is given
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = (n / 2) * (1 - out / width)
        return offset + (y + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return np.full(out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    if mode == "align_corners":
        return np.zeros(out) if width == 1 else y * (n - 1) / (width - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    assert roi is not None  # _rois gives tf_crop_and_resize a (start, end) per axis
    start, end = roi  # tf_crop_and_resize (kept in the roi's dtype, as the reference does)
    if width == 1:
        x = np.full(out, (end - start) * (n - 1) / 2, dtype=np.float64)
    else:
        x = y * (end - start) * (n - 1) / (width - 1)
    return x + start * (n - 1)


def _nearest_taps(x: np.ndarray, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """One tap per output: the rounded coordinate, weight 1."""
    fl = np.floor(x)
    frac = x - fl
    if rule == "round_prefer_floor":
        idx = fl + (frac > 0.5)
    elif rule == "round_prefer_ceil":
        idx = fl + (frac >= 0.5)
    elif rule == "floor":
        idx = fl
    elif rule == "ceil":
        idx = np.ceil(x)
    else:
        raise Unsupported(f"Resize: nearest_mode={rule!r}")
    return idx.astype(np.int64)[:, None], np.ones((len(x), 1))


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Keys cubic convolution weights of the taps at offsets -1, 0, 1, 2 from floor(x)."""
    def near(d: np.ndarray) -> np.ndarray:  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d: np.ndarray) -> np.ndarray:  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)


def _taps(ctx: OpContext, mode: str, x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Input indices (out, taps) and weights (out, taps) along one axis, before clamping."""
    if mode == "nearest":
        return _nearest_taps(x, ctx.attr("nearest_mode", "round_prefer_floor"))
    fl = np.floor(x)
    t = x - fl
    base = fl.astype(np.int64)[:, None]
    if mode == "linear":
        return base + np.arange(2), np.stack([1 - t, t], axis=1)
    if mode == "cubic":
        return base + np.arange(-1, 3), _cubic_weights(t, float(ctx.attr("cubic_coeff_a", -0.75)))
    raise Unsupported(f"Resize: mode={mode!r}")


def _resize_axis(ctx: OpContext, data: np.ndarray, axis: int, scale: float, out: int,
                 roi: tuple[Any, Any] | None, cmode: str, mode: str) -> np.ndarray:
    """1-d resize of ``data`` along ``axis``."""
    n = data.shape[axis]
    x = _source_coords(cmode, np.arange(out, dtype=np.float64), scale, n, out, roi)
    idx, w = _taps(ctx, mode, x, n)
    if ctx.attr("exclude_outside", 0):
        w = np.where((idx < 0) | (idx >= n), 0.0, w)
        s = w.sum(axis=1, keepdims=True)
        w = w / np.where(s == 0, 1.0, s)
    idx = np.clip(idx, 0, n - 1)
    shape = [1] * data.ndim
    shape[axis] = out
    if mode == "nearest":
        res = np.take(data, idx[:, 0], axis=axis)
    else:
        res = np.zeros(data.shape[:axis] + (out,) + data.shape[axis + 1:], dtype=data.dtype)
        for j in range(idx.shape[1]):
            res += np.take(data, idx[:, j], axis=axis) * w[:, j].astype(data.dtype).reshape(shape)
    if cmode == "tf_crop_and_resize":
        outside = ((x < 0) | (x > n - 1)).reshape(shape)
        res = np.where(outside, np.asarray(ctx.attr("extrapolation_value", 0.0), dtype=res.dtype), res)
    return res


def _targets(ctx: OpContext, x: np.ndarray, scales: np.ndarray | None, sizes: np.ndarray | None,
             axes: list[int]) -> tuple[list[float], list[int]]:
    """Per resized axis: the scale used for coordinates and the integer output length."""
    in_sp = [x.shape[a] for a in axes]
    if min(in_sp, default=1) < 1:
        raise Unsupported("Resize: empty input axis")
    if sizes is not None and sizes.size:
        if scales is not None and scales.size:
            raise Unsupported("Resize: both scales and sizes")
        sz = [int(v) for v in sizes]
        if len(sz) != len(axes):
            raise Unsupported(f"Resize: sizes {sz} for axes {axes}")
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch") if ctx.opset >= 18 else "stretch"
        ratio = [o / n for o, n in zip(sz, in_sp)]
        if policy == "stretch":
            return ratio, sz
        if policy not in ("not_larger", "not_smaller"):
            raise Unsupported(f"Resize: keep_aspect_ratio_policy={policy!r}")
        s = min(ratio) if policy == "not_larger" else max(ratio)
        return [s] * len(axes), [int(s * n + 0.5) for n in in_sp]
    if scales is None or not scales.size:
        raise Unsupported("Resize: neither scales nor sizes")
    sc = [float(v) for v in scales]
    if len(sc) != len(axes) or min(sc) <= 0:
        raise Unsupported(f"Resize: scales {sc} for axes {axes}")
    return sc, [int(np.floor(s * n)) for s, n in zip(sc, in_sp)]


def _axes(ctx: OpContext, rank: int) -> list[int]:
    """The resized axes (attribute ``axes`` from opset 18, else all)."""
    axes = ctx.attrs.get("axes") if ctx.opset >= 18 else None
    if axes is None:
        return list(range(rank))
    axes = [int(a) + rank if int(a) < 0 else int(a) for a in axes]
    if len(set(axes)) != len(axes) or not all(0 <= a < rank for a in axes):
        raise Unsupported(f"Resize: axes={axes}")
    return axes


def _check(ctx: OpContext, x: np.ndarray, mode: str, cmode: str) -> None:
    """Reject what this kernel does not reproduce exactly."""
    if cmode not in _allowed_modes(ctx.opset):
        raise Unsupported(f"Resize: coordinate_transformation_mode={cmode!r} at opset {ctx.opset}")
    if ctx.opset >= 18 and ctx.attr("antialias", 0):
        raise Unsupported("Resize: antialias")
    if mode == "nearest" and ctx.attr("exclude_outside", 0):
        raise Unsupported("Resize: exclude_outside with nearest")
    if mode != "nearest" and x.dtype.kind != "f":
        raise Unsupported(f"Resize: {mode} on {x.dtype} (rounding of integer results)")
    if x.dtype.kind not in "fiub":
        raise Unsupported(f"Resize: dtype {x.dtype}")


@register("Resize", since=10)
def resize(ctx: OpContext, x: np.ndarray, *rest: np.ndarray | None) -> np.ndarray:
    """Resize by scales or sizes; see the module docstring for the coordinate convention."""
    mode = ctx.attr("mode", "nearest")
    if ctx.opset < 11:
        roi, scales, sizes = None, (rest[0] if rest else None), None
        cmode = "asymmetric"
        if mode == "nearest" and scales is not None and (np.asarray(scales) < 1).any():
            raise Unsupported("Resize-10: nearest downsampling rounding is implementation-defined")
        ctx = OpContext(ctx.op, {"nearest_mode": "floor", "mode": mode}, ctx.opset, ctx.num_outputs, ctx.name)
    else:
        roi, scales, sizes = (list(rest) + [None] * 3)[:3]
        cmode = ctx.attr("coordinate_transformation_mode", "half_pixel")
    _check(ctx, x, mode, cmode)
    axes = _axes(ctx, x.ndim)
    scale, out = _targets(ctx, x, None if scales is None else np.asarray(scales),
                          None if sizes is None else np.asarray(sizes), axes)
    rois = _rois(roi, axes, cmode, sizes is not None and np.asarray(sizes).size > 0)
    if mode == "cubic" and cmode == "pytorch_half_pixel" and any(s * x.shape[a] == 1 for s, a in zip(scale, axes)):
        raise Unsupported("Resize: cubic pytorch_half_pixel to length 1 (spec says 0, reference -0.5)")
    y = x.astype(np.float32) if x.dtype == np.float16 else x
    for a, s, o, r in zip(axes, scale, out, rois):
        if s == 1.0 and o == x.shape[a] and r is None:
            continue
        y = _resize_axis(ctx, y, a, s, o, r, cmode, mode)
    return y.astype(x.dtype, copy=False)


def _rois(roi: np.ndarray | None, axes: Sequence[int], cmode: str,
          by_sizes: bool) -> Sequence[tuple[Any, Any] | None]:
    """(start, end) per resized axis for tf_crop_and_resize, else None."""
    if cmode != "tf_crop_and_resize":
        return [None] * len(axes)
    if roi is None or np.asarray(roi).size != 2 * len(axes):
        raise Unsupported("Resize: tf_crop_and_resize needs a roi per axis")
    roi = np.asarray(roi)
    k = len(axes)
    pairs = [(roi[i], roi[k + i]) for i in range(k)]
    if not by_sizes and any((s, e) != (0, 1) for s, e in pairs):
        # Spec scales the output length by the roi extent; the reference does not.
        raise Unsupported("Resize: tf_crop_and_resize with scales and a non-trivial roi")
    return pairs
