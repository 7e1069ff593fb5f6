"""A profile's sources say whether it is calibrated and against what (graphexec devices)."""

from __future__ import annotations

from graphexec.runtime.profiles import builtin_profiles
from graphexec.runtime.provenance import against, note, provenance


def test_sources_sort_into_fitted_measured_cited_and_assumed():
    sources = {"a": "fitted: rows.csv rows 2,3 (by graphexec calibrate)", "b": "measured: FlagPerf 1329 GB/s",
               "c": "A100 whitepaper Table 1", "d": "assumption: 2 us", "e": "fitted: IOS Inception V3 speedup 1.58x"}
    assert provenance(sources) == {"fitted": ["a", "e"], "measured": ["b"], "cited": ["c"], "assumed": ["d"]}
    assert against(sources) == ["rows.csv", "IOS Inception V3 speedup 1.58x"]
    assert note(sources) == ("calibrated: a, e fitted against rows.csv; IOS Inception V3 speedup 1.58x "
                             "(2 fitted, 1 measured, 1 cited, 1 assumed)")
    assert note({"d": "assumption: x"}) == "not calibrated (0 fitted, 0 measured, 0 cited, 1 assumed)"


def test_every_builtin_has_a_note():
    for p in builtin_profiles().values():
        assert note(p.sources).startswith(("calibrated: ", "not calibrated ("))


def test_the_html_report_says_whether_the_profile_is_calibrated(tmp_path):
    import graphexec as gx
    from graphexec.profiling.report_html import render
    from graphexec.profiling.view_data import load

    b = gx.GraphBuilder("one")
    b.output(b.Relu(b.input("x", "float32", [64, 64])))
    for device, says in (("nvidia-v100", "device profile nvidia-v100: calibrated: "),
                         ("ascend910", "device profile ascend910: not calibrated (")):
        folder = tmp_path / device
        gx.Session(b.build(), device=device).simulate().write_profile(folder)
        assert says in render(load(str(folder / "timeline.json")))
