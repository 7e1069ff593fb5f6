"""The run counters' fast paths against the plain formulas: ``total_depth`` summed per
distinct time against the running sum of every sorted change (``steps``), and ``work``
sorted by an attrgetter against the key it replaced; on real runs and on random
timelines full of ties."""

from __future__ import annotations

import random
from pathlib import Path

import onnx
import pytest

import graphexec as gx
from graphexec.profiling.counters import (
    _area_peak,
    _empty_time,
    _gaps,
    _window,
    level_at,
    measure,
    run_metrics,
    steps,
    total_depth,
    work,
)

LIGHT = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))
SOME = [p for p in LIGHT if p.stem in ("light_inception_v1", "light_shufflenet")]


def _depth_plain(tasks):
    done = [t for t in tasks if t.end_t is not None]
    return steps([(t.enqueue_t, 1.0) for t in done] + [(t.end_t, -1.0) for t in done])


def _work_plain(tasks):
    return sorted((t for t in tasks if t.kind in ("kernel", "memcpy") and t.start_t is not None),
                  key=lambda t: (t.start_t, t.seq))


def _metrics_plain(tasks):
    """``run_metrics`` as first written, from the plain depth and work."""
    done = _work_plain(tasks)
    lo, hi = _window(done)
    if hi <= lo:
        return {"mean_queue_depth": 0.0, "max_queue_depth": 0, "device_idle_us": 0.0, "host_wait_us": 0.0}
    depth = _depth_plain(tasks)
    _, area = measure(depth, lo, hi)
    peak = max([level_at(depth, lo)] + [v for t, v in depth if lo <= t < hi])
    idle = _gaps(done)
    return {"mean_queue_depth": area / (hi - lo), "max_queue_depth": int(peak),
            "device_idle_us": sum(b - a for a, b in idle),
            "host_wait_us": sum(measure(depth, a, b, lambda v: v <= 0)[0] for a, b in idle)}


def _same_series(a, b):
    assert [(t, v) for t, v in a] == [(t, v) for t, v in b]
    assert all(type(v) is float for _, v in a)   # levels stay floats (the trace prints them)


@pytest.mark.parametrize("path", SOME, ids=[p.stem[6:] for p in SOME])
def test_total_depth_and_work_match_the_plain_formulas_on_real_runs(path):
    tasks = gx.Session(gx.load(path), streams=4).simulate().run.tasks
    _same_series(total_depth(tasks), _depth_plain(tasks))
    assert work(tasks) == _work_plain(tasks)
    done = [t for t in tasks if t.start_t is not None]
    assert run_metrics(done) == _metrics_plain(done)


class _T:
    def __init__(self, kind, enq, start, end, seq):
        self.kind, self.enqueue_t, self.start_t, self.end_t, self.seq = kind, enq, start, end, seq


def test_total_depth_and_run_metrics_on_random_timelines_with_ties():
    rng = random.Random(3)
    for _ in range(300):
        tasks = []
        for seq in range(rng.randrange(0, 15)):
            enq = float(rng.randrange(5))
            start = enq + rng.randrange(3) if rng.random() < 0.9 else None
            end = None if start is None else start + rng.choice([0.0, 0.5, 1.0, 2.0])
            tasks.append(_T(rng.choice(["kernel", "memcpy", "record", "wait"]), enq, start, end, seq))
        _same_series(total_depth(tasks), _depth_plain(tasks))
        assert work(tasks) == _work_plain(tasks)
        done = [t for t in tasks if t.start_t is not None]
        assert run_metrics(done) == _metrics_plain(done)


def test_area_peak_and_empty_time_are_measure_s_numbers():
    rng = random.Random(5)
    for _ in range(500):
        times = sorted({float(rng.randrange(20)) / 4 for _ in range(rng.randrange(0, 12))})
        series = [(t, float(rng.randrange(-1, 4))) for t in times]
        lo = rng.randrange(-2, 22) / 4
        hi = lo + rng.randrange(1, 12) / 4
        area, peak = _area_peak(series, lo, hi)
        assert area == measure(series, lo, hi)[1]
        assert peak == max([level_at(series, lo)] + [v for t, v in series if lo <= t < hi])
        assert _empty_time(series, lo, hi) == measure(series, lo, hi, lambda v: v <= 0)[0]
