"""Issue 39's corpus (round_three.py): each case gives its exact line and exit code; and
class 1 checked on the media themselves: the bytes a terminal gets, the cells a
spreadsheet gets."""

from __future__ import annotations

import csv
import json
import os
import pty
import re
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from graphexec._render import UNSAFE
from hardening import bad_inputs as B
from hardening.round_three import EAGER, HOSTILE, LOOP_ENV, LOOPS, ROUND_THREE, SWEEP, SWEEP_RAY, hostile_model
from hardening.test_corpus import ROOT, expected, run_cli

FORMULA = re.compile(r"[=+\-@\t\r]")
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


@pytest.mark.parametrize("case", ROUND_THREE, ids=[c.name for c in ROUND_THREE])
def test_issue_39_case_gives_its_line_and_exit_code(case, tmp_path, capsys):
    args = case.make(tmp_path)
    rc, out, err = run_cli(args, capsys)
    assert (rc, err) == (case.rc, expected(args, case.message, tmp_path))
    assert out == ""


def test_every_issue_39_class_has_its_cases():
    counts = {cls: sum(c.cls == cls for c in ROUND_THREE) for cls in dict.fromkeys(c.cls for c in ROUND_THREE)}
    assert all(n >= 5 for n in counts.values()), counts
    assert len({c.name for c in ROUND_THREE}) == len(ROUND_THREE)


def formula_cells(folder: Path) -> list[tuple[str, str]]:
    """Every cell of every CSV under ``folder`` that a spreadsheet would run as a formula."""
    bad = []
    for path in folder.rglob("*.csv"):
        with open(path, newline="", encoding="utf-8") as f:
            bad += [(path.name, c) for row in csv.reader(f) for c in row
                    if FORMULA.match(c) and not NUMBER.fullmatch(c)]
    return bad


def test_names_reach_the_terminal_escaped_and_csv_cells_are_no_formulas(tmp_path, capsys, monkeypatch):
    """run (summary, diagnosis), plan and the PROF folder of a model whose every name is hostile."""
    model = hostile_model(tmp_path)
    monkeypatch.setenv("ASCEND_PROFILING_OUTPUT_PATH", str(tmp_path / "prof"))
    assert run_cli(["run", model, "--profile", tmp_path / "p"], capsys)[0] == 0
    for args in (["run", model], ["plan", model]):
        rc, out, err = run_cli(args, capsys)
        assert rc == 0 and not UNSAFE.search(out.replace("\n", "")) and not UNSAFE.search(err.replace("\n", ""))
        assert "\\x1b[2J" in out and "fake" in out and not any(line.startswith("fake") for line in out.splitlines())
    assert formula_cells(tmp_path / "p") == []
    rows = list(csv.DictReader(open(tmp_path / "p" / "op_summary.csv", newline="", encoding="utf-8")))
    assert rows[0]["Op Name"].startswith("'=cmd")   # OWASP: a leading quote, the rest kept


def test_measured_times_read_back_the_names_csv_cell_quoted(tmp_path, capsys):
    """An op_summary written with quoted cells times the same model again: the names match."""
    model = hostile_model(tmp_path)
    assert run_cli(["run", model, "--profile", tmp_path / "p"], capsys)[0] == 0
    rc, out, _ = run_cli(["run", model, "--measured", tmp_path / "p" / "op_summary.csv"], capsys)
    assert rc == 0 and "measured: 1 of 1 kernels" in out


def test_sweep_table_and_csv(tmp_path, capsys):
    model = hostile_model(tmp_path)
    out_csv = tmp_path / "sweep.csv"
    rc, out, err = run_cli(["sweep", model, "--output", out_csv, "--workers", "1", "--no-diagnosis"], capsys)
    assert rc == 0, err
    assert not UNSAFE.search(out.replace("\n", "")) and "\\u202e" in out
    assert formula_cells(tmp_path) == []
    again = run_cli(["sweep", model, "--output", out_csv, "--workers", "1", "--no-diagnosis"], capsys)
    assert again[0] == 0 and len(list(csv.reader(open(out_csv)))) == 2   # read back: the point is found, not rerun


def _on_a_pty(args: list, cwd: Path) -> tuple[int, bytes]:
    """(exit code, every byte the process wrote to its terminal)."""
    parent, child = pty.openpty()
    p = subprocess.Popen([sys.executable, str(ROOT / "cli.py"), *map(str, args)], stdin=child, stdout=child,
                         stderr=child, cwd=cwd, env={**os.environ, "COLUMNS": "200"})
    os.close(child)
    data = b""
    while True:
        try:
            chunk = os.read(parent, 65536)
        except OSError:   # EIO: the child closed its end
            break
        if not chunk:
            break
        data += chunk
    os.close(parent)
    return p.wait(timeout=120), data


@pytest.mark.slow
def test_terminal_bytes_on_a_pty_hold_no_control_or_bidi_character_from_a_name(tmp_path):
    """What a terminal gets from run (summary, diagnosis), plan, an error line and a sweep table.
    The program's own styling (rich's SGR colours, the line discipline's CR LF) is allowed; the
    name's screen clear, OSC title, BEL, bare CR and bidi characters are not."""
    model = hostile_model(tmp_path)
    bad_feed = ["run", model, "--input", f"q{HOSTILE}=x.npy"]
    for args, rc in (["run", model], 0), (["plan", model], 0), (bad_feed, 2), (["sweep", model, "--workers", "1"], 0):
        code, data = _on_a_pty(args, tmp_path)
        text = data.decode("utf-8")
        assert code == rc, text
        assert "\x1b[2J" not in text and "\x1b]" not in text and "\x07" not in text
        assert not re.search("\r(?![\n\x1b])", text), args   # no CR but a line end's and the bar's own (CR ESC[2K)
        assert not re.search("[\u202a-\u202e\u2066-\u2069]", text)
        assert "\\u202e" in text


def test_view_draws_dollar_names_as_text(tmp_path, capsys):
    """A ``$...$`` stream id, process name and file name reach matplotlib as text, not mathtext."""
    from hardening.round_three import TIMELINE

    doc = json.loads(json.dumps(TIMELINE))
    doc["traceEvents"][1]["tid"] = "$\\frac{a}{$"
    doc["traceEvents"][0]["args"]["name"] = "device $x^$"
    (tmp_path / "$p$").mkdir()
    (tmp_path / "$p$" / "timeline.json").write_text(json.dumps(doc))
    rc, out, err = run_cli(["view", tmp_path / "$p$"], capsys)
    assert (rc, err) == (0, "")
    assert "frac{a}" in (tmp_path / "$p$" / "report.html").read_text()


@pytest.mark.slow
def test_view_cost_grows_gently_with_streams(tmp_path, capsys):
    """20,000 streams (one kernel each) give a report in CPU time near 2,000's: the Gantt
    chart draws the busiest 48 lanes and says so (it drew 20,000: no report in a minute)."""
    times = {}
    for n in (2000, 20000):
        events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "device 0"}}]
        events += [{"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": float(i % 100), "dur": 1.0 + i % 7, "pid": 1,
                    "tid": i, "args": {"op": "Relu", "unit": "vector"}} for i in range(n)]
        path = tmp_path / f"t{n}.json"
        path.write_text(json.dumps({"traceEvents": events, "otherData": {"device_pid": 1}}))
        t0 = time.process_time()
        assert run_cli(["view", path, "-o", tmp_path / f"r{n}.html"], capsys)[0] == 0
        times[n] = time.process_time() - t0
    assert "the 48 busiest of 20000 streams" in (tmp_path / "r20000.html").read_text()
    assert times[20000] < 3 * times[2000] + 2, times


def test_every_profile_number_has_a_plausible_range():
    """A row of runtime/ranges.py for every numeric field of every built-in device and system."""
    from graphexec.runtime import ranges
    from graphexec.runtime.profiles import builtin_profiles
    from graphexec.runtime.systems import builtin_systems, load_system

    for p in builtin_profiles().values():
        assert [f for f, _ in ranges.numbers(p.model_dump()) if ranges.row(ranges.DEVICE, f) is None] == []
    for name in builtin_systems():
        data = load_system(name).model_dump(mode="json", exclude={"device"})
        assert [f for f, _ in ranges.numbers(data) if ranges.row(ranges.SYSTEM, f) is None] == []


def _strict(text: str) -> object:
    def refuse(token: str) -> None:
        raise AssertionError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def test_json_is_standard_json_always(tmp_path, capsys):
    from graphexec._render import json_text

    assert json_text({"a": float("inf"), "b": [float("nan"), 1.5], "c": "\u202e"}) == \
        '{"a": null, "b": [null, 1.5], "c": "\\u202e"}'
    model = B.write(tmp_path, "m.onnx", B.relu_model())
    for args in (["run", model, "--json"], ["devices", "--json"], ["compare", model, "--streams", "1,2", "--json"]):
        rc, out, err = run_cli(args, capsys)
        assert rc == 0, err
        _strict(out)


def test_eager_fuzz_no_input_ends_the_interpreter_with_a_signal(request):
    """Random dtypes, shapes and argument types through the eager API's entry points, in a
    process of its own: it must exit 0 (a signal, SIGSEGV on an object dtype's read-back
    among them, would end it), and every error it met must be the documented family."""
    n = 2000 if request.config.getoption("--long") else 200
    p = subprocess.run([sys.executable, str(Path(__file__).with_name("eager_fuzz.py")), "0", str(n)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    seen = dict(line.split() for line in p.stdout.splitlines())
    assert set(seen) <= {"AclError", "GraphExecError", "DeviceError", "OutOfMemoryError", "KernelError",
                         "GraphError"}, seen


@pytest.mark.parametrize("case", EAGER, ids=[c.name for c in EAGER])
def test_issue_39_case_api_raises_its_line(case):
    with pytest.raises(case.error) as err:
        case.call()
    assert str(err.value) == case.message


def test_out_of_memory_leaves_no_del_traceback():
    """A storage whose malloc raised is collected quietly (its __del__ printed a traceback)."""
    import gc

    import graphexec.npu as npu
    from graphexec.errors import OutOfMemoryError

    unraisable = []
    before, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with pytest.raises(OutOfMemoryError):
            npu.empty(2**40, device="npu")
        gc.collect()
    finally:
        sys.unraisablehook = before
    assert unraisable == []


@pytest.mark.parametrize("case", LOOPS, ids=[c.name for c in LOOPS])
def test_issue_39_case_loops(case, tmp_path, capsys, monkeypatch):
    """Loops priced and stopped with one line; environment settings validated as options."""
    for var, value in LOOP_ENV.get(case.name, {}).items():
        monkeypatch.setenv(var, value)
    args = case.make(tmp_path)
    t0 = time.process_time()
    rc, out, err = run_cli(args, capsys)
    assert (rc, err) == (case.rc, expected(args, case.message, tmp_path))
    assert time.process_time() - t0 < 60   # refused, not run for minutes


def _fake_ray(error: BaseException | None) -> object:
    """A ray module whose init raises ``error`` (None: ray is not installed)."""
    if error is None:
        return None   # sys.modules["ray"] = None: importing it raises ImportError

    def init(**kwargs):
        raise error
    return types.SimpleNamespace(is_initialized=lambda: False, init=init)


@pytest.mark.parametrize("case", SWEEP, ids=[c.name for c in SWEEP])
def test_issue_39_case_sweep(case, tmp_path, capsys, monkeypatch):
    """The sweep front end: a grid past its size, or a backend that cannot start, is one
    line before any point runs, and --output is not created."""
    if case.name in SWEEP_RAY:
        monkeypatch.setitem(sys.modules, "ray", _fake_ray(SWEEP_RAY[case.name]))
    args = case.make(tmp_path)
    t0 = time.process_time()
    rc, out, err = run_cli(args, capsys)
    assert rc == case.rc and err.startswith(expected(args, case.message, tmp_path).rstrip("\n")), err
    assert len(err.splitlines()) == 1 and out == ""
    assert not (tmp_path / "rows.csv").exists()
    assert time.process_time() - t0 < 10
