"""Nothing half-written: every output goes to a temporary name and is renamed, so a failed
run leaves no partial file and an output that existed before keeps its bytes."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import cli
import graphexec.profiling.export as profile_export
import graphexec.frontend.convert as convert
from hardening import bad_inputs as B
from hardening.test_corpus import run_cli

OLD = b"an output from an earlier run"


class Boom(RuntimeError):
    pass


def _fail_after_writing_some(*args, **kwargs) -> None:
    """A writer that dies halfway: part of the bytes are on disk (its path argument) when it raises."""
    path = next(a for a in args if isinstance(a, (str, Path)))
    with open(path, "wb") as f:
        f.write(b"half")
    raise Boom("disk gone")


def _boom(*args, **kwargs) -> None:
    raise Boom("disk gone")


def _internal_error(argv: list, capsys: pytest.CaptureFixture) -> None:
    """Run the CLI, which must report the injected failure as an internal error (exit 1)."""
    rc, _, err = run_cli(argv, capsys)
    assert (rc, err) == (1, "graphexec: internal error: Boom: disk gone (set GRAPHEXEC_DEBUG=1 for a traceback)\n")


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return B.write(tmp_path, "relu.onnx", B.relu_model())


@pytest.mark.parametrize("option,name", [("--save", "out.npz"), ("--trace", "trace.json")])
def test_failed_write_keeps_the_old_file(option, name, model, tmp_path, monkeypatch, capsys):
    out = B.write(tmp_path, name, OLD)
    if option == "--save":
        monkeypatch.setattr(np, "savez", _boom)
    else:
        monkeypatch.setattr(json, "dumps", _boom)
    _internal_error(["run", model, option, out], capsys)
    assert out.read_bytes() == OLD
    assert _listing(tmp_path) == sorted(["relu.onnx", name])


@pytest.mark.parametrize("option,name", [("--save", "out.npz"), ("--trace", "trace.json"),
                                         ("--profile", "prof")])
def test_bad_input_leaves_outputs_alone(option, name, model, tmp_path, capsys):
    np.save(tmp_path / "bad.npy", np.zeros((5,), np.float32))
    out = tmp_path / name
    if name == "prof":
        out.mkdir()
        (out / "timeline.json").write_bytes(OLD)
    else:
        out.write_bytes(OLD)
    rc, _, err = run_cli(["run", model, "--input", f"x={tmp_path / 'bad.npy'}", option, out], capsys)
    assert rc == 2 and err.count("\n") == 1
    assert (out / "timeline.json" if name == "prof" else out).read_bytes() == OLD
    assert _listing(tmp_path) == sorted(["relu.onnx", "bad.npy", name])


def test_save_trace_profile_written_whole_with_usual_modes(model, tmp_path, capsys):
    save, trace, prof = tmp_path / "o.bin", tmp_path / "t.json", tmp_path / "prof"
    rc, _, err = run_cli(["run", model, "--save", save, "--trace", trace, "--profile", prof], capsys)
    assert rc == 0, err
    assert np.load(save)["y"].shape == (2, 3)  # no .npz appended to a name that lacks it
    assert json.loads(trace.read_text())["traceEvents"]
    assert _listing(prof) == ["op_statistic.csv", "op_summary.csv", "timeline.json"]
    umask = os.umask(0)
    os.umask(umask)
    for path, mode in ((save, 0o666), (trace, 0o666), (prof, 0o777)):
        assert stat.S_IMODE(path.stat().st_mode) == mode & ~umask, path
    assert _listing(tmp_path) == ["o.bin", "prof", "relu.onnx", "t.json"]


def test_failed_profile_keeps_the_old_folder(model, tmp_path, monkeypatch, capsys):
    prof = tmp_path / "prof"
    prof.mkdir()
    for name in profile_export.FILES:
        (prof / name).write_bytes(OLD)
    monkeypatch.setattr(profile_export, "write_csv", _fail_after_writing_some)
    _internal_error(["run", model, "--profile", prof], capsys)
    assert all((prof / name).read_bytes() == OLD for name in profile_export.FILES)
    assert _listing(tmp_path) == ["prof", "relu.onnx"]


@pytest.mark.parametrize("target", ["out.onnx", "out.yaml"])
def test_failed_convert_keeps_the_old_files(target, tmp_path, monkeypatch, capsys):
    src = B.write(tmp_path, "big.onnx", B.small_models()["mlp"])
    monkeypatch.setattr(convert, "INLINE_MAX", 4)  # the 3x3 weight goes to a .npz beside the YAML
    out = B.write(tmp_path, target, OLD)
    npz = B.write(tmp_path, "out.npz", OLD)
    monkeypatch.setattr(convert.onnx, "save", _fail_after_writing_some)
    monkeypatch.setattr(convert, "yaml_text", _boom)
    _internal_error(["convert", src, out], capsys)
    assert out.read_bytes() == OLD and npz.read_bytes() == OLD  # the .npz is not renamed in alone
    assert _listing(tmp_path) == sorted(["big.onnx", target, "out.npz"])


def test_convert_writes_yaml_and_npz_together(tmp_path, monkeypatch, capsys):
    src = B.write(tmp_path, "big.onnx", B.small_models()["mlp"])
    monkeypatch.setattr(convert, "INLINE_MAX", 4)
    rc, out, err = run_cli(["convert", src, tmp_path / "out.yaml"], capsys)
    assert rc == 0, err
    assert _listing(tmp_path) == ["big.onnx", "out.npz", "out.yaml"]
    assert "w" in np.load(tmp_path / "out.npz").files


def test_unwritable_folder_is_one_line(model, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user that writes anywhere (root)")
        rc, _, err = run_cli(["run", model, "--save", locked / "o.npz"], capsys)
        assert (rc, err) == (2, f"graphexec: error: {locked / 'o.npz'}: cannot write: Permission denied\n")
    finally:
        locked.chmod(0o700)


def test_disk_full_is_one_line_and_leaves_nothing(model, tmp_path, monkeypatch, capsys):
    out = B.write(tmp_path, "o.npz", OLD)

    def full(file, **arrays) -> None:
        file.write(b"half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(np, "savez", full)
    rc, _, err = run_cli(["run", model, "--save", out], capsys)
    assert (rc, err) == (2, f"graphexec: error: {out}: cannot write: No space left on device\n")
    assert out.read_bytes() == OLD and _listing(tmp_path) == ["o.npz", "relu.onnx"]


STALL = """
import sys, time
sys.path[:0] = [{root!r}]
import cli
import graphexec.profiling.export as export

def stall(*args, **kwargs):
    open({ready!r}, "w").close()   # the temporary profile folder exists now
    time.sleep(60)

export.write_csv = stall
sys.exit(cli.main(["run", {model!r}, "--profile", {prof!r}]))
"""


@pytest.mark.parametrize("sig,rc,line", [(signal.SIGTERM, 143, "graphexec: terminated\n"),
                                         (signal.SIGINT, 130, "graphexec: interrupted\n")])
def test_signal_during_profile_leaves_no_temporary_folder(sig, rc, line, model, tmp_path):
    """SIGTERM unwinds as Ctrl-C does: the half-written profile folder is removed, nothing else is left."""
    ready = tmp_path / "ready"
    code = STALL.format(root=str(Path(cli.__file__).parent), ready=str(ready), model=str(model),
                        prof=str(tmp_path / "prof"))
    p = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        for _ in range(1200):
            if ready.exists() or p.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists(), p.stderr.read() if p.poll() is not None else "the run never reached the profile"
        assert [n for n in _listing(tmp_path) if n.startswith(".prof-")]  # the temporary folder is there
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert (p.returncode, err) == (rc, line)
    assert _listing(tmp_path) == ["ready", "relu.onnx"]
