"""Device profiles: the built-ins are valid and sourced, and bad files fail on one line."""

from __future__ import annotations

import importlib.util
import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from graphexec.errors import DeviceError
from graphexec.runtime.profiles import (
    DeviceProfile,
    builtin_profiles,
    load_profile,
    profile_json_schema,
)

ROOT = Path(__file__).resolve().parents[3]
DATA = resources.files("graphexec.runtime") / "profile_data"


def _base() -> dict:
    return yaml.safe_load((DATA / "ascend910.yaml").read_text(encoding="utf-8"))


def _write(tmp_path: Path, data: dict | str, name: str = "dev.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def _error(path: Path | str) -> str:
    with pytest.raises(DeviceError) as info:
        load_profile(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_builtins_load_sorted_and_named_after_their_files():
    profiles = builtin_profiles()
    assert list(profiles) == ["ascend310p", "ascend910", "ascend910b", "nvidia-a100", "nvidia-h100", "nvidia-v100"]
    assert sorted(f.name for f in DATA.iterdir() if f.name.endswith(".yaml")) == [
        f"{n}.yaml" for n in profiles
    ]
    for name, profile in profiles.items():
        assert load_profile(name) is profile
        assert load_profile(name.upper()) is profile


def test_builtin_architectures():
    p = builtin_profiles()
    assert (p["ascend910"].ai_cores, p["ascend910"].coupled) == (32, True)
    assert p["ascend910"].peak_tflops.cube["float16"] == 256.0
    assert (p["ascend910b"].ai_cores, p["ascend910b"].vector_cores, p["ascend910b"].coupled) == (24, 48, False)
    assert p["ascend910b"].hbm_capacity_bytes == 64 * 2**30
    assert (p["ascend310p"].ai_cores, p["ascend310p"].coupled) == (8, True)


@pytest.mark.parametrize("name", ["ascend310p", "ascend910", "ascend910b"])
def test_builtin_sources_cite_facts_or_say_assumption(name):
    """Every number cites a public source a user can look up (CANN's runtime sources, a paper,
    a repository, hiascend.com), says it is an assumption, or was fitted by ``graphexec
    calibrate`` to named measurements in the repository (the 310P's two, since issue 34);
    never a document the user does not have (issue 37)."""
    public = ("hicann/runtime", "Liao et al.", "huawei-csl/pto-dsl", "hiascend.com")
    for field, source in builtin_profiles()[name].sources.items():
        assert source.startswith(("assumption: ", "fitted: benchmarks/data/", *public)), field
        assert ".md §" not in source and "facts doc" not in source, field


@pytest.mark.parametrize("name", ["ascend310p", "ascend910", "ascend910b"])
def test_builtin_files_match_json_schema(name):
    data = yaml.safe_load((DATA / f"{name}.yaml").read_text(encoding="utf-8"))
    jsonschema.validate(data, profile_json_schema())


def test_schema_file_is_current():
    spec = importlib.util.spec_from_file_location("schemas_generate", ROOT / "schemas" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    on_disk = (ROOT / "schemas" / "device.schema.json").read_text(encoding="utf-8")
    assert on_disk == generate.render("device.schema.json"), "run: python schemas/generate.py"
    assert json.loads(on_disk) == DeviceProfile.model_json_schema()


def test_helpers_convert_units_and_fall_back():
    p = load_profile("ascend910")
    assert p.cube_flops_per_us_per_core("float16") == pytest.approx(256e12 / 1e6 / 32)
    assert p.cube_flops_per_us_per_core("float64") == p.cube_flops_per_us_per_core("float16")
    assert p.vector_flops_per_us_per_core("float32") == pytest.approx(2e12 / 1e6 / 32)
    assert p.vector_flops_per_us_per_core("int64") == p.vector_flops_per_us_per_core("float32")
    assert p.hbm_bytes_per_us == pytest.approx(1200e9 / 1e6)
    assert p.copy_bytes_per_us("H2D") == pytest.approx(25e9 / 1e6)
    with pytest.raises(DeviceError, match="device 'ascend910': unknown copy kind 'h2h'; known: h2d, d2h, d2d"):
        p.copy_bytes_per_us("h2h")


def test_profile_is_frozen():
    with pytest.raises(Exception):
        load_profile("ascend910").ai_cores = 4


def test_load_by_path_and_passthrough(tmp_path):
    data = _base() | {"name": "mine", "ai_cores": 16, "vector_cores": 16}
    for name in ("dev.yaml", "dev.yml"):
        path = _write(tmp_path, data, name)
        assert load_profile(path).ai_cores == 16
        assert load_profile(str(path)).name == "mine"
    profile = load_profile(path)
    assert load_profile(profile) is profile


def test_unknown_name():
    assert _error("tpu9") == (
        "unknown device 'tpu9'; known: ascend310p, ascend910, ascend910b, nvidia-a100, nvidia-h100, nvidia-v100 (or give a .yaml/.yml profile path)"
    )


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    assert _error(path) == f"{path}: cannot read device profile: No such file or directory"


def test_bad_yaml(tmp_path):
    path = _write(tmp_path, "name: [unclosed\n")
    assert _error(path) == f"{path}: invalid YAML at line 2, column 1: expected ',' or ']', but got '<stream end>'"


def test_not_a_mapping(tmp_path):
    path = _write(tmp_path, "- ascend910\n")
    assert _error(path) == f"{path}: expected a mapping of profile fields, got list"


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("ai_cores", 0, "field 'ai_cores': Input should be greater than or equal to 1 (got 0)"),
        ("max_events", -5, "field 'max_events': Input should be greater than or equal to 1 (got -5)"),
        ("hbm_bandwidth_gbps", -1.5, "field 'hbm_bandwidth_gbps': Input should be greater than 0 (got -1.5)"),
        ("launch_cost_us", 0, "field 'launch_cost_us': Input should be greater than 0 (got 0)"),
        ("queue_depth", "4k", "field 'queue_depth': Input should be a valid integer (got '4k')"),
        ("max_streams", True, "field 'max_streams': Input should be a valid integer (got True)"),
    ],
)
def test_bad_numbers(tmp_path, field, value, problem):
    path = _write(tmp_path, _base() | {field: value})
    assert _error(path) == f"{path}: {problem}"


def test_bad_nested_number(tmp_path):
    data = _base()
    data["peak_tflops"]["cube"]["int8"] = 0
    path = _write(tmp_path, data)
    assert _error(path) == f"{path}: field 'peak_tflops.cube.int8': Input should be greater than 0 (got 0)"


def test_missing_field(tmp_path):
    data = _base()
    del data["max_streams"]
    path = _write(tmp_path, data)
    assert _error(path) == f"{path}: field 'max_streams': required but missing"


def test_unknown_field(tmp_path):
    path = _write(tmp_path, _base() | {"l2_bytes": 1})
    assert _error(path) == f"{path}: field 'l2_bytes': unknown field"


def test_missing_source(tmp_path):
    data = _base()
    del data["sources"]["peak_tflops.cube.int8"], data["sources"]["max_events"]
    path = _write(tmp_path, data)
    assert _error(path) == f"{path}: field 'sources': no entry for max_events, peak_tflops.cube.int8"


def test_source_for_unknown_field(tmp_path):
    data = _base()
    data["sources"]["peak_tflops.cube.int4"] = "assumption: none"
    path = _write(tmp_path, data)
    assert _error(path) == f"{path}: field 'sources': entries for unknown fields peak_tflops.cube.int4"


def test_new_dtype_needs_a_source(tmp_path):
    data = _base()
    data["peak_tflops"]["cube"]["bfloat16"] = 256.0
    path = _write(tmp_path, data)
    assert _error(path) == f"{path}: field 'sources': no entry for peak_tflops.cube.bfloat16"


def test_coupled_needs_equal_core_counts(tmp_path):
    path = _write(tmp_path, _base() | {"vector_cores": 64})
    assert _error(path) == f"{path}: field 'vector_cores': must equal ai_cores (32) when coupled is true (got 64)"


def test_fallback_dtype_required(tmp_path):
    data = _base()
    del data["peak_tflops"]["cube"]["float16"], data["sources"]["peak_tflops.cube.float16"]
    path = _write(tmp_path, data)
    assert _error(path) == f"{path}: field 'peak_tflops.cube': needs a 'float16' entry"


def test_several_errors_on_one_line(tmp_path):
    path = _write(tmp_path, _base() | {"ai_cores": 0, "extra": 1})
    assert _error(path) == (
        f"{path}: field 'ai_cores': Input should be greater than or equal to 1 (got 0); field 'extra': unknown field"
    )
