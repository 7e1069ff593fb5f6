"""Detection kernels: NonMaxSuppression, vectorized, in the reference's own arithmetic.

The reference (``onnx.reference``'s NonMaxSuppression) compares each candidate with every
box kept so far in Python, pair by pair: Faster R-CNN spent 96% of a 105-300 s run there.
Here the candidates of one (batch, class) are sorted once (score descending, lower index
first on ties, as the reference's ``BoxInfo`` order), and taken in chunks: within a chunk
the greedy choice runs on a small IoU matrix, and the chunk's kept boxes then suppress all
later candidates in one array operation. Suppression is symmetric in the two boxes, so
"a kept box suppresses later ones" selects what "a candidate survives every kept box"
does. Each IoU is computed in the boxes' dtype with the reference's operations in its
order, so the selection is the same, bit for bit, including at the threshold.

``nms_plain`` is the pair-by-pair loop the fast path replaces (tests compare the two).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec import _switch
from graphexec.kernels import cost_ops
from graphexec.kernels.registry import OpContext, Unsupported, register

CHUNK = 128   # candidates decided together: a CHUNK x CHUNK matrix, then one sweep of the rest
SWEEP_FROM = 512   # from this many later candidates on, only pairs whose x ranges can meet are tested,
SWEEP_SHARE = 0.25   # where they are at most this share of all pairs (else each costs more than a dense one)


def _thresholds(max_out: Any, iou: Any, score: Any, dtype: np.dtype) -> tuple[int, Any, Any]:
    """max boxes per class (0 when omitted: nothing selected), IoU threshold (0), score
    threshold (None: no filter), each the first element of its input as the reference reads it."""
    def first(x: Any) -> Any:
        return None if x is None or np.size(x) == 0 else np.asarray(x).reshape(-1)[0]

    m = first(max_out)
    return (0 if m is None else max(int(m), 0)), (first(iou) if first(iou) is not None else dtype.type(0)), first(score)


def _extents(boxes: np.ndarray, center: int) -> tuple[np.ndarray, ...]:
    """(x_min, x_max, y_min, y_max, area) per box, in the boxes' dtype as the reference has them."""
    if center:
        xc, yc, w, h = (boxes[:, i] for i in range(4))
        hw, hh = w / 2, h / 2
        x0, x1, y0, y1 = xc - hw, xc + hw, yc - hh, yc + hh
    else:
        x0, x1 = np.minimum(boxes[:, 1], boxes[:, 3]), np.maximum(boxes[:, 1], boxes[:, 3])
        y0, y1 = np.minimum(boxes[:, 0], boxes[:, 2]), np.maximum(boxes[:, 0], boxes[:, 2])
    return x0, x1, y0, y1, (x1 - x0) * (y1 - y0)


def _suppresses(ext: tuple[np.ndarray, ...], a: np.ndarray, b: np.ndarray, thr: Any) -> np.ndarray:
    """[len(a), len(b)] bools: box a[i] and box b[j] overlap by more than ``thr``, with the
    reference's tests (no overlap, empty boxes and empty unions never suppress)."""
    x0, x1, y0, y1, area = ext
    with np.errstate(all="ignore"):
        w = np.minimum(x1[a][:, None], x1[b])
        w -= np.maximum(x0[a][:, None], x0[b])
        h = np.minimum(y1[a][:, None], y1[b])
        h -= np.maximum(y0[a][:, None], y0[b])
        # the pairs that overlap at all (ix1 > ix0 is ix1 - ix0 > 0 in IEEE arithmetic, inf aside:
        # boxes are finite); most pairs do not, and the rest of the test runs on these alone
        i, j = np.nonzero((w > 0) & (h > 0))
        inter = w[i, j] * h[i, j]
        union = area[a][i] + area[b][j] - inter
        hit = (inter > 0) & (area[a][i] > 0) & (area[b][j] > 0) & (union > 0) & (inter / union > thr)
    out = np.zeros((len(a), len(b)), dtype=bool)
    out[i[hit], j[hit]] = True
    return out


def _pair_hits(ext: tuple[np.ndarray, ...], a: np.ndarray, b: np.ndarray, thr: Any) -> np.ndarray:
    """Per pair (a[k], b[k]) of box indices: whether one suppresses the other (``_suppresses``'s test)."""
    x0, x1, y0, y1, area = ext
    with np.errstate(all="ignore"):
        w = np.minimum(x1[a], x1[b])
        w -= np.maximum(x0[a], x0[b])
        h = np.minimum(y1[a], y1[b])
        h -= np.maximum(y0[a], y0[b])
        inter = w * h
        union = area[a] + area[b] - inter
        return (w > 0) & (h > 0) & (inter > 0) & (area[a] > 0) & (area[b] > 0) & (union > 0) & (inter / union > thr)


def _suppressed(ext: tuple[np.ndarray, ...], chosen: np.ndarray, rest: np.ndarray, thr: Any) -> np.ndarray:
    """Per box of ``rest``: whether a box of ``chosen`` suppresses it. With many boxes only the
    pairs whose x ranges can meet are tested: ``rest`` sorted by left edge, a chosen box meets
    those whose left edge lies within (its left edge - the widest box, its right edge), a
    contiguous run (torchvision's batched NMS offsets each class far from the others, so a box
    meets only its own class's)."""
    x0, x1 = ext[0], ext[1]
    left, right = x0[rest].astype(np.float64), x1[rest].astype(np.float64)
    widest = float((right - left).max()) if len(rest) else 0.0
    if len(rest) < SWEEP_FROM or not _switch.FAST or not np.isfinite(widest) or not np.isfinite(left).all() \
            or not np.isfinite(x0[chosen]).all() or not np.isfinite(x1[chosen]).all():
        return np.asarray(_suppresses(ext, chosen, rest, thr).any(axis=0))
    order = np.argsort(left, kind="stable")
    edges = left[order]
    start = x0[chosen].astype(np.float64) - widest
    start -= 1e-9 * (np.abs(start) + widest) + 1e-30   # a margin for float64 boxes' rounded widths
    lo = np.searchsorted(edges, start, side="left")
    hi = np.searchsorted(edges, x1[chosen].astype(np.float64), side="left")
    counts = np.maximum(hi - lo, 0)
    if counts.sum() > SWEEP_SHARE * len(chosen) * len(rest):   # most pairs meet: the dense test is cheaper per pair
        return np.asarray(_suppresses(ext, chosen, rest, thr).any(axis=0))
    if not counts.sum():
        return np.zeros(len(rest), dtype=bool)
    at = np.arange(int(counts.sum())) + np.repeat(lo - (np.cumsum(counts) - counts), counts)
    local = order[at]
    hit = _pair_hits(ext, np.repeat(chosen, counts), rest[local], thr)
    dead = np.zeros(len(rest), dtype=bool)
    dead[local[hit]] = True
    return dead


def _greedy(sup: np.ndarray, room: int) -> list[int]:
    """The rows a greedy pass keeps, in order, given ``sup[i, j]``: i suppresses j."""
    dead = np.zeros(len(sup), dtype=bool)
    kept: list[int] = []
    for i in range(len(sup)):
        if dead[i]:
            continue
        kept.append(i)
        if len(kept) == room:
            break
        dead |= sup[i]
    return kept


def nms_class(ext: tuple[np.ndarray, ...], scores: np.ndarray, max_out: int, iou: Any, score: Any) -> np.ndarray:
    """Box indices kept for one (batch, class), in selection order."""
    cand = np.flatnonzero(scores > score) if score is not None else np.arange(len(scores))
    order = cand[np.argsort(-scores[cand], kind="stable")]
    alive = np.ones(len(order), dtype=bool)
    kept: list[np.ndarray] = []
    room = max_out
    for start in range(0, len(order), CHUNK):
        if room <= 0:
            break
        pos = np.flatnonzero(alive[start:start + CHUNK]) + start
        if not len(pos):
            continue
        chunk = order[pos]
        chosen = chunk[_greedy(_suppresses(ext, chunk, chunk, iou), room)]
        kept.append(chosen)
        room -= len(chosen)
        rest = np.flatnonzero(alive[start + CHUNK:]) + start + CHUNK
        if len(rest) and room > 0:
            alive[rest] = ~_suppressed(ext, chosen, order[rest], iou)
    return np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)


@register("NonMaxSuppression", since=10, cost=cost_ops.nms)
def non_max_suppression(ctx: OpContext, boxes: np.ndarray, scores: np.ndarray, max_out: np.ndarray | None = None,
                        iou: np.ndarray | None = None, score: np.ndarray | None = None) -> np.ndarray:
    """[selected, 3] int64 rows (batch, class, box), batch by batch and class by class."""
    if boxes.dtype.kind != "f" or scores.dtype != boxes.dtype or boxes.ndim != 3 or scores.ndim != 3 \
            or boxes.shape[2] != 4 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise Unsupported(f"NonMaxSuppression: boxes {boxes.shape} {boxes.dtype}, scores {scores.shape} {scores.dtype}")
    m, thr, sthr = _thresholds(max_out, iou, score, boxes.dtype)
    center = int(ctx.attr("center_point_box", 0))
    rows = []
    for b in range(boxes.shape[0] if m else 0):
        ext = _extents(boxes[b], center)
        for c in range(scores.shape[1]):
            kept = nms_class(ext, scores[b, c], m, thr, sthr)
            rows.append(np.stack([np.full(len(kept), b), np.full(len(kept), c), kept], axis=1))
    return np.concatenate(rows).astype(np.int64) if rows else np.zeros((0, 3), dtype=np.int64)


def nms_plain(boxes: np.ndarray, scores: np.ndarray, max_out: int, iou: Any, score: Any, center: int) -> np.ndarray:
    """The plain reference of one (batch, class): each candidate against every kept box."""
    ext = _extents(boxes, center)
    cand = [i for i in range(len(scores)) if score is None or scores[i] > score]
    cand.sort(key=lambda i: (-scores[i], i))
    kept: list[int] = []
    for i in cand:
        if len(kept) == max_out:
            break
        if not any(_suppresses(ext, np.array([i]), np.array([k]), iou)[0, 0] for k in kept):
            kept.append(i)
    return np.array(kept, dtype=np.int64)


CHUNK_ELEMENTS = 1 << 18   # samples x channels gathered at once (RoiAlign): 1 MiB of float32 stays in cache


def _roi_geometry(rois: np.ndarray, scale: Any, half: bool, ph: int, pw: int, ratio: int) -> tuple[np.ndarray, ...]:
    """Per ROI: start (y, x), bin size (y, x) and sampling grid (gy, gx), in the rois' dtype as
    the reference computes them (malformed ROIs forced to 1x1 without half_pixel)."""
    dt = rois.dtype.type
    off = dt(0.5 if half else 0.0)
    x0, y0, x1, y1 = (rois[:, i] * dt(scale) - off for i in range(4))
    w, h = x1 - x0, y1 - y0
    if not half:
        w, h = np.maximum(w, dt(1.0)), np.maximum(h, dt(1.0))
    bh, bw = h / dt(ph), w / dt(pw)
    gy = np.full(len(rois), ratio) if ratio > 0 else np.ceil(h / dt(ph)).astype(np.int64)
    gx = np.full(len(rois), ratio) if ratio > 0 else np.ceil(w / dt(pw)).astype(np.int64)
    return y0, x0, bh, bw, gy, gx


def _taps(start: np.ndarray, size: np.ndarray, bins: int, grid: int, limit: int) -> tuple[np.ndarray, ...]:
    """Along one axis, per ROI, bin and sample: (low index, high index, low weight, high weight,
    inside), the reference's bilinear rule (clamped at the last row or column)."""
    dt = start.dtype.type
    b = np.arange(bins, dtype=start.dtype)[None, :, None]
    g = (np.arange(grid, dtype=start.dtype) + dt(0.5))[None, None, :]
    pos = start[:, None, None] + b * size[:, None, None] + g * size[:, None, None] / dt(grid)
    inside = (pos >= -1.0) & (pos <= limit)
    pos = np.maximum(pos, dt(0))
    low = pos.astype(np.int64)
    edge = low >= limit - 1
    low = np.where(edge, limit - 1, low)
    high = np.where(edge, limit - 1, low + 1)
    pos = np.where(edge, low.astype(start.dtype), pos)
    frac = pos - low.astype(start.dtype)
    return low, high, dt(1.0) - frac, frac, inside


def _roi_group(x: np.ndarray, flat: np.ndarray, batch: np.ndarray, geo: tuple, sel: np.ndarray,
               shape: tuple[int, int], avg: bool) -> np.ndarray:
    """RoiAlign of the ROIs ``sel`` that share one sampling grid: [len(sel), C, ph, pw]. Each
    sample is w1*v1 + w2*v2 + w3*v3 + w4*v4 (left to right, as the reference adds), and the
    samples of a bin are summed (or maxed) in the reference's order, so sums round alike."""
    y0, x0, bh, bw, gy, gx = geo
    (ph, pw), (c, h, w) = shape, x.shape[1:]
    gh, gw = int(gy[sel[0]]), int(gx[sel[0]])
    if gh * gw == 0:   # an empty ROI with no samples: the reference's 0
        return np.zeros((len(sel), c, ph, pw), dtype=x.dtype)
    yl, yh, wyl, wyh, yin = _taps(y0[sel], bh[sel], ph, gh, h)
    xl, xh, wxl, wxh, xin = _taps(x0[sel], bw[sel], pw, gw, w)
    b = batch[sel][:, None, None] * (h * w)
    out: np.ndarray | None = None
    for iy in range(gh):
        for ix in range(gw):
            inside = (yin[:, :, iy, None] & xin[:, None, :, ix]).astype(x.dtype)   # [R, ph, pw]
            sample: np.ndarray | None = None
            for ya, wy in ((yl, wyl), (yh, wyh)):
                for xa, wx in ((xl, wxl), (xh, wxh)):
                    pos = ya[:, :, iy, None] * w + xa[:, None, :, ix]
                    weight = wy[:, :, iy, None] * wx[:, None, :, ix] * inside
                    v = flat[b + pos]   # [R, ph, pw, C]
                    v *= weight[..., None]
                    if sample is None:
                        sample = v
                    else:
                        (np.add if avg else np.maximum)(sample, v, out=sample)
            assert sample is not None
            if out is None:
                out = sample
            else:
                (np.add if avg else np.maximum)(out, sample, out=out)
    assert out is not None
    if avg:
        out = out / x.dtype.type(gh * gw)
    return out.transpose(0, 3, 1, 2)


@register("RoiAlign", since=10, cost=cost_ops.roi_align)
def roi_align(ctx: OpContext, x: np.ndarray, rois: np.ndarray, batch: np.ndarray) -> np.ndarray:
    """[R, C, output_height, output_width]: each bin the mean (or max) of its bilinear samples."""
    if x.ndim != 4 or x.dtype.kind != "f" or rois.dtype != x.dtype or rois.ndim != 2 or rois.shape[1] != 4 \
            or batch.reshape(-1).shape[0] != len(rois):
        raise Unsupported(f"RoiAlign: X {x.shape} {x.dtype}, rois {rois.shape} {rois.dtype}")
    mode = str(ctx.attr("mode", "avg")).lower()
    ph, pw = int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))
    half = str(ctx.attr("coordinate_transformation_mode", "half_pixel" if ctx.opset >= 16 else
                        "output_half_pixel")).lower() == "half_pixel"
    geo = _roi_geometry(rois, np.float32(ctx.attr("spatial_scale", 1.0)), half, ph, pw,
                        int(ctx.attr("sampling_ratio", 0)))
    batch = batch.reshape(-1).astype(np.int64)
    if len(rois) and ((batch < 0) | (batch >= x.shape[0])).any():
        raise Unsupported("RoiAlign: batch index out of range")
    y = np.empty((len(rois), x.shape[1], ph, pw), dtype=x.dtype)
    n, c, h, w = x.shape   # [N*H*W, C]: a sample's gather reads its C channels in one row
    flat = np.ascontiguousarray(x.reshape(n, c, h * w).transpose(0, 2, 1)).reshape(n * h * w, c)
    grids = geo[4] * 1_000_003 + geo[5]
    for key in np.unique(grids):
        same = np.flatnonzero(grids == key)
        step = max(1, CHUNK_ELEMENTS // max(1, ph * pw * x.shape[1]))
        for i in range(0, len(same), step):
            sel = same[i:i + step]
            y[sel] = _roi_group(x, flat, batch, geo, sel, (ph, pw), mode == "avg")
    return y
