"""The command line across cards (issue 16): ``compare --devices``, ``plan --devices``, and
one line, exit 2, for a card count the system lacks, a mode that is not implemented or
micro-batches that do not divide the batch."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

import cli
from graphexec.cluster import modes as parallel

SQUEEZENET = str(Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx")
BATCH8 = ["--shape", "data_0=8,3,224,224"]


def test_compare_over_devices_table_json_and_plot(capsys, tmp_path):
    plot = tmp_path / "gantt.png"
    assert cli.main(["compare", SQUEEZENET, "--devices", "1,2", *BATCH8, "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "speedup" in out and "comm hidden" in out and "peak memory/card" in out
    assert "outputs bit-identical across all rows" in out
    assert plot.stat().st_size > 0
    assert cli.main(["compare", SQUEEZENET, "--devices", "1,2", *BATCH8, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["devices"] for r in rows] == [1, 2] and rows[0]["speedup"] == 1.0
    assert rows[1]["comm_us"] > 0 and 0.0 <= rows[1]["comm_hidden"] <= 1.0 and rows[1]["peak_bytes"] > 0


def test_gantt_has_one_lane_per_card_stream():
    import graphexec as gx
    from graphexec.profiling.plot import _lanes

    graph = gx.load(SQUEEZENET)
    feeds = gx.default_feeds(graph, {"data_0": (4, 3, 224, 224)})
    trace = gx.Session(graph, devices=2).run(feeds).trace
    lanes = _lanes(trace)[1]
    assert {p for p, _ in lanes} == {0, 1} and len(lanes) >= 4   # each card: a compute and a copy stream


def test_plan_shows_each_cards_share_and_the_transfers(capsys):
    assert cli.main(["plan", SQUEEZENET, "--devices", "4", *BATCH8]) == 0
    out = capsys.readouterr().out
    assert "the batch (8 rows of data_0) in 4 shares" in out
    for i in range(4):
        assert f"card {i}: rows {2 * i}..{2 * i + 1} (data_0[2, 3, 224, 224])" in out
        assert f"host -> {i} over PCIe" in out and f"{i} -> host over PCIe" in out
    assert "transfers (one simulated run" in out and "hidden behind compute" in out


def test_plan_of_a_mode_without_a_partition(capsys, monkeypatch):
    """A mode without ``describe()`` says so instead of showing nothing."""
    data = parallel.mode_class("data")

    class Plain:
        name = "plain"

        def __init__(self, cluster):
            self.cluster, self._inner = cluster, data(cluster)

        def compile(self, feeds):
            return self._inner.compile(feeds)

        def run(self, feeds):
            return self._inner.run(feeds)

    monkeypatch.setitem(parallel.REGISTRY, "tensor", Plain)
    assert cli.main(["plan", SQUEEZENET, "--devices", "2", "--parallel", "tensor", *BATCH8]) == 0
    assert "partition: parallel=plain has no partition to show" in capsys.readouterr().out


def test_plan_of_a_tensor_split_says_what_splits_and_why_the_rest_stays_whole(capsys, tmp_path):
    import sys

    from graphexec.ir.onnx_proto import to_onnx

    sys.path.insert(0, str(Path(__file__).parent))
    from test_tensor_parallel import attention_block

    model = tmp_path / "bert6.onnx"
    onnx.save(to_onnx(attention_block(heads=6, d=192)), str(model))
    assert cli.main(["plan", str(model), "--devices", "4", "--parallel", "tensor"]) == 0
    out = capsys.readouterr().out
    assert "whole q_proj (MatMul): with o_proj: 'ctx_t' is 6 along the split axis 2, which 4 cards do not divide" in out
    assert "whole scores (MatMul): its weight is not a constant 2-D tensor" in out
    assert "nodes replicated on every card" in out and "stats.extra['tensor_splits']" not in out


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err.strip()


@pytest.mark.parametrize("args,message", [
    (["compare", SQUEEZENET, "--devices", "1,16", *BATCH8], "devices=16: system atlas800-910 has 8 devices"),
    (["plan", SQUEEZENET, "--devices", "4", "--system", "atlas300i-duo", *BATCH8],
     "system atlas300i-duo has 2 devices"),
    (["compare", SQUEEZENET, "--devices", "1,2", "--microbatches", "3", *BATCH8],
     "which 2 devices x 3 micro-batches cannot split evenly"),
    (["plan", SQUEEZENET, "--devices", "2", "--microbatches", "3", *BATCH8],
     "which 2 devices x 3 micro-batches cannot split evenly"),
    (["compare", SQUEEZENET, "--devices", "1,4"], "which 4 devices cannot split evenly"),   # the declared batch 1
    (["compare", SQUEEZENET, "--devices", "1,2", "--streams", "1,2", *BATCH8], "the stream count per card"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, message):
    assert cli.main(args) == 2
    assert message in _err(capsys)


def test_a_mode_that_is_not_implemented_is_one_line(capsys, monkeypatch):
    monkeypatch.delitem(parallel.REGISTRY, "tensor")
    assert cli.main(["compare", SQUEEZENET, "--devices", "1,2", "--parallel", "tensor", *BATCH8]) == 2
    assert "parallel='tensor' is not implemented yet" in _err(capsys)


@pytest.mark.parametrize("bad", ["1,x", "0", ""])
def test_bad_device_list_is_a_usage_error(capsys, bad):
    with pytest.raises(SystemExit) as e:
        cli.main(["compare", SQUEEZENET, "--devices", bad])
    assert e.value.code == 2 and "--devices" in _err(capsys)
