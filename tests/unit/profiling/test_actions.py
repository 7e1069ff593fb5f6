"""The diagnosis advises actions: settings the user has, each with the gain two real
``simulate`` runs measure (with and without it), none already in effect; the causes name
the profile fields (value and ``sources:`` line) their bounds rest on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from profiling_graphs import tiny_chain, wide_reductions

import graphexec as gx
from graphexec.profiling.actions import NEGLIGIBLE

MODEL = Path(__file__).resolve().parents[3] / "models" / "inception_block.onnx"   # float32 Conv+Relu x6, MaxPool


def _span(graph, **kw) -> float:
    return gx.Session(graph, **kw).simulate().stats.makespan_us


def _actions(graph, **kw):
    d = gx.Session(graph, **kw).simulate().diagnosis
    return {a.name: a for a in d.actions}, d


def test_fusion_off_gets_turn_fusion_on_with_the_gain_of_the_two_runs():
    g = gx.load(MODEL)
    acts, d = _actions(g, fusion=False)
    off, on = _span(g, fusion=False), _span(g, fusion=True)
    fusion = acts["fusion"]
    assert fusion.gain == pytest.approx(off / on, rel=1e-9) and fusion.gain > 1.5   # 13 kernels -> 7
    assert fusion.makespan_us == pytest.approx(on, rel=1e-9)
    assert (fusion.flag, fusion.option) == ("--fusion on", "fusion=True")
    assert d.numbers["action_fusion_gain"] == fusion.gain


def test_fusion_already_on_is_neither_measured_nor_advised():
    acts, d = _actions(gx.load(MODEL))
    assert "fusion" not in acts and "action_fusion_us" not in d.numbers


def test_rules_switched_off_get_the_switch_file_dropped(tmp_path):
    switch = tmp_path / "switch.cfg"
    switch.write_text("ConvElemwiseUbFusion:off\n")
    g = gx.load(MODEL)
    acts, _ = _actions(g, fusion_switch_file=str(switch))
    fusion = acts["fusion"]
    assert "--fusion-switch-file" in fusion.flag and "ConvElemwiseUbFusion" in fusion.flag
    assert fusion.option == "fusion_switch_file=None"
    assert fusion.gain == pytest.approx(_span(g, fusion_switch_file=str(switch)) / _span(g), rel=1e-9)


def test_a_float32_model_kept_in_float32_on_the_910_gets_the_precision_advice():
    """The 910's cube has no float32 path: must_keep_origin_dtype runs the Convs on the AI CPU."""
    g = gx.load(MODEL)
    acts, _ = _actions(g, precision_mode="must_keep_origin_dtype")
    p = acts["precision"]
    mode = p.flag.split()[-1]
    assert p.flag == f"--precision-mode {mode}" and p.option == f'precision_mode="{mode}"'
    assert p.gain == pytest.approx(_span(g, precision_mode="must_keep_origin_dtype") / _span(g, precision_mode=mode),
                                   rel=1e-9)
    assert p.gain > 100 and "accuracy cost is not measured" in p.caveat and "--precision-numerics device" in p.caveat


def test_no_precision_advice_under_force_fp16_or_off_ascend():
    g = gx.load(MODEL)
    assert "precision" not in _actions(g)[0]                          # the 910's default, force_fp16
    assert "precision" not in _actions(g, device="nvidia-v100")[0]    # ATC's modes are Ascend's


@pytest.mark.parametrize("device", ["ascend910", "ascend310p", "ascend910b"])
def test_no_mode_beats_force_fp16_by_what_advice_needs(device):
    """Why a force_fp16 run is not compiled again in the other modes (``actions.precision``)."""
    g = gx.load(MODEL)
    modes = ["allow_fp32_to_fp16", "allow_mix_precision", "must_keep_origin_dtype"]
    modes += ["allow_mix_precision_bf16"] if device == "ascend910b" else []
    fp16 = _span(g, device=device)
    assert all(fp16 < NEGLIGIBLE * _span(g, device=device, precision_mode=m) for m in modes)


def test_a_chain_gets_no_streams_advice_and_a_wide_graph_gets_the_measured_one():
    assert "streams" not in _actions(tiny_chain(n=20))[0]
    g = wide_reductions()
    acts, _ = _actions(g)
    s = acts["streams"]
    n, policy = int(s.flag.split()[1]), s.flag.split()[-1]
    assert s.option == f'streams={n}, policy="{policy}"'
    assert s.gain == pytest.approx(_span(g) / _span(g, streams=n, policy=policy), rel=1e-6)
    assert "streams" not in _actions(g, streams=n, policy=policy)[0]   # already in effect


def test_host_launch_gets_graph_mode_and_graph_mode_does_not():
    g = tiny_chain(n=30)
    acts, _ = _actions(g, launch="host")
    gm = acts["graph_mode"]
    assert (gm.flag, gm.option) == ("--launch graph", 'launch="graph"')
    assert gm.gain == pytest.approx(_span(g, launch="host") / _span(g, launch="graph"), rel=1e-9)
    assert "graph_mode" not in _actions(g)[0]


def test_actions_are_best_first_and_each_buys_at_least_five_percent():
    acts = gx.Session(gx.load(MODEL), fusion=False, precision_mode="must_keep_origin_dtype").simulate() \
        .diagnosis.actions
    assert [a.gain for a in acts] == sorted((a.gain for a in acts), reverse=True)
    assert all(a.gain >= NEGLIGIBLE for a in acts) and {"precision", "streams"} <= {a.name for a in acts}


def test_causes_name_the_profile_fields_with_their_sources():
    session = gx.Session(gx.load(MODEL))
    d = session.simulate().diagnosis
    by = {c.reason: c for c in d.causes}
    sources = session.profile.sources
    expect = {"dispatch": "task_overhead_us", "launch": "launch_cost_us", "memory": "hbm_bandwidth_gbps",
              "host": "queue_depth", "dependency": "ai_cores"}
    for reason, name in expect.items():
        f = next(f for f in by[reason].fields if f["field"] == name)
        assert f["value"] == getattr(session.profile, name) and f["source"] == sources[name]
        assert f"{name} = " in by[reason].message
    compute = [f["field"] for f in by["compute"].fields]   # the unit and dtype that ran longest
    assert compute[0].startswith("peak_tflops.") and all(f"{f} = " in by["compute"].message for f in compute)


def test_ideals_are_explanations_not_advice():
    """Twice the bandwidth or no overhead is the device's: no cause tells the user to change it."""
    d = gx.Session(gx.load(MODEL), fusion=False).simulate().diagnosis
    for c in d.causes:
        assert "not a setting" in c.message or c.reason in ("dependency", "launch", "host")
        assert "Use deeper queues" not in c.message and "faster device" not in c.message
    dispatch = next(c for c in d.causes if c.reason == "dispatch")
    assert "What you can do: " in dispatch.message and "(--fusion on)" in dispatch.message


def test_rules_off_in_both_groups_are_measured_per_group_too(tmp_path):
    both, ub, graph_only = (tmp_path / f for f in ("both.cfg", "ub.cfg", "graph.cfg"))
    both.write_text("ConvElemwiseUbFusion:off\nConvBatchnormFusionPass:off\nNoSuchGeRule:off\n")
    ub.write_text("ConvElemwiseUbFusion:off\n")
    graph_only.write_text("ConvBatchnormFusionPass:off\n")
    g = gx.load(MODEL)
    fusion = _actions(g, fusion_switch_file=str(both))[0]["fusion"]
    assert "NoSuchGeRule" not in fusion.flag   # a name graphexec does not implement changes nothing
    base = _span(g, fusion_switch_file=str(both))
    # UB rules alone on = only the graph rule still off, and the other way round
    assert f"UBFusion rules alone {base / _span(g, fusion_switch_file=str(graph_only)):.2f}x" in fusion.message
    assert f"GraphFusion rules alone {base / _span(g, fusion_switch_file=str(ub)):.2f}x" in fusion.message


def test_a_switch_file_of_rules_graphexec_lacks_gets_no_fusion_advice(tmp_path):
    switch = tmp_path / "switch.cfg"
    switch.write_text("NoSuchGeRule:off\n")
    assert "fusion" not in _actions(gx.load(MODEL), fusion_switch_file=str(switch))[0]


def test_measuring_the_actions_leaves_the_session_as_it_was():
    """The actions compile a clone of the plan's graph: the session's plan, outputs and times stay."""
    import numpy as np

    g = gx.load(MODEL)
    session = gx.Session(g, fusion=False, precision_mode="allow_fp32_to_fp16")
    feeds = gx.default_feeds(g, {"data": (1, 192, 28, 28)})
    first = session.run(feeds)
    nodes = [n.name for n in session.compiled.plan.graph.nodes]
    assert {a.name for a in first.diagnosis.actions} >= {"fusion"}
    again = session.run(feeds)
    assert (again.stats.makespan_us, again.stats.num_tasks) == (first.stats.makespan_us, first.stats.num_tasks)
    assert [n.name for n in session.compiled.plan.graph.nodes] == nodes
    assert all(np.array_equal(again.outputs[k], v) for k, v in first.outputs.items())


def test_measured_durations_get_no_advice_that_makes_other_kernels(tmp_path):
    """Measured times cover the kernels that ran: fused or re-typed kernels were never measured."""
    g = gx.load(MODEL)
    gx.Session(g, fusion=False, precision_mode="must_keep_origin_dtype").simulate().write_profile(tmp_path)
    acts, d = _actions(g, fusion=False, precision_mode="must_keep_origin_dtype", measured=str(tmp_path))
    assert "fusion" not in acts and "precision" not in acts and "action_fusion_us" not in d.numbers
    assert "streams" in acts   # the measured kernels on more streams: a schedule, nothing re-timed


def test_compute_cause_names_the_op_class_efficiency_that_timed_it() -> None:
    """On the V100 a convolution is timed at kernels.cube.op_efficiency.Conv (and a lone block at
    lone_efficiency): the compute cause names those fields, not the unit's default efficiency."""
    from graphexec.profiling.profile_fields import compute_fields

    b = gx.GraphBuilder("conv")
    x = b.input("x", "float32", ("n", 64, "h", "h"))
    w = b.constant(np.ones((64, 64, 3, 3), np.float32) / 100)
    b.output(b.Conv(x, w, pads=[1, 1, 1, 1]))
    graph = b.build()
    r = gx.Session(graph, device="nvidia-v100").simulate(shapes={"x": (8, 64, 56, 56)})
    fields = compute_fields(r.run.tasks, r.run.plan.profile)
    assert fields == ("peak_tflops.cube.float32", "kernels.cube.op_efficiency.Conv")   # many tiles a block
    r = gx.Session(graph, device="nvidia-v100").simulate(shapes={"x": (1, 64, 7, 7)})
    fields = compute_fields(r.run.tasks, r.run.plan.profile)
    assert fields[-1] == "kernels.cube.lone_efficiency"   # a few tiles: one a block
