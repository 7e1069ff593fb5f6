"""Golden recordings of what a compile and a run produce, for every light model and node-test
model, and the outputs held to an outside oracle.

Exact, on any machine and BLAS build, and recorded here (``data/golden_plans.json``): the task
graph, the schedule, the memory plan, the stats and the trace (simulated numbers never depend on
the host's arithmetic), each output's name, dtype and shape, and, within one process, that a
replayed run's outputs are bit-identical to the first run's. These are graphexec's own behaviour,
so graphexec's own recording is their reference.

Within a tolerance (``golden_compare``), and not recorded: the output values, compared with an
outside oracle (``golden_oracle``: onnx's expected outputs for a node test, onnxruntime's for a
light model), since a recording of graphexec's own outputs would only say that they did not move.
The two Bernoulli-with-a-seed tests, which no oracle draws as graphexec does, are the exception:
their draws are recorded in ``data/golden_self.json``.

Record: ``python tests/golden.py --record`` (every case, 10+ minutes) re-records the digests, the
node tests' generated inputs (``data/golden_inputs.json``) and the seeded Bernoulli draws; run it,
on top of the latest main, when a change legitimately moves a plan, schedule, stat or trace.
``--record-named node/test_if_opt ...`` re-records the named models' cases only.
``tests/e2e/test_golden.py`` recomputes and compares. The contract additions made since the first
recording (``alias_of`` entries for non-root tensors, ``record_id`` args and ``sync`` flow events in
the trace; HTA's ``stream``, ``device`` and ``correlation`` args, which repeat a slice's tid, pid and
flow id) are left out of the digests.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import golden_compare
import golden_oracle
import light_logits
import numpy as np
import onnx

import graphexec as gx

DATA = Path(__file__).parent / "data" / "golden_plans.json"
# each node test's generated inputs when DATA was recorded: onnx makes them at collection, some with
# ml_dtypes (0.7 casts out-of-range int2/int4 values otherwise than 0.6, which wraps), and a digest
# recorded with other inputs than today's may not repeat (a shape computed from data)
INPUTS = DATA.with_name("golden_inputs.json")
LIGHT = golden_oracle.LIGHT
LOGITS = golden_oracle.LOGITS
LIGHT_STREAMS = (1, 4, "auto")
NODE_STREAMS = (1, 2)
UNSEEDED = golden_oracle.UNSEEDED


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


UNDIGESTED = ("record_id", "stream", "device", "correlation")   # ids the trace repeats: tid, pid, the flow id


def _trace_events(trace: dict[str, Any]) -> list[Any]:
    out = []
    for ev in trace["traceEvents"]:
        if ev.get("cat") == "sync":
            continue
        args = ev.get("args")
        if isinstance(args, dict) and any(k in args for k in UNDIGESTED):
            ev = {**ev, "args": {k: v for k, v in args.items() if k not in UNDIGESTED}}
            if not ev["args"] and ev.get("cat") == "launch":   # a launch had no args before HTA's correlation
                del ev["args"]
        out.append(ev)
    return out


Arrays = dict[str, tuple[str, np.ndarray]]   # output -> (dtype name, values), golden_compare.flatten


def run_digests(result: Any) -> tuple[dict[str, str], Arrays]:
    """Digests of one run (the outputs' names, dtypes and shapes, the stats less the host's
    compile time, the trace) and the output arrays to compare with a tolerance."""
    # units: cube/vector utilization again under the profile's unit names (digested by role)
    stats = {k: v for k, v in result.stats.to_dict().items() if k not in ("compile_s", "units")}
    meta, arrays = golden_compare.flatten(result.outputs)
    digests = {"outputs": _digest(meta), "stats": _digest(stats), "trace": _digest(_trace_events(result.trace))}
    return digests, arrays


def _same_bits(a: Arrays, b: Arrays) -> bool:
    return a.keys() == b.keys() and all(_digest(a[k][1]) == _digest(b[k][1]) for k in a)


def light_cases() -> Iterator[tuple[str, Any, Any]]:
    """(case name, model path, streams) for every light model at each stream setting."""
    for path in sorted(LIGHT.glob("*.onnx")):
        for s in LIGHT_STREAMS:
            yield f"light/{path.stem}/streams={s}", path, s


def light_feeds(session: Any) -> dict[str, np.ndarray]:
    return golden_oracle.light_feeds(session.graph)


def _arrays(values: list[Any]) -> list[Any]:
    return [onnx.numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x for x in values]


def node_cases() -> Iterator[tuple[str, Any, Any, Any]]:
    """(case name, model, streams, feeds) for each node test's first data set that runs."""
    for case in golden_oracle.node_tests():
        inputs = _arrays(case.data_sets[0][0])
        for s in NODE_STREAMS:
            yield f"node/{case.name}/streams={s}", case.model, s, inputs


def input_digests() -> dict[str, str]:
    """Per node test, a digest of the inputs of its first data set as onnx generates them."""
    return {case.name: _digest([_digest(np.asarray(v)) if isinstance(v, np.ndarray) else repr(v)
                                for v in _arrays(case.data_sets[0][0])])
            for case in golden_oracle.node_tests()}


def ml_dtypes_dependent(test: str) -> bool:
    """The node tests whose data hang on how ml_dtypes casts out-of-range values to 2- and 4-bit
    integers, which the ONNX spec leaves undefined (0.6 wraps; 0.7 gives 0 or the nearest bound
    otherwise): onnx generates their inputs with ml_dtypes, so under another ml_dtypes than the
    recording's their inputs differ. Their digests do not hang on the values (a cast's plan is its
    shapes), so they are compared whatever ml_dtypes made the inputs; their outputs, like every
    node test's, are compared with the expected outputs onnx generates beside today's inputs."""
    return test.startswith(("test_cast_", "test_castlike_")) and any(
        t in test for t in ("INT2", "INT4", "UINT2", "UINT4"))


def digest_case(model: Any, streams: Any, feeds: Any | None) -> tuple[dict[str, str], Arrays]:
    """Every digest of one compile and two runs (the simulated one and the replayed one), and
    the first run's output arrays; a case that raises gives {"error": its type} and no arrays."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            session = gx.Session(model, streams=streams)
            if feeds is None:
                feeds = light_feeds(session)
            elif isinstance(feeds, list):
                feeds = dict(zip(session.graph.inputs, feeds))
            first, arrays = run_digests(session.run(feeds))
            again, arrays_again = run_digests(session.run(feeds))
            out = {**plan_digests(session.compiled), **first}
            out["replay_same"] = str(again == first and _same_bits(arrays, arrays_again))
            return out, arrays
    except Exception as e:  # noqa: BLE001  (a case that fails must keep failing the same way)
        return {"error": type(e).__name__}, {}


QUICK_LIGHT = ("light/light_squeezenet/streams=4", "light/light_shufflenet/streams=auto")
QUICK_SHARE = 12   # one node case in this many runs in the quick tier


def in_sample(case: str) -> bool:
    """Whether the quick tier runs this case: two light models, and a fixed share of the node
    cases chosen by a hash of their names (the same on every machine and in every order)."""
    if case.startswith("light/"):
        return case in QUICK_LIGHT
    return int(hashlib.sha256(case.encode()).hexdigest()[:8], 16) % QUICK_SHARE == 0


def all_cases() -> Iterator[tuple[str, Any, Any, Any]]:
    for name, path, s in light_cases():
        yield name, path, s, None
    yield from node_cases()


def comparable(name: str, digests: dict[str, str]) -> dict[str, str]:
    """The digests that must repeat: an unseeded random op's replay differs from its first run."""
    if golden_oracle.test_of(name) in UNSEEDED:
        return {k: v for k, v in digests.items() if k != "replay_same"}
    return digests


def model_key(case: str) -> str:
    """The model of a case, whatever its stream setting: ``node/test_abs`` (a schedule never
    changes what is computed, so a model's outputs are one recording)."""
    return case.rsplit("/", 1)[0]


def _keep_own(name: str, outs: Arrays, own: dict[str, dict[str, np.ndarray]]) -> None:
    """Keep the outputs of a case no oracle gives (golden_oracle.NO_ORACLE) in ``own``."""
    if golden_oracle.which(name) != golden_oracle.RECORDED:
        return
    values = {k: v for k, (_, v) in outs.items()}
    before = own.setdefault(model_key(name), values)
    if before.keys() != values.keys() or any(_digest(before[k]) != _digest(values[k]) for k in values):
        raise AssertionError(f"{name}: outputs differ from another stream setting's")


def _write_digests(digests: dict[str, Any]) -> None:
    DATA.write_text(json.dumps(digests, indent=0, sort_keys=True) + "\n")


def record() -> None:
    """Record every case: its digests, the node tests' inputs and the outputs no oracle gives."""
    DATA.parent.mkdir(exist_ok=True)
    digests: dict[str, Any] = {}
    own: dict[str, dict[str, np.ndarray]] = {}
    for name, model, s, feeds in all_cases():
        d, outs = digest_case(model, s, feeds)
        digests[name] = comparable(name, d)
        _keep_own(name, outs, own)
    _write_digests(digests)
    record_inputs()
    golden_oracle.record_self(own)
    print(f"{len(digests)} cases recorded in {DATA}, the inputs in {INPUTS}, "
          f"{len(own)} models' outputs without an oracle in {golden_oracle.SELF}")


def record_named(tests: list[str]) -> None:
    """Re-record the cases of the named models (``node/test_if_opt``, ``light/light_resnet50``)
    at every stream setting, keeping every other case's digests as they are."""
    digests = json.loads(DATA.read_text())
    own = {k: v for k, v in golden_oracle.recorded().items() if k not in tests}
    for name, model, s, feeds in all_cases():
        if model_key(name) in tests:
            d, outs = digest_case(model, s, feeds)
            digests[name] = comparable(name, d)
            _keep_own(name, outs, own)
    _write_digests(digests)
    golden_oracle.record_self(own)
    print(f"re-recorded {', '.join(tests)} in {DATA}")


def ml_dtypes_version() -> str:
    import ml_dtypes

    return ".".join(ml_dtypes.__version__.split(".")[:2])


@functools.cache
def recording() -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(digests, the inputs file, today's input digests), read once."""
    return json.loads(DATA.read_text()), json.loads(INPUTS.read_text()), input_digests()


def check(name: str, model: Any, streams: Any, feeds: Any) -> list[str]:
    """What differs between one case now and its recording (the digests, exactly) or its oracle
    (the outputs, within golden_compare's tolerances); an empty list when nothing does."""
    digests_then, inputs_then, inputs_now = recording()
    test = golden_oracle.test_of(name)
    if name.startswith("node/") and not ml_dtypes_dependent(test) and inputs_now[test] != inputs_then["inputs"][test]:
        return [f"{test}: onnx now generates other inputs for it than when it was recorded; "
                "the recording cannot be compared (re-record it deliberately)"]
    digests, arrays = digest_case(model, streams, feeds)
    then = digests_then[name]
    problems = [f"{k}: {v} != recorded {then.get(k)}" for k, v in comparable(name, digests).items() if then.get(k) != v]
    problems += [f"{k}: missing" for k in then if k not in digests]
    if problems or "error" in digests or golden_oracle.which(name) == golden_oracle.NO_VALUES:
        return problems
    reference = golden_oracle.expected(name, model)
    cut = light_logits.logits_model(model) if name.startswith("light/") else None
    if cut is not None:   # a softmax over logits float32 may not determine: judge the logits
        problems = _logits_problems(cut, arrays, reference)
        if not light_logits.determined(reference[LOGITS]):
            return problems
    family = golden_compare.family_of(model)
    return problems + [f"{k}: {why}" for k, why in golden_compare.mismatches(arrays, reference, family).items()]


def _logits_problems(cut: onnx.ModelProto, arrays: Arrays, reference: dict[str, np.ndarray]) -> list[str]:
    got = light_logits.logits(cut, light_feeds(gx.Session(cut)))
    why = golden_compare.close(got, reference[LOGITS], str(got.dtype), golden_compare.ACCUMULATE)
    problems = [f"logits: {why}"] if why else []
    bad = [light_logits.distribution_problem(v) for _, v in arrays.values()]
    return problems + [b for b in bad if b]


def check_named(names: list[str]) -> dict[str, list[str]]:
    """check() for the named cases, in order."""
    wanted = set(names)
    return {name: check(name, model, s, feeds) for name, model, s, feeds in all_cases() if name in wanted}


def record_inputs() -> None:
    data = {"ml_dtypes": ml_dtypes_version(), "inputs": input_digests()}
    INPUTS.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")


def oracle_counts() -> dict[str, int]:
    """How many recorded cases compare their outputs with which oracle (golden_oracle.which);
    a case recorded as raising has no outputs to compare."""
    return dict(Counter("raises: no outputs" if "error" in d else golden_oracle.which(name)
                        for name, d in recording()[0].items()))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--record"]:
        record()
    elif args == ["--record-inputs"]:   # only the node tests' inputs, as generated now
        record_inputs()
    elif args[:1] == ["--record-named"]:   # only these models' cases, e.g. node/test_if_opt
        record_named(args[1:])
    elif args[:1] == ["--check"]:   # one JSON line: {case: [problems]} for the named cases
        print(json.dumps(check_named(args[1:]), sort_keys=True))
    elif args == ["--oracles"]:   # how many cases compare with which oracle
        print(json.dumps(oracle_counts(), indent=1, sort_keys=True))
    else:
        sys.exit(f"usage: python tests/golden.py --record | --record-inputs | --record-named MODEL... | "
                 f"--check CASE... | --oracles\n{__doc__}")
