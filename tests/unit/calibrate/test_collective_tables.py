"""Collective tables as nccl-tests and hccl_test print them, and a system fitted to them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from graphexec.calibrate import Target, calibrate, read_collective_table
from graphexec.errors import CalibrationError
from graphexec.hccl import collective_us
from graphexec.runtime.systems import load_system

ROOT = Path(__file__).resolve().parents[3]
HEAD = """# nThread 1 nGpus 8 minBytes 1024 maxBytes 1073741824 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1
#
# Using devices
{ranks}#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
SIZES = [1 << k for k in range(10, 31, 2)]   # 1 KiB .. 1 GiB


def nccl_table(system, collective="all_reduce", p=8, header=True) -> str:
    """An nccl-tests table (the 2.13+ format) whose times are what ``system`` simulates."""
    ranks = "".join(f"#  Rank {r:2d} Group  0 Pid  1234 on  host device {r:2d} [0x{r:02x}] NVIDIA A100-SXM4-40GB\n"
                    for r in range(p))
    lines = [f"# Collective test starting: {collective}_perf\n" if header else "", HEAD.format(ranks=ranks)]
    for n in SIZES:
        t = collective_us(collective, n, system, list(range(p)))
        alg = n / t / 1e3
        lines.append(f"{n:>12} {n // 4:>13}     float     sum      -1 {t:8.2f} {alg:7.2f} {alg * 1.75:7.2f}      0 "
                     f"{t:8.2f} {alg:7.2f} {alg * 1.75:7.2f}      0\n")
    return "".join(lines) + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 100.0\n"


def _truth():
    return Target(load_system("dgx-a100")).build({"collectives.fixed_us": 9.0, "collectives.efficiency": 0.7})


def test_a_system_fit_recovers_the_collective_constants(tmp_path):
    table = tmp_path / "ar.txt"
    table.write_text(nccl_table(_truth()))
    rows = read_collective_table(table)
    assert len(rows) == len(SIZES) and {r.ranks for r in rows} == {8} and rows[0].collective == "all_reduce"
    cal = calibrate(Target(load_system("dgx-a100")), rows, {"collectives.fixed_us": None,
                                                            "collectives.efficiency": None})
    assert cal.fitted["collectives.fixed_us"] == pytest.approx(9.0, rel=0.01)
    assert cal.fitted["collectives.efficiency"] == pytest.approx(0.7, rel=0.01)
    s = cal.summary()["collective"]
    assert s["held_out"]["rows"] == 2 and s["held_out"]["error_after"] < 1.01 < s["held_out"]["error_before"]
    assert cal.profile.sources["collectives.efficiency"].startswith(f"fitted: {table} lines ")


def test_fixed_cost_and_link_latency_cannot_be_told_apart():
    rows = read_collective_table(_write(nccl_table(_truth())))
    with pytest.raises(CalibrationError, match="cannot tell apart collectives.fixed_us, "
                                               "topology.intra_group.latency_us"):
        calibrate(Target(load_system("dgx-a100")), rows,
                  {"collectives.fixed_us": None, "topology.intra_group.latency_us": None})


def _write(text: str, name: str = "table.txt") -> Path:
    import tempfile
    path = Path(tempfile.mkdtemp()) / name
    path.write_text(text)
    return path


def test_the_older_nccl_tests_format_and_the_file_name():
    # nccl-tests before 2.13: no root column, an 'error' column, no '#' before the header when run by mpirun
    text = """ nThread 1 nGpus 1 minBytes 32 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20
   Rank  0 Pid 1821213 on host device  0 [0x00] NVIDIA A100-SXM4-40GB
   Rank  1 Pid 1821214 on host device  1 [0x00] NVIDIA A100-SXM4-40GB
                                                     out-of-place                       in-place
       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
          32             8   float     sum    10.14    0.00    0.00  0e+00    10.02    0.00    0.00  0e+00
       65536         16384    half     sum    12.50    5.24    5.24  0e+00    12.40    5.29    5.29  0e+00
"""
    rows = read_collective_table(_write(text, "all_reduce_2gpu.txt"))
    assert [(r.nbytes, r.measured_us, r.dtype, r.ranks) for r in rows] == [
        (32, 10.14, "float32", 2), (65536, 12.5, "float16", 2)]


def test_hccl_test_output():
    text = """the minbytes is 8, maxbytes is 1024, iters is 20, warmup_iters is 5
data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:
8                   | 24.61            | 0.00033              | success
1024                | 25.10            | 0.04080              | success
"""
    rows = read_collective_table(_write(text), collective="all_gather", ranks=8)
    assert [(r.nbytes, r.measured_us, r.collective, r.ranks) for r in rows] == [
        (8, 24.61, "all_gather", 8), (1024, 25.1, "all_gather", 8)]


@pytest.mark.parametrize("text, kwargs, message", [
    ("# Collective test starting: all_reduce_perf\n#  Rank  0 x\n#  Rank  1 x\n"
     "#  size count type redop root time algbw busbw #wrong\n  64  16  float  sum  -1  slow  1 1 0\n", {},
     "line 5: field 'time': 'slow' is not a number"),
    ("#  Rank  0 x\n#  Rank  1 x\n#  size count type time algbw busbw\n  64  16  float  3.0 1 1\n", {},
     "cannot tell which collective"),
    ("#  size count type time\n  64  16  float  3.0\n", {"collective": "all_reduce"}, "cannot tell the rank count"),
    ("#  Rank  0 x\n#  Rank  1 x\n#  size count type time\n  64  16  quad  3.0\n", {"collective": "broadcast"},
     "line 4: field 'type': 'quad'"),
    ("nothing here\n", {"collective": "all_reduce", "ranks": 2}, "no rows of measurements"),
])
def test_a_malformed_table_is_one_line_naming_the_line(text, kwargs, message):
    with pytest.raises(CalibrationError, match=message) as e:
        read_collective_table(_write(text), **kwargs)
    assert "\n" not in str(e.value)


def test_the_cli_fits_a_system_and_writes_it(tmp_path):
    table = tmp_path / "all_reduce.txt"
    table.write_text(nccl_table(_truth(), header=False))
    out = tmp_path / "dgx.yaml"
    cli = [sys.executable, str(ROOT / "cli.py"), "calibrate", "--system", "dgx-a100", "--collectives", str(table),
           "--fit", "collectives.fixed_us,collectives.efficiency=0.3:1", "--out", str(out), "--name", "dgx-fit"]
    done = subprocess.run(cli, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "collective out-of-sample: 2 rows" in done.stdout
    fitted = load_system(str(out))
    assert fitted.name == "dgx-fit" and fitted.device == "nvidia-a100"
    assert fitted.collectives.efficiency == pytest.approx(0.7, rel=0.01)
    bad = subprocess.run([*cli[:-4], "--fit", "collectives.nothing"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no number at 'collectives.nothing'" in bad.stderr


def test_the_shipped_h20_tables_parse_and_refit_the_dgx_h100s_constants():
    """The built-in's four collective numbers, fitted as benchmarks/calibration.py fits them:
    the link latency on the 4 B-4 KiB table alone from the assumed 2 us, then the fixed cost,
    the payload share and the slice on both tables; every row from 1 KiB to 1 GiB within 15%."""
    folder = ROOT / "benchmarks" / "data" / "collectives"
    small = read_collective_table(folder / "hgx-h20_all_reduce_perf_8gpu.txt", "all_reduce", 8)
    big = read_collective_table(folder / "hgx-h20_all_reduce_perf_8gpu_32k-1g.txt", "all_reduce", 8)
    assert [r.nbytes for r in small] == [4 << k for k in range(11)] and small[3].measured_us == 24.63
    assert [r.nbytes for r in big] == [2**k for k in (*range(15, 26), *range(27, 31))]
    assert big[-1].measured_us == 5252.64
    latency, pipe = "topology.intra_group.latency_us", ("collectives.fixed_us", "collectives.efficiency",
                                                         "collectives.slice_bytes")
    assumed = {latency: 2.0, pipe[0]: 6.14, pipe[1]: 0.822, pipe[2]: 524288}
    first = calibrate(Target(Target(load_system("dgx-h100")).build(assumed)), small, {latency: None})
    assert first.fitted[latency] == pytest.approx(0.669, rel=0.01)
    cal = calibrate(Target(first.profile), small + big, {p: None for p in pipe})
    built_in = load_system("dgx-h100")
    assert cal.fitted[pipe[0]] == pytest.approx(built_in.collectives.fixed_us, rel=0.01)
    assert cal.fitted[pipe[1]] == pytest.approx(built_in.collectives.efficiency, rel=0.01)
    assert all(0.85 <= r.after <= 1.15 for r in cal.rows if 1024 <= r.m.nbytes <= 2**30)


def test_model_rows_over_several_cards_fit_a_systems_host_link(tmp_path):
    from graphexec.calibrate import read_models_csv
    from graphexec.calibrate.predict import simulated_us

    block = ROOT / "models" / "inception_block.onnx"
    truth = Target(load_system("dgx-a100")).build({"host.bandwidth_gbps": 12.0})
    lines = ["configuration,model,shapes,device,devices,parallel,measured,unit"]
    for b in (2, 4, 8, 16, 32, 64, 12):
        row = f"b{b},{block},data={b}x192x28x28,dgx-a100,2,data"
        m = read_models_csv(_write(f"{lines[0]}\n{row},1,us\n"))[0]
        lines.append(f"{row},{simulated_us(m, truth)!r},us")
    rows = read_models_csv(_write("\n".join(lines) + "\n", "rows.csv"))
    assert {(r.cards, r.parallel, r.device) for r in rows} == {(2, "data", "dgx-a100")}
    # each card's share of the batch crosses its own host link: the rows pin that link's bandwidth
    cal = calibrate(Target(load_system("dgx-a100")), rows, {"host.bandwidth_gbps": None})
    assert cal.fitted["host.bandwidth_gbps"] == pytest.approx(12.0, rel=0.01)
    with pytest.raises(CalibrationError, match="row 2: field 'parallel': 'zigzag'"):
        read_models_csv(_write(f"{lines[0]}\nx,{block},data=2x192x28x28,dgx-a100,2,zigzag,1,us\n"))
