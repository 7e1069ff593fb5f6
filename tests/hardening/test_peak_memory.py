"""Memory is bounded before it is spent: each case runs in a subprocess whose address space is
capped (RLIMIT_AS) a little above what it holds after its imports, so spending more than
the data itself fails there (MemoryError, exit 1) instead of passing slowly.

A cap, not a timing: the refusals must come from headers and declarations with almost no
memory, and what is accepted must be built within ~1.25x of its own size.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from hardening import bad_inputs as B
from hardening.round_two import _bomb

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc (Linux)")

PRELUDE = """
import json, resource, sys
sys.path[:0] = [{root!r}, {tests!r}]
import numpy as np
import cli, graphexec as gx
from graphexec.cli import files as _cli_files

def vm_size():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024

cap = vm_size() + {extra}
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
"""


def capped(body: str, extra: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``body`` after the imports with the address space capped ``extra`` bytes above them."""
    code = PRELUDE.format(root=str(ROOT), tests=str(ROOT / "tests"), extra=extra) + body
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def run_cli(args: list, extra: int, env: dict[str, str] | None = None) -> tuple[int, str]:
    p = capped(f"rc = cli.main({[str(a) for a in args]!r})\nsys.exit(rc)\n", extra, env)
    return p.returncode, p.stderr


@pytest.fixture(scope="module")
def inflating_npz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2.3 MB .npz whose one member, w, inflates to float32[128x1024x1024] (512 MiB of zeros)."""
    path = tmp_path_factory.mktemp("bomb") / "w.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z, \
            z.open("w.npy", "w", force_zip64=True) as m:
        np.lib.format.write_array_header_1_0(m, {"descr": "<f4", "fortran_order": False, "shape": (128, 1024, 1024)})
        block = bytes(16 * MiB)
        for _ in range(32):
            m.write(block)
    assert path.stat().st_size < 4 * MiB
    return path


def _yaml_const(folder: Path, shape: str) -> Path:
    text = B.yaml_graph("  - {name: act, op: Relu, inputs: [x], outputs: [y]}\n",
                        {"shape: [2, 3]}\n": f"shape: [2, 3]}}\n  w: {{dtype: float32, shape: {shape}, file: w.npz}}\n"})
    return B.write(folder, "g.yaml", text + "  - {name: keep, op: Relu, inputs: [w], outputs: [z]}\n")


def test_alias_bomb_is_refused_within_64_mib(tmp_path):
    rc, err = run_cli(["validate", B.write(tmp_path, "g.yaml", B.RELU_YAML + _bomb())], 64 * MiB)
    assert rc == 2 and "aliases expand this node to 597871 nodes" in err and err.count("\n") == 1, err


def test_npz_that_inflates_is_refused_from_its_header(inflating_npz, tmp_path):
    """The member's header says 512 MiB; the YAML says [2, 3]: refused before inflating (cap 64 MiB)."""
    os.link(inflating_npz, tmp_path / "w.npz")  # a link inside the folder (a symlink out would be refused)
    rc, err = run_cli(["validate", _yaml_const(tmp_path, "[2, 3]")], 64 * MiB)
    assert (rc, err.split(": ", 1)[1]) == (2, "tensor 'w': w.npz holds shape [128, 1024, 1024], "
                                              "the tensor is declared [2, 3]\n"), err


def test_npz_past_the_host_budget_is_refused_from_its_header(inflating_npz, tmp_path):
    os.link(inflating_npz, tmp_path / "w.npz")  # a link inside the folder (a symlink out would be refused)
    rc, err = run_cli(["validate", _yaml_const(tmp_path, "[128, 1024, 1024]")], 64 * MiB,
                      {"GRAPHEXEC_HOST_BUDGET": str(256 * MiB)})
    assert rc == 2 and err.endswith("tensor 'w': file 'w.npz': its header declares float32[128x1024x1024], which "
                                    "needs 536870912 bytes, more than the host budget of 268435456 bytes "
                                    "(GRAPHEXEC_HOST_BUDGET)\n"), err


def test_npz_within_the_budget_loads_once(inflating_npz, tmp_path):
    """Accepted, the 512 MiB constant is read into one array: the cap is 1.25x its size."""
    os.link(inflating_npz, tmp_path / "w.npz")  # a link inside the folder (a symlink out would be refused)
    p = capped(f"g = gx.load({str(_yaml_const(tmp_path, '[128, 1024, 1024]'))!r})\n"
               "print(json.dumps(int(g.values['w'].const.nbytes)))\n", 640 * MiB)
    assert p.returncode == 0 and json.loads(p.stdout) == 512 * MiB, p.stderr[-2000:]


def test_npy_header_of_4_tib_is_refused(tmp_path):
    with open(tmp_path / "x.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (2**40,)})
    rc, err = run_cli(["run", B.write(tmp_path, "m.onnx", B.relu_model()), "--input", f"x={tmp_path / 'x.npy'}"],
                      64 * MiB)
    assert rc == 2 and "its header declares float32[1099511627776], which needs 4398046511104 bytes" in err, err


def test_input_file_is_read_once_in_its_dtype(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((64, 1024, 1024), np.float32))  # 256 MiB
    p = capped(f"a = _cli_files.read_input('x', {str(tmp_path / 'x.npy')!r})\nprint(a.nbytes)\n", 320 * MiB)
    assert p.returncode == 0 and int(p.stdout) == 256 * MiB, p.stderr[-2000:]


def test_default_feeds_are_built_in_their_dtype(tmp_path):
    """256 MiB of float32 defaults under a 320 MiB cap: a float64 ramp first would need 768 MiB."""
    path = B.write(tmp_path, "m.onnx", B.model([helper.make_node("Relu", ["x"], ["y"])], shape=[64, 1024, 1024]))
    p = capped(f"f = gx.default_feeds(gx.load({str(path)!r}))['x']\n"
               "print(json.dumps([f.dtype.name, int(f.nbytes), float(f.reshape(-1)[-1])]))\n", 320 * MiB)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout) == ["float32", 256 * MiB, float(np.float32((64 * MiB - 1) / (64 * MiB)))]


def test_default_feed_past_the_host_budget_is_refused(tmp_path):
    path = B.write(tmp_path, "m.onnx", B.model([helper.make_node("Relu", ["x"], ["y"])], shape=[64, 1024, 1024]))
    rc, err = run_cli(["run", path], 64 * MiB, {"GRAPHEXEC_HOST_BUDGET": str(128 * MiB)})
    assert (rc, err) == (2, "graphexec: error: input 'x' float32[64x1024x1024] needs 268435456 bytes, more than the "
                            "host budget of 134217728 bytes (GRAPHEXEC_HOST_BUDGET)\n")


def test_the_cap_is_real(tmp_path):
    """The harness itself: spending past the cap fails, so the passes above mean something."""
    p = capped("np.ones(96 << 20, np.uint8)\n", 64 * MiB)
    assert p.returncode == 1 and "MemoryError" in p.stderr


def test_a_run_holds_about_twice_its_data(tmp_path):
    """graphexec run of a Relu on a 128 MiB input file (data: 128 MiB in, 128 MiB out) under
    a cap of 2.25x the data above the imports: the host arrays plus their copies in the
    emulated HBM. It used to need one more full-size array (Relu's cached zeros)."""
    path = B.write(tmp_path, "m.onnx", B.model([helper.make_node("Relu", ["x"], ["y"])], shape=[32, 1024, 1024]))
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((32, 1024, 1024)).astype(np.float32))
    rc, err = run_cli(["run", path, "--input", f"x={tmp_path / 'x.npy'}"], 576 * MiB)
    assert rc == 0, err[-2000:]
