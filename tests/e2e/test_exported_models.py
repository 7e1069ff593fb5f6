"""graphexec against onnxruntime on the exported-model corpus (``tests/exported_models.py``):
decoder LLMs with past key values (prompt and decode steps), encoder/decoder pairs, a Whisper
encoder, vision backbones, detection, a diffusers UNet, a scripted greedy loop, a model exported
with ``export_modules_as_functions``, audio front ends and classical ML with and without ZipMap,
written by torch.onnx (TorchScript and dynamo), skl2onnx and onnxmltools. Every output, maps
and sequences included, is compared at 1 and 4 streams; a model that cannot be exported here is
skipped with the reason. Nothing is xfail: the corpus is kept at 100%.
"""

from __future__ import annotations

import functools

import exported_models as em
import numpy as np
import pytest
from e2e.test_real_models import _one_line, _ort_session, compare_output

import graphexec as gx

ort = pytest.importorskip("onnxruntime")


@functools.cache
def _reference(name: str) -> tuple[str, dict, dict]:
    """(path or skip reason, feeds, onnxruntime's outputs) of one entry, once for both stream counts."""
    entry = next(e for e in em.MANIFEST if e.name == name)
    path = em.model_path(entry)
    if path is None:
        return "", {}, {"": em.reason(entry)}
    feeds = em.make_feeds(entry, path)
    sess = _ort_session(path)
    return str(path), feeds, dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def compare_value(name: str, ours: object, ref: object, check) -> str | None:   # type: ignore[no-untyped-def]
    """compare_output, extended to ZipMap's sequences of maps and to sequences of tensors."""
    if isinstance(ref, list):
        if not isinstance(ours, list) or len(ours) != len(ref):
            return f"output {name!r}: {type(ours).__name__} of {len(ours) if isinstance(ours, list) else '?'}, " \
                   f"onnxruntime gives a list of {len(ref)}"
        for k, (a, b) in enumerate(zip(ours, ref)):
            if (p := compare_value(f"{name}[{k}]", a, b, check)):
                return p
        return None
    if isinstance(ref, dict):
        if not isinstance(ours, dict) or sorted(ours) != sorted(ref):
            return f"output {name!r}: keys {sorted(ours) if isinstance(ours, dict) else ours!r}, " \
                   f"onnxruntime {sorted(ref)}"
        return compare_output(name, np.array([ours[k] for k in ref]), np.array([ref[k] for k in ref]), check)
    return compare_output(name, np.asarray(ours), np.asarray(ref), check)


@pytest.mark.slow
@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("entry", em.MANIFEST, ids=[e.name for e in em.MANIFEST])
def test_matches_onnxruntime(entry: em.Made, streams: int):
    path, feeds, ref = _reference(entry.name)
    if not path:
        pytest.skip(ref[""])
    try:
        ours = gx.Session(gx.load(path), streams=streams).run(feeds).outputs
    except Exception as e:  # noqa: BLE001 - the failure is the report: which op, which error
        pytest.fail(f"graphexec: {_one_line(e)}", pytrace=False)
    missing = [n for n in ref if n not in ours]
    assert not missing, f"graphexec gives no output {missing[0]!r} (it gives {sorted(ours)})"
    problems = [p for n in ref if (p := compare_value(n, ours[n], ref[n], entry.check))]
    if problems:
        why = f" [tolerance: {entry.check.why}]" if entry.check.why else ""
        pytest.fail(f"{problems[0]}{' (+%d more outputs)' % (len(problems) - 1) if len(problems) > 1 else ''}{why}",
                    pytrace=False)


def test_every_family_of_the_issue_is_in_the_corpus():
    for family in em.FAMILIES:
        assert em.entries(family), family
    names = {e.name for e in em.MANIFEST}
    assert len(names) == len(em.MANIFEST)
    assert {"gpt2_kv_prompt", "gpt2_kv_decode", "llama_kv_decode", "qwen2_kv_prompt", "whisper_encoder", "vit",
            "swin", "convnext", "efficientnet_b0", "mobilenet_v3_small", "regnet_y_400mf", "fasterrcnn_mobilenet",
            "maskrcnn_resnet18", "detr", "unet2d", "scripted_greedy_loop", "functions_block", "skl_forest",
            "lgbm_zipmap"} <= names
    for e in em.MANIFEST:
        assert e.check.why or (e.check.rtol <= 1e-4 and e.check.atol <= 1e-5 and not e.check.steps), \
            f"{e.name}: a looser tolerance must say why"
        assert e.committed or e.model in em.export_script_models(), e.name
