"""A device profile names its compute units as data (``units:``): a run reports them under
those names, a profile with names of its own runs, and a bad declaration fails on one line."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import yaml
from profiling_graphs import big_matmuls

import graphexec as gx
from graphexec.errors import DeviceError
from graphexec.profiling.console import profile_lines
from graphexec.runtime.profiles import load_profile

DATA = resources.files("graphexec.runtime") / "profile_data"


def _yaml(name: str = "ascend910") -> dict:
    return yaml.safe_load((DATA / f"{name}.yaml").read_text(encoding="utf-8"))


def _stats(device: object) -> gx.Stats:
    return gx.Session(big_matmuls(n=2, size=256), streams=2, device=device).simulate().stats


def test_gpu_run_names_its_own_units():
    stats = _stats("nvidia-a100")
    assert stats.units == {"tensor_core": stats.cube_utilization, "cuda_core": stats.vector_utilization}
    assert stats.cube_utilization > 0
    line = profile_lines(stats)[0]
    assert "tensor_core" in line and "cuda_core" in line and "cube" not in line
    units = {u["role"]: u for u in load_profile("nvidia-h100").describe_units()}
    assert (units["cube"]["name"], units["cube"]["core"], units["cube"]["cores"]) == ("tensor_core", "SM", 132)
    assert units["aicpu"]["name"] == "host_cpu"


def test_ascend_keeps_its_names_and_keys():
    stats = _stats("ascend910")
    assert stats.units == {"cube": stats.cube_utilization, "vector": stats.vector_utilization}
    assert "utilization: cube " in profile_lines(stats)[0]
    assert stats.to_dict()["cube_utilization"] == stats.cube_utilization


def test_profile_with_names_of_its_own_runs_at_the_same_times(tmp_path: Path):
    data = _yaml()
    data["name"] = "ascend910-renamed"   # its chip still ascend910 (precision defaults go by name)
    data["units"] = {"cube": {"name": "mxu", "label": "matrix units", "core": "tile"},
                     "vector": {"name": "vpu", "label": "vector pipes", "core": "tile"},
                     "aicpu": {"name": "scalar_core", "label": "scalar cores", "core": "core"}}
    path = tmp_path / "my-npu.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    mine, base = _stats(str(path)), _stats("ascend910")
    assert list(mine.units) == ["mxu", "vpu"]
    assert mine.makespan_us == base.makespan_us          # names are names: the times do not move
    assert list(mine.units.values()) == list(base.units.values())
    assert load_profile(path).unit_name("aicpu") == "scalar_core"


def test_units_left_out_are_ascends(tmp_path: Path):
    data = _yaml()
    del data["units"]
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert load_profile(path).units.names() == {"cube": "cube", "vector": "vector", "aicpu": "aicpu"}


@pytest.mark.parametrize("units, problem", [
    ({"cube": {"name": "Tensor Core", "label": "x", "core": "SM"}}, "field 'units.cube.name': String should match"),
    ({"cube": {"name": "vpu", "label": "x", "core": "SM"}, "vector": {"name": "vpu", "label": "y", "core": "SM"}},
     "field 'units.vector.name': 'vpu' already names units.cube"),
    ({"cube": {"name": "vector", "label": "x", "core": "SM"}, "vector": {"name": "vpu", "label": "y", "core": "SM"}},
     "field 'units.cube.name': 'vector' is the name of another role"),
    ({"tpu": {"name": "mxu", "label": "x", "core": "SM"}}, "field 'units.tpu': unknown field"),
    ({"cube": {"name": "mxu", "label": "x"}}, "field 'units.cube.core': required but missing"),
    ({"cube": {"name": "mxu", "label": "", "core": "SM"}}, "field 'units.cube.label'"),
])
def test_bad_unit_declaration_is_one_line_naming_the_field(tmp_path: Path, units: dict, problem: str):
    data = _yaml()
    data["units"] = units
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(DeviceError) as info:
        load_profile(path)
    assert "\n" not in str(info.value) and problem in str(info.value), str(info.value)


def test_acl_launch_takes_a_units_name_or_its_role():
    from acl_helpers import clean_acl

    from graphexec import acl

    clean_acl()
    acl.init(profile="nvidia-a100")
    try:
        acl.set_device(0)
        s = acl.create_stream()
        acl.launch_kernel(lambda: None, 4, s, flops=1e9, unit="tensor_core", dtype="float16")
        acl.launch_kernel(lambda: None, 4, s, flops=1e9, unit="vector")
        with pytest.raises(gx.GraphExecError, match="tensor_core, cuda_core, host_cpu"):
            acl.launch_kernel(lambda: None, 4, s, flops=1e9, unit="mxu")
        acl.synchronize_stream(s)
        units = [t.unit for t in acl.emulated_device().sim.finished if t.kind == "kernel"]
        assert units == ["cube", "vector"]
    finally:
        clean_acl()


def test_report_labels_a_gpus_units(tmp_path: Path):
    from graphexec.profiling.report_html import render
    from graphexec.profiling.view_data import load

    graph = big_matmuls(n=2, size=256)
    gx.Session(graph, device="nvidia-a100").run(gx.default_feeds(graph)).write_profile(tmp_path / "prof")
    page = render(load(tmp_path / "prof"))
    assert "tensor cores utilization" in page and "CUDA cores utilization" in page
