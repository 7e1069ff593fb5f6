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

from graphexec.kernels import cost_ops
from graphexec.kernels.registry import OpContext, Unsupported, register

CHUNK = 128   # candidates decided together: a CHUNK x CHUNK matrix, then one sweep of the rest


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
            alive[rest] = ~_suppresses(ext, chosen, order[rest], iou).any(axis=0)
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
