"""Digests of everything a compile and a run produce, to hold a refactor to bit-identical
behaviour: the task graph, the schedule, the memory plan, the outputs, the stats and the
trace of every light model and node-test model.

Recorded once before the plan became a frozen value (``python tests/golden.py --record``);
``tests/e2e/test_golden.py`` recomputes and compares. The contract additions made since
(``alias_of`` entries for non-root tensors, ``record_id`` args and ``sync`` flow events in
the trace) are left out of the digests, so the rest must stay exactly as it was.
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import onnx

import graphexec as gx

DATA = Path(__file__).parent / "data" / "golden_plans.json"
# each node test's generated inputs when DATA was recorded: onnx makes some with ml_dtypes at
# collection, and ml_dtypes 0.7 casts out-of-range int2/int4 values otherwise than 0.6 did
# (0.6 wraps), so those cases' inputs, and so outputs, differ
ORACLES = Path(__file__).parent / "data" / "golden_oracles.json"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_STREAMS = (1, 4, "auto")
NODE_STREAMS = (1, 2)
# Bernoulli with no seed draws fresh numbers each run, as the ONNX spec allows
UNSEEDED = {"test_bernoulli", "test_bernoulli_double", "test_bernoulli_double_expanded", "test_bernoulli_expanded"}


def _digest(obj: Any) -> str:
    h = hashlib.sha256()
    if isinstance(obj, np.ndarray) and obj.dtype == object:   # its bytes are pointers
        h.update(repr(obj.tolist()).encode())
    elif isinstance(obj, np.ndarray):
        h.update(f"{obj.dtype.str}{obj.shape}".encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    else:
        h.update(json.dumps(obj, sort_keys=True, default=repr).encode())
    return h.hexdigest()[:16]


def _task(t: Any) -> list[Any]:
    return [t.id, t.kind.value, t.name, t.op, list(t.reads), list(t.writes), t.unit, t.flops, t.bytes,
            t.block_dim, t.dtype]


def plan_digests(compiled: Any) -> dict[str, str]:
    """Digests of the compiled plan: tasks, schedule and memory plan."""
    tg, sched = compiled.tasks, compiled.schedule
    stream_of = lambda t: sched.stream_of[t.id]  # noqa: E731
    event_of = lambda t: getattr(t, "event", None)  # noqa: E731  (kernels have none)
    tasks = [_task(t) for t in tg.tasks]
    deps = {str(k): sorted(v) for k, v in sorted(tg.deps.items())}
    views = [sorted(tg.alias.items()), sorted(tg.offset.items()), sorted(tg.inplace.items())]
    streams = [[[t.id, t.kind.value, t.name, stream_of(t), event_of(t)] for t in s] for s in sched.streams]
    schedule = [streams, [t.id for t in sched.order], sched.num_events, sched.num_event_ids, sched.policy,
                sorted(sched.stats.items()), list(sched.priorities)]
    entries = [[e.tensor, e.offset, e.size, e.region, e.first, e.last, e.stream]
               for e in compiled.memory_plan.entries if getattr(e, "alias_of", None) is None]
    mp = compiled.memory_plan
    memory = [entries, sorted(mp.region_bytes.items()), mp.lower_bound_bytes, mp.no_reuse_bytes,
              mp.cut_bound_bytes, sorted((k, repr(v)) for k, v in mp.joint.items())]
    return {"tasks": _digest([tasks, deps, views]), "schedule": _digest(schedule), "memory": _digest(memory)}


def _trace_events(trace: dict[str, Any]) -> list[Any]:
    out = []
    for ev in trace["traceEvents"]:
        if ev.get("cat") == "sync":
            continue
        args = ev.get("args")
        if isinstance(args, dict) and "record_id" in args:
            ev = {**ev, "args": {k: v for k, v in args.items() if k != "record_id"}}
        out.append(ev)
    return out


def run_digests(result: Any) -> dict[str, str]:
    """Digests of one run: outputs, stats (less the host's compile time) and trace."""
    stats = {k: v for k, v in result.stats.to_dict().items() if k != "compile_s"}
    outs = [[name, _digest(v) if isinstance(v, np.ndarray) else _digest(repr(v))]
            for name, v in result.outputs.items()]
    return {"outputs": _digest(outs), "stats": _digest(stats), "trace": _digest(_trace_events(result.trace))}


def light_cases() -> Iterator[tuple[str, Any, Any]]:
    """(case name, model path, streams) for every light model at each stream setting."""
    for path in sorted(LIGHT.glob("*.onnx")):
        for s in LIGHT_STREAMS:
            yield f"light/{path.stem}/streams={s}", path, s


def light_feeds(session: Any) -> dict[str, np.ndarray]:
    name = session.graph.inputs[0]
    shape = [d if isinstance(d, int) else 1 for d in session.graph.values[name].type.shape]
    n = int(np.prod(shape))
    return {name: (np.arange(n, dtype=np.float32).reshape(shape) / n).astype(np.float32)}


def _node_tests() -> list[Any]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sorted((c for c in collect_testcases() if c.data_sets), key=lambda c: c.name)


def _arrays(values: list[Any]) -> list[Any]:
    return [onnx.numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x for x in values]


def node_cases() -> Iterator[tuple[str, Any, Any, Any]]:
    """(case name, model, streams, feeds) for each node test's first data set that runs."""
    for case in _node_tests():
        inputs = _arrays(case.data_sets[0][0])
        for s in NODE_STREAMS:
            yield f"node/{case.name}/streams={s}", case.model, s, inputs


def oracle_digests() -> dict[str, str]:
    """Per node test, a digest of the inputs of its first data set as onnx generates them."""
    return {case.name: _digest([_digest(np.asarray(v)) if isinstance(v, np.ndarray) else repr(v)
                                for v in _arrays(case.data_sets[0][0])])
            for case in _node_tests()}


def ml_dtypes_dependent(test: str) -> bool:
    """The node tests whose data (inputs, or graphexec's outputs: its casts are ml_dtypes')
    hang on how ml_dtypes casts out-of-range values to 2- and 4-bit integers (0.6 wraps, 0.7
    does not)."""
    return test.startswith(("test_cast_", "test_castlike_")) and any(
        t in test for t in ("INT2", "INT4", "UINT2", "UINT4"))


def digest_case(model: Any, streams: Any, feeds: Any | None) -> dict[str, str]:
    """Every digest of one compile and two runs (the simulated one and the replayed one)."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            session = gx.Session(model, streams=streams)
            if feeds is None:
                feeds = light_feeds(session)
            elif isinstance(feeds, list):
                feeds = dict(zip(session.graph.inputs, feeds))
            first = session.run(feeds)
            second = session.run(feeds)
            out = {**plan_digests(session.compiled), **run_digests(first)}
            again = run_digests(second)
            out["replay_same"] = str(again == run_digests(first))
            return out
    except Exception as e:  # noqa: BLE001  (a case that fails must keep failing the same way)
        return {"error": type(e).__name__}


def all_cases() -> Iterator[tuple[str, Any, Any, Any]]:
    for name, path, s in light_cases():
        yield name, path, s, None
    yield from node_cases()


def comparable(name: str, digests: dict[str, str]) -> dict[str, str]:
    """The digests that must repeat: an unseeded random op's outputs do not."""
    if name.split("/")[1] in UNSEEDED:
        return {k: v for k, v in digests.items() if k not in ("outputs", "replay_same")}
    return digests


def record() -> None:
    DATA.parent.mkdir(exist_ok=True)
    out = {name: comparable(name, digest_case(model, s, feeds)) for name, model, s, feeds in all_cases()}
    DATA.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")
    record_oracles()
    print(f"{len(out)} cases recorded in {DATA}")


def ml_dtypes_version() -> str:
    import ml_dtypes

    return ".".join(ml_dtypes.__version__.split(".")[:2])


def record_oracles() -> None:
    data = {"ml_dtypes": ml_dtypes_version(), "inputs": oracle_digests()}
    ORACLES.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        record()
    elif sys.argv[1:] == ["--record-oracles"]:   # only the node tests' data, as generated now
        record_oracles()
