"""graphexec calibrate: recovering a known profile from its own simulated times, the
identifiability rule, the held-out split, the fitted YAML and its sources."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from graphexec.calibrate import Measurement, Target, calibrate, held_out, profile_yaml, read_models_csv
from graphexec.calibrate.predict import simulated_us
from graphexec.errors import CalibrationError
from graphexec.runtime.profiles import load_profile

ROOT = Path(__file__).resolve().parents[3]
BLOCK = str(ROOT / "models" / "inception_block.onnx")
BATCHES = (1, 2, 4, 8, 16, 32, 64, 3)


def _rows(profile, batches=BATCHES, device="ascend910"):
    """Whole-model rows whose 'measured' times are what ``profile`` simulates."""
    rows = []
    for i, b in enumerate(batches):
        m = Measurement("model", f"block bs{b}", 1.0, f"synthetic row {i + 2}", device=device, model=BLOCK,
                        shapes=(("data", (b, 192, 28, 28)),))
        rows.append(Measurement(**{**m.__dict__, "measured_us": simulated_us(m, profile)}))
    return rows


def _truth(**values):
    return Target(load_profile("ascend910")).build(values)


def test_a_fit_recovers_the_profile_that_made_the_measurements():
    truth = _truth(**{"kernels.cube.efficiency.default": 0.55, "task_overhead_us": 3.5})
    cal = calibrate(Target(load_profile("ascend910")), _rows(truth),
                    {"kernels.cube.efficiency.default": None, "task_overhead_us": None})
    assert cal.fitted["kernels.cube.efficiency.default"] == pytest.approx(0.55, rel=0.01)
    assert cal.fitted["task_overhead_us"] == pytest.approx(3.5, rel=0.01)
    s = cal.summary()["model"]
    assert s["train"]["error_before"] > 1.05 and s["train"]["error_after"] < 1.001
    assert s["held_out"]["rows"] == 1 and s["held_out"]["error_after"] < 1.001   # row 5 of 8 is held out
    assert all(0 <= v < 1e-3 for v in cal.spread.values())   # exact rows leave no spread


def test_noisy_rows_give_each_parameter_its_spread():
    truth = _truth(**{"kernels.cube.efficiency.default": 0.55})
    rows = _rows(truth)
    noisy = [Measurement(**{**m.__dict__, "measured_us": m.measured_us * (1.05 if i % 2 else 0.95)})
             for i, m in enumerate(rows)]
    cal = calibrate(Target(load_profile("ascend910")), noisy, {"kernels.cube.efficiency.default": None})
    assert 0.005 < cal.spread["kernels.cube.efficiency.default"] < 0.2
    assert "+-" in cal.profile.sources["kernels.cube.efficiency.default"]


def test_the_held_out_rows_are_every_fifth_of_each_kind_in_table_order():
    ms = [Measurement(k, "", 1.0, "") for k in ["model"] * 6 + ["collective"] * 5 + ["model"] * 4]
    flags = held_out(ms)
    assert [i for i, f in enumerate(flags) if f] == [4, 10, 14]
    assert not any(held_out(ms, 0))


def test_too_few_rows_for_the_parameters_is_refused_naming_them():
    rows = _rows(load_profile("ascend910"), batches=(1, 8, 32))
    with pytest.raises(CalibrationError, match="3 training rows cannot pin 2 parameters.*task_overhead_us"):
        calibrate(Target(load_profile("ascend910")), rows,
                  {"kernels.cube.efficiency.default": None, "task_overhead_us": None})


def test_a_parameter_no_row_depends_on_is_refused():
    # graph mode launches nothing from the host per task: launch_cost_us moves no row
    with pytest.raises(CalibrationError, match="no training row depends on launch_cost_us"):
        calibrate(Target(load_profile("ascend910")), _rows(load_profile("ascend910")),
                  {"launch_cost_us": None, "task_overhead_us": None})


def test_parameters_that_move_the_rows_alike_are_refused_as_inseparable():
    # one large-batch convolution block is compute-bound: cube efficiency and the cube peak scale it alike
    rows = _rows(load_profile("ascend910"), batches=(64,) * 7)
    with pytest.raises(CalibrationError, match="cannot tell apart .*efficiency.default.*peak_tflops.cube.float16"):
        calibrate(Target(load_profile("ascend910")), rows,
                  {"kernels.cube.efficiency.default": None, "peak_tflops.cube.float16": None})


def test_the_written_profile_loads_back_and_names_its_rows(tmp_path):
    truth = _truth(**{"kernels.cube.efficiency.default": 0.6})
    cal = calibrate(Target(load_profile("ascend910")), _rows(truth), {"kernels.cube.efficiency.default": None},
                    name="ascend910-fitted")
    path = tmp_path / "fitted.yaml"
    path.write_text(profile_yaml(cal, load_profile("ascend910")))
    back = load_profile(str(path))
    assert back.name == "ascend910-fitted"
    assert back.kernels.cube.efficiency["default"] == pytest.approx(0.6, rel=0.01)
    src = yaml.safe_load(path.read_text())["sources"]["kernels.cube.efficiency.default"]
    assert src.startswith("fitted: synthetic rows 2,3,4,5,7,8,9 (7 rows") and "held out synthetic rows 6" in src
    assert back.task_overhead_us == load_profile("ascend910").task_overhead_us   # the rest untouched


def test_a_per_dtype_entry_not_in_the_profile_starts_from_default():
    t = Target(load_profile("ascend910"))
    p = t.param("kernels.cube.efficiency.float32")
    assert p.start == t.value("kernels.cube.efficiency.default") and p.upper == 1.0
    assert t.build({"kernels.cube.efficiency.float32": 0.5}).kernels.cube.efficiency["float32"] == 0.5


def test_a_path_the_profile_lacks_is_one_line():
    with pytest.raises(CalibrationError, match="no number at 'kernels.cube.nothing'"):
        Target(load_profile("ascend910")).param("kernels.cube.nothing")


def test_rows_of_other_devices_are_ignored_and_none_left_is_an_error():
    rows = _rows(load_profile("ascend910"), device="ascend310p")
    with pytest.raises(CalibrationError, match="no measurement row was taken on 'ascend910'"):
        calibrate(Target(load_profile("ascend910")), rows, {"task_overhead_us": None})


def test_the_models_csv_reads_throughput_and_time_rows(tmp_path):
    csv = tmp_path / "rows.csv"
    csv.write_text("configuration,model,shapes,device,streams,measured,unit,source\n"
                   "a,inception_block.onnx,data=8x192x28x28,ascend910,2,1000,fps,paper\n"
                   f"b,{BLOCK},data=1x192x28x28,Ascend910,auto,0.05,ms,\n")
    a, b = read_models_csv(csv, ROOT / "models")
    assert a.measured_us == pytest.approx(8 / 1000 * 1e6) and a.streams == 2 and a.model == BLOCK
    assert b.measured_us == pytest.approx(50.0) and b.streams == "auto" and b.device == "ascend910"
    assert math.isclose(simulated_us(a, load_profile("ascend910")), simulated_us(a, load_profile("ascend910")))


@pytest.mark.parametrize("line, message", [
    ("a,m.onnx,data=1x3,ascend910,1,fast,fps,", "row 2: field 'measured': 'fast' is not a number"),
    ("a,m.onnx,data=1x3,ascend910,1,-3,us,", "row 2: field 'measured': '-3' must be a positive number"),
    ("a,m.onnx,data:1x3,ascend910,1,3,us,", "row 2: field 'shapes': 'data:1x3' is not NAME=D1xD2"),
    ("a,m.onnx,data=1x3,ascend910,1,3,hours,", "row 2: field 'unit': 'hours' is not one of"),
    ("a,,data=1x3,ascend910,1,3,us,", "row 2: field 'model' is empty"),
    ("a,m.onnx,data=1x3,ascend910,0,3,us,", "row 2: field 'streams': '0' is not an int"),
])
def test_a_malformed_row_is_one_line_naming_row_and_field(tmp_path, line, message):
    csv = tmp_path / "rows.csv"
    csv.write_text("configuration,model,shapes,device,streams,measured,unit,source\n" + line + "\n")
    with pytest.raises(CalibrationError, match=message.replace("(", r"\(")) as e:
        read_models_csv(csv)
    assert "\n" not in str(e.value) and str(csv) in str(e.value)


def test_a_csv_without_the_needed_columns_names_them(tmp_path):
    csv = tmp_path / "rows.csv"
    csv.write_text("kind,configuration,measured,unit,source\nx,y,1,fps,z\n")
    with pytest.raises(CalibrationError, match="no column 'model', 'shapes', 'device'"):
        read_models_csv(csv)


def test_per_op_measurements_from_an_op_summary_recover_the_profile(tmp_path):
    import graphexec as gx
    from graphexec.calibrate import read_ops

    truth = _truth(**{"kernels.cube.efficiency.default": 0.55, "task_overhead_us": 3.5})
    gx.Session(gx.load(BLOCK), streams=1, device=truth).simulate(shapes={"data": (16, 192, 28, 28)}) \
        .write_profile(tmp_path)
    rows = read_ops(tmp_path, BLOCK, "data=16x192x28x28", "ascend910")
    assert [r.op[1] for r in rows] == ["Conv"] * 5 + ["MaxPool", "Conv", "Concat"]
    cal = calibrate(Target(load_profile("ascend910")), rows,
                    {"kernels.cube.efficiency.default": None, "task_overhead_us": None})
    assert cal.fitted == {"kernels.cube.efficiency.default": 0.55, "task_overhead_us": 3.5}   # 4 digits kept
    assert cal.summary()["op"]["held_out"]["error_after"] < 1.001 < cal.summary()["op"]["held_out"]["error_before"]
    assert cal.profile.sources["task_overhead_us"].startswith(f"fitted: {tmp_path} ops 1,2,3,4,6,7,8 (7 rows")


def test_an_op_the_model_lacks_is_one_line(tmp_path):
    from graphexec.calibrate import read_ops

    (tmp_path / "op_summary.csv").write_text("Op Name,OP Type,Task Duration(us),Input Shapes\nx,Gelu,3.0,\"1,2\"\n")
    rows = read_ops(tmp_path / "op_summary.csv", BLOCK, "data=16x192x28x28", "ascend910")
    with pytest.raises(CalibrationError, match="op 'x' \\(Gelu\\) matches no kernel of"):
        calibrate(Target(load_profile("ascend910")), rows * 3, {"task_overhead_us": None})


def test_the_built_in_310p_is_calibrated_and_says_what_it_was_fitted_to():
    from graphexec.runtime.provenance import against, provenance

    p = load_profile("ascend310p")
    assert provenance(p.sources)["fitted"] == ["kernels.cube.efficiency.default", "kernels.l2_bytes"]
    assert against(p.sources) == ["benchmarks/data/calibration_models.csv"]
    assert "before: 0.8," in p.sources["kernels.cube.efficiency.default"]


def test_the_cli_fits_per_op_rows_and_reports_json(tmp_path):
    import json
    import subprocess
    import sys

    import graphexec as gx

    truth = _truth(**{"task_overhead_us": 3.5})
    gx.Session(gx.load(BLOCK), streams=1, device=truth).simulate(shapes={"data": (16, 192, 28, 28)}) \
        .write_profile(tmp_path / "prof")
    out = tmp_path / "fitted.yaml"
    cli = [sys.executable, str(ROOT / "cli.py"), "calibrate", "--device", "ascend910", "--ops", str(tmp_path / "prof"),
           "--ops-model", BLOCK, "--ops-shapes", "data=16x192x28x28", "--fit", "task_overhead_us", "--out", str(out),
           "--json"]
    done = subprocess.run(cli, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["params"][0]["after"] == pytest.approx(3.5, rel=1e-3) and len(doc["rows"]) == 8
    assert load_profile(str(out)).task_overhead_us == pytest.approx(3.5, rel=1e-3)
    lone = subprocess.run(cli[:5] + cli[7:], capture_output=True, text=True, check=False)   # --ops without the model
    assert lone.returncode == 2 and "--ops and --ops-model go together" in lone.stderr


def test_a_renamed_profile_takes_the_rows_of_the_device_named():
    # the name keeps its chip's prefix: graphexec tells the chip (its precision default) by it
    truth = _truth(**{"kernels.cube.efficiency.default": 0.6})
    mine = Target(load_profile("ascend910")).build({}).model_copy(update={"name": "ascend910-mine"})
    rows = _rows(truth)
    with pytest.raises(CalibrationError, match="no measurement row was taken on 'ascend910-mine'"):
        calibrate(Target(mine), rows, {"kernels.cube.efficiency.default": None})
    cal = calibrate(Target(mine), rows, {"kernels.cube.efficiency.default": None}, rows_device="ascend910")
    assert cal.fitted["kernels.cube.efficiency.default"] == pytest.approx(0.6, rel=0.01)


def test_a_csv_saved_by_a_spreadsheet_with_a_bom_reads(tmp_path):
    csv = tmp_path / "rows.csv"
    csv.write_text("model,shapes,device,measured,unit\n"
                   f"{BLOCK},data=1x192x28x28,ascend910,20,us\n", encoding="utf-8-sig")
    (row,) = read_models_csv(csv)
    assert row.measured_us == 20.0 and row.model == BLOCK


def test_conditioning_is_what_the_refusal_judges():
    import numpy as np

    from graphexec.calibrate.fit import conditioning

    assert conditioning(np.array([[1.0, 0.0], [0.0, 0.5], [1.0, 0.5]]))[0] < 10
    cond, least = conditioning(np.array([[1.0, 1.0], [2.0, 2.0 + 1e-9], [3.0, 3.0]]))
    assert cond > 1e3 and least == 3.0
