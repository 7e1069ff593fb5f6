"""Measured durations drive the simulation: an op_summary graphexec wrote, read back,
reproduces the run's timeline; one op made twice as slow moves the makespan by what the
schedule implies; Kineto traces join ATen ops; malformed files are one line."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

import graphexec as gx
from graphexec.errors import CalibrationError
from graphexec.frontend.measured import load_measured, read_kernel_trace, read_op_summary
from graphexec.passes.measured import coverage

ROOT = Path(__file__).resolve().parents[3]
BLOCK = ROOT / "models" / "inception_block.onnx"
SHAPES = {"data": (4, 192, 28, 28)}


def _rows(folder: Path) -> list[dict[str, str]]:
    with (folder / "op_summary.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """A one-stream timing-only run of the inception block and its op_summary."""
    folder = tmp_path_factory.mktemp("prof")
    result = gx.Session(gx.load(BLOCK), streams=1, device="ascend910").simulate(shapes=SHAPES)
    result.write_profile(folder)
    return result, folder


def test_an_op_summary_graphexec_wrote_reproduces_its_timeline(profiled, tmp_path):
    result, folder = profiled
    measured = load_measured(folder)
    session = gx.Session(gx.load(BLOCK), streams=1, device="ascend910", measured=measured)
    again = session.simulate(shapes=SHAPES)
    kernels = len(_rows(folder))
    assert coverage(session.compiled.plan.graph, session.compiled.plan.tasks, measured) == (kernels, kernels)
    # op_summary keeps three decimals (ns), so each task may move by half a nanosecond
    assert again.stats.makespan_us == pytest.approx(result.stats.makespan_us, abs=5e-4 * kernels)
    again.write_profile(tmp_path)
    for a, b in zip(_rows(folder), _rows(tmp_path)):
        assert a["Op Name"] == b["Op Name"]
        assert float(a["Task Duration(us)"]) == pytest.approx(float(b["Task Duration(us)"]), abs=1e-3)
        assert float(a["Task Start Time(us)"]) == pytest.approx(float(b["Task Start Time(us)"]), abs=5e-4 * kernels)


def test_one_op_twice_as_slow_on_one_stream_moves_the_makespan_by_its_time(profiled):
    _, folder = profiled
    measured = read_op_summary(folder / "op_summary.csv")
    base = gx.Session(gx.load(BLOCK), streams=1, device="ascend910", measured=measured).simulate(shapes=SHAPES)
    for op in measured.ops[:3]:   # one stream runs every op in turn: the makespan grows by the op's own time
        slow = gx.Session(gx.load(BLOCK), streams=1, device="ascend910",
                          measured=measured.scaled(op.name, 2.0)).simulate(shapes=SHAPES)
        assert slow.stats.makespan_us - base.stats.makespan_us == pytest.approx(op.us, abs=1e-9)


def test_on_two_branches_a_slower_op_off_the_critical_path_moves_nothing_until_it_is_on_it(tmp_path):
    # two independent chains relu -> relu and sigmoid on two streams, one block each (no core is
    # contended): the sigmoid's slowdown hides behind the relu chain up to its slack
    b = gx.GraphBuilder("two")
    x = b.input("x", "float32", [64, 64])
    a = b.Relu(b.Relu(x))
    b.output(b.Add(a, b.Sigmoid(x)))
    graph = b.build()
    folder = tmp_path / "p"
    gx.Session(graph, streams=1, device="ascend910", fusion=False).simulate().write_profile(folder)
    m = load_measured(folder)
    names = {o.op: o.name for o in m.ops}
    us = {o.name: o.us for o in m.ops}

    def makespan(measured):
        return gx.Session(graph, streams=2, policy="chains", device="ascend910", fusion=False,
                          measured=measured).simulate().stats.makespan_us

    base = makespan(m)
    sig = names["Sigmoid"]
    chain = sum(us[o.name] for o in m.ops if o.op == "Relu")
    # the Sigmoid (its own stream, beside the two Relus) can grow up to the chain's length for free
    slack = chain - us[sig]
    assert slack > 0
    assert makespan(m.scaled(sig, 1 + 0.5 * slack / us[sig])) == pytest.approx(base, abs=1e-9)
    grown = makespan(m.scaled(sig, 1 + 2 * slack / us[sig]))   # past the slack: the excess shows
    assert grown - base == pytest.approx(slack, abs=1e-9)


def test_what_ifs_run_on_the_measured_durations(profiled):
    _, folder = profiled
    one = gx.Session(gx.load(BLOCK), streams=1, device="ascend910", measured=str(folder)).simulate(shapes=SHAPES)
    four = gx.Session(gx.load(BLOCK), streams=4, device="ascend910", measured=str(folder)).simulate(shapes=SHAPES)
    assert four.stats.makespan_us < one.stats.makespan_us


def test_graphexecs_own_trace_reimported_reproduces_the_makespan(profiled, tmp_path):
    result, _ = profiled
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(result.trace))
    m = read_kernel_trace(path)
    again = gx.Session(gx.load(BLOCK), streams=1, device="ascend910", measured=m).simulate(shapes=SHAPES)
    assert again.stats.makespan_us == pytest.approx(result.stats.makespan_us, rel=1e-9)


def test_a_kineto_trace_joins_kernels_to_their_aten_op():
    doc = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::cudnn_convolution", "ts": 0, "dur": 30,
         "args": {"External id": 7, "Input Dims": [[4, 192, 28, 28], [64, 192, 1, 1], [64], [], []]}},
        {"ph": "X", "cat": "kernel", "name": "implicit_convolve_sgemm", "ts": 40, "dur": 11.5,
         "args": {"External id": 7, "correlation": 99}},
        {"ph": "X", "cat": "kernel", "name": "add_tensor_kernel", "ts": 52, "dur": 1.5, "args": {"External id": 7}},
        {"ph": "X", "cat": "kernel", "name": "unknown", "ts": 60, "dur": 2.0, "args": {"External id": 8}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 5, "dur": 3, "args": {}}]}
    path = Path(__file__).parent / "_kineto.json"
    try:
        path.write_text(json.dumps(doc))
        (op,) = read_kernel_trace(path).ops
    finally:
        path.unlink()
    assert (op.op, op.shapes, op.us) == ("Conv", "4,192,28,28;64,192,1,1;64", 13.0)


@pytest.mark.parametrize("text, message", [
    ("Op Name,OP Type,Task Duration(us)\nconv,Conv,1.5\nrelu,Relu,fast\n",
     "row 3: field 'Task Duration(us)': 'fast' is not a number"),
    ("Op Name,OP Type,Task Duration(us)\n,Conv,1.5\n", "row 2: field 'Op Name' is empty"),
    ("Op Name,OP Type,Task Duration(us)\nconv,Conv,-1\n", "row 2: field 'Task Duration(us)': '-1' is negative"),
    ("Op Name,Type,Duration\nconv,Conv,1\n", "no column 'OP Type', 'Task Duration(us)'"),
])
def test_a_malformed_op_summary_is_one_line_naming_the_row(tmp_path, text, message):
    path = tmp_path / "op_summary_1.csv"
    path.write_text(text)
    with pytest.raises(CalibrationError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        load_measured(path)
    assert "\n" not in str(e.value) and str(path) in str(e.value)


@pytest.mark.parametrize("doc, message", [
    ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "dur": "long", "args": {"node": "a"}}]}',
     "event 0 \\(k\\): field 'dur'"),
    ('{"traceEvents": [', "not a JSON trace"),
    ('{"events": []}', "no 'traceEvents' list"),
    ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "dur": 1, "args": {}}]}', "no kernel events"),
])
def test_a_malformed_trace_is_one_line(tmp_path, doc, message):
    path = tmp_path / "t.json"
    path.write_text(doc)
    with pytest.raises(CalibrationError, match=message):
        load_measured(path)


def test_the_cli_runs_on_measured_durations_and_refuses_a_bad_file(profiled, tmp_path):
    _, folder = profiled
    cli = [sys.executable, str(ROOT / "cli.py"), "run", str(BLOCK), "--shape", "data=4,192,28,28", "--timing-only"]
    done = subprocess.run([*cli, "--measured", str(folder)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "measured: 8 of 8 kernels timed from" in done.stdout
    bad = tmp_path / "op_summary.csv"
    bad.write_text("Op Name,OP Type,Task Duration(us)\nconv,Conv,x\n")
    done = subprocess.run([*cli, "--measured", str(bad)], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "row 2" in done.stderr


def test_a_measurement_at_other_shapes_times_nothing(profiled):
    _, folder = profiled   # measured at batch 4
    measured = load_measured(folder)
    session = gx.Session(gx.load(BLOCK), streams=1, device="ascend910", measured=measured)
    other = session.simulate(shapes={"data": (8, 192, 28, 28)})
    plan = session.compiled.plan
    assert coverage(plan.graph, plan.tasks, measured)[0] == 0
    assert other.stats.makespan_us == gx.Session(gx.load(BLOCK), streams=1, device="ascend910").simulate(
        shapes={"data": (8, 192, 28, 28)}).stats.makespan_us


def test_an_msprof_summary_in_canns_types_and_5hd_shapes_joins_by_name_and_batch(profiled, tmp_path):
    result, folder = profiled
    rows = _rows(folder)
    path = tmp_path / "op_summary_20260101.csv"   # as a real run writes it: CANN's op types, NC1HWC0 shapes
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Device_id", "Op Name", "OP Type", "Task Type", "Task Duration(us)", "Input Shapes"])
        for r in rows:
            cann = {"Conv": "Conv2D", "MaxPool": "MaxPoolV3", "Concat": "ConcatD"}[r["OP Type"]]
            w.writerow([0, r["Op Name"], cann, "AI_CORE", r["Task Duration(us)"], "4,12,28,28,16;1,1,16,16"])
        w.writerow([0, "trans_TransData_0", "TransData", "AI_CORE", "9.0", "4,192,28,28"])   # ATC's own op
    m = load_measured(path)
    session = gx.Session(gx.load(BLOCK), streams=1, device="ascend910", measured=m)
    again = session.simulate(shapes=SHAPES)
    assert coverage(session.compiled.plan.graph, session.compiled.plan.tasks, m) == (len(rows), len(rows))
    assert again.stats.makespan_us == pytest.approx(result.stats.makespan_us, abs=5e-4 * len(rows))
