"""System profiles: every pair of every built-in answers, channels are shared as the
hardware shares them, and bad files fail on one line naming the field."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from graphexec.errors import DeviceError
from graphexec.runtime import systems as sy
from graphexec.runtime.profiles import builtin_profiles
from graphexec.runtime.systems import SystemProfile, builtin_systems, load_system, system_json_schema

ROOT = Path(__file__).resolve().parents[3]
DATA = resources.files("graphexec.runtime") / "system_data"
BUILTINS = ["atlas300i-duo", "atlas800-910", "atlas800t-a2", "dgx-a100", "dgx-h100"]
TOPO = {sy.DEVICES_TOPO_HCCS, sy.DEVICES_TOPO_PIX, sy.DEVICES_TOPO_PHB, sy.DEVICES_TOPO_SYS,
        sy.DEVICES_TOPO_SIO, sy.DEVICES_TOPO_HCCS_SW}


def _base(name: str = "atlas800-910") -> dict:
    return yaml.safe_load((DATA / f"{name}.yaml").read_text(encoding="utf-8"))


def _error(tmp_path: Path, data: dict | str) -> str:
    path = tmp_path / "sys.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(DeviceError) as info:
        load_system(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def test_builtins_are_named_after_their_files():
    assert builtin_systems() == BUILTINS
    assert sorted(f.name for f in DATA.iterdir() if f.name.endswith(".yaml")) == [f"{n}.yaml" for n in BUILTINS]
    for name in BUILTINS:
        assert load_system(name) is load_system(name.upper())


@pytest.mark.parametrize("name", BUILTINS)
def test_every_ordered_pair_answers(name):
    s = load_system(name)
    assert s.device == s.device_profile.name and s.device_profile is builtin_profiles()[s.device_profile.name]
    resources_seen = set()
    for a in range(s.count):
        host = s.host_link(a)
        assert host.kind in ("PCIe", "PHB") and host.resource == f"host:{a}"
        for b in range(s.count):
            if a == b:
                for call in (s.link, s.topo, s.peer_capable):
                    with pytest.raises(DeviceError, match="no link to itself"):
                        call(a, a)
                continue
            link = s.link(a, b)
            assert link.bandwidth_gbps > 0 and link.latency_us >= 0 and link.resource
            assert link.bytes_per_us == link.bandwidth_gbps * 1e3
            assert s.topo(a, b) in TOPO and isinstance(s.peer_capable(a, b), bool)
            resources_seen.add(link.resource)
    assert not any(r.startswith("host:") for r in resources_seen)


def test_atlas800_910_groups_share_one_pcie_path_per_direction():
    s = load_system("atlas800-910")
    assert (s.count, s.device_profile.name, s.groups) == (8, "ascend910", [[0, 1, 2, 3], [4, 5, 6, 7]])
    hccs = s.link(0, 1)
    assert (hccs.kind, hccs.bandwidth_gbps, hccs.resource) == ("HCCS", 18.0, "hccs:0->1")
    assert s.link(1, 0).resource == "hccs:1->0" and s.link(5, 7).resource == "hccs:5->7"
    assert {s.link(a, b).resource for a in range(4) for b in range(4, 8)} == {"pcie:g0->g1"}
    assert {s.link(b, a).resource for a in range(4) for b in range(4, 8)} == {"pcie:g1->g0"}
    assert s.link(0, 4).bandwidth_gbps == 20.0
    assert s.topo(0, 3) == sy.DEVICES_TOPO_HCCS == 0x01 and s.topo(2, 6) == sy.DEVICES_TOPO_PIX == 0x02
    assert all(s.peer_capable(a, b) for a in range(8) for b in range(8) if a != b)
    nic = s.nic_link(3)
    assert nic is not None and (nic.kind, nic.bandwidth_gbps, nic.resource) == ("RDMA", 12.5, "nic:3")


def test_atlas800t_a2_is_a_full_mesh_with_a_channel_per_directed_pair():
    s = load_system("atlas800t-a2")
    pairs = [(a, b) for a in range(8) for b in range(8) if a != b]
    assert len({s.link(a, b).resource for a, b in pairs}) == 56
    assert {(s.link(a, b).kind, s.link(a, b).bandwidth_gbps, s.topo(a, b)) for a, b in pairs} == {
        ("HCCS", 54.68, sy.DEVICES_TOPO_HCCS)}


def test_atlas300i_duo_is_two_310p_on_pcie():
    s = load_system("atlas300i-duo")
    assert (s.count, s.device_profile.name) == (2, "ascend310p")
    assert (s.link(0, 1).resource, s.link(1, 0).resource) == ("pcie:0->1", "pcie:1->0")
    assert s.topo(0, 1) == sy.DEVICES_TOPO_PIX and s.peer_capable(0, 1) and s.nic_link(0) is None


def test_topology_constants_match_acl_rt_h():
    assert (sy.DEVICES_TOPO_HCCS, sy.DEVICES_TOPO_PIX, sy.DEVICES_TOPO_PHB, sy.DEVICES_TOPO_SYS,
            sy.DEVICES_TOPO_SIO, sy.DEVICES_TOPO_HCCS_SW) == (0x01, 0x02, 0x08, 0x10, 0x20, 0x40)


@pytest.mark.parametrize("name", BUILTINS)
def test_sources_cite_or_say_assumption_and_describe_names_the_links(name):
    s = load_system(name)
    for field, source in s.sources.items():
        assert source.startswith(("assumption: ", "CANN 8.0 API reference", "msprof's analysis code", "HCCL ",
                                  "NVIDIA ", "A100 ", "DGX ", "measured: ", "measured (", "fitted: ")), field
        assert "facts.md" not in source, field   # a document the user does not have (issue 37)
    text = s.describe()
    assert text.startswith(f"{name}: {s.count} x {s.device_profile.name}") and "GB/s" in text
    jsonschema.validate(_base(name), system_json_schema())


def test_out_of_range_devices_and_other_calls_are_device_errors():
    s = load_system("atlas800-910")
    for bad in (8, -1, True, "0"):
        with pytest.raises(DeviceError, match="out of range"):
            s.link(0, bad)  # type: ignore[arg-type]
    with pytest.raises(DeviceError, match="out of range"):
        s.host_link(8)


def test_load_from_a_yaml_path_with_an_inline_device_profile(tmp_path):
    data = _base("atlas300i-duo")
    data["name"] = "my-duo"
    data["device"] = yaml.safe_load((resources.files("graphexec.runtime") / "profile_data" / "ascend310p.yaml")
                                    .read_text(encoding="utf-8"))
    path = tmp_path / "duo.yml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    s = load_system(path)
    assert s.name == "my-duo" and s.device_profile.name == "ascend310p" and s.link(1, 0).kind == "PCIe"
    assert load_system(s) is s and load_system(str(path)).name == "my-duo"


def _mutated(change) -> dict:
    data = copy.deepcopy(_base())
    change(data)
    return data


@pytest.mark.parametrize("change, expected", [
    (lambda d: d.update(bogus=1), "field 'bogus': unknown field"),
    (lambda d: d["topology"]["intra_group"].update(color="red"), "field 'topology.intra_group.color': unknown field"),
    (lambda d: d["topology"]["groups"][1].__setitem__(3, 8), "field 'topology.groups': device 8 is out of range"),
    (lambda d: d["topology"]["groups"][1].__setitem__(0, 2), "field 'topology.groups': device 2 is listed twice"),
    (lambda d: d["topology"]["groups"][1].pop(), "field 'topology.groups': device 7 is in no group"),
    (lambda d: d["topology"]["groups"].append([]), "field 'topology.groups': a group is empty"),
    (lambda d: d["topology"]["intra_group"].update(bandwidth_gbps=-18.0),
     "field 'topology.intra_group.bandwidth_gbps': Input should be greater than 0"),
    (lambda d: d["host"].update(latency_us=-1), "field 'host.latency_us': Input should be greater than or equal to 0"),
    (lambda d: d["topology"]["inter_group"].update(bandwidth_gbps="20GB/s"),
     "field 'topology.inter_group.bandwidth_gbps'"),
    (lambda d: d["topology"]["intra_group"].update(peer_access="yes"), "field 'topology.intra_group.peer_access'"),
    (lambda d: d["topology"]["intra_group"].update(kind="InfiniBand"), "field 'topology.intra_group.kind'"),
    (lambda d: d["sources"].pop("topology.inter_group.latency_us"),
     "field 'sources': no entry for topology.inter_group.latency_us"),
    (lambda d: d["sources"].update({"topology.foo": "x"}), "field 'sources': entries for unknown fields topology.foo"),
    (lambda d: d["sources"].update(count=" "), "field 'sources': empty entries for count"),
    (lambda d: d["topology"].pop("inter_group"), "field 'topology.inter_group': required with 2 group(s)"),
    (lambda d: d["topology"].update(groups=[list(range(8))]), "field 'topology.inter_group': not allowed"),
    (lambda d: d.update(device="ascend999"), "field 'device': unknown device 'ascend999'"),
    (lambda d: d.update(device={"name": "x"}), "field 'device.ai_cores': required but missing"),
    (lambda d: d.pop("host"), "field 'host': required but missing"),
])
def test_bad_files_fail_on_one_line_naming_the_field(tmp_path, change, expected):
    assert expected in _error(tmp_path, _mutated(change))


def test_unreadable_or_unknown_systems(tmp_path):
    assert "invalid YAML at line" in _error(tmp_path, "name: [")
    assert "expected a mapping" in _error(tmp_path, "- 1\n")
    with pytest.raises(DeviceError, match="unknown system 'nope'; known: atlas300i-duo"):
        load_system("nope")
    with pytest.raises(DeviceError, match="cannot read system profile"):
        load_system(tmp_path / "missing.yaml")
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(DeviceError, match="not a regular file"):
        load_system(tmp_path / "dir.yaml")


def test_schema_file_is_current():
    spec = importlib.util.spec_from_file_location("schemas_generate", ROOT / "schemas" / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    on_disk = (ROOT / "schemas" / "system.schema.json").read_text(encoding="utf-8")
    assert on_disk == generate.render("system.schema.json"), "run: python schemas/generate.py"
    assert json.loads(on_disk) == SystemProfile.model_json_schema()


def test_cli_devices_lists_the_systems():
    run = [sys.executable, str(ROOT / "cli.py"), "devices"]
    text = subprocess.run(run, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "ascend910 " in text.stdout and "systems:" in text.stdout
    assert "atlas800-910: 8 x ascend910" in text.stdout and "groups: [0,1,2,3] [4,5,6,7]" in text.stdout
    doc = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120).stdout)
    assert [s["name"] for s in doc["systems"]] == BUILTINS
    assert doc["systems"][1]["topology"]["groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
