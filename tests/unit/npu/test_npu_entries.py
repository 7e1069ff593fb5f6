"""Every public eager entry's arguments are checked from its annotations (runtime/argcheck.py,
the mechanism ACL's entries use), and a parameter it cannot check is an error at definition."""

from __future__ import annotations

import inspect

import pytest

import graphexec.npu as npu
from graphexec.errors import AclError
from graphexec.runtime.argcheck import checking


def _entries():
    for name in npu.__all__:
        fn = getattr(npu, name)
        if inspect.isfunction(fn):
            yield f"npu.{name}", fn
    for cls in (npu.Tensor, npu.Stream, npu.Event):
        for name in dir(cls):
            fn = inspect.getattr_static(cls, name)
            if not name.startswith("_") and inspect.isfunction(fn):
                yield f"{cls.__name__}.{name}", fn


def test_every_entry_with_a_checkable_parameter_is_checked():
    for name, fn in _entries():
        params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        if any(p.annotation not in ("Any", inspect.Parameter.empty) for p in params):
            assert hasattr(fn, "__wrapped__"), f"{name} is not checked"


def test_a_wrong_kind_is_the_acl_code_naming_entry_and_parameter():
    x = npu.ones(2, 3, device="npu")
    with pytest.raises(AclError, match=r"^ACL_ERROR_INVALID_PARAM \(100000\): npu.sum: x must be a Tensor, got None$"):
        npu.sum(None)
    with pytest.raises(AclError, match=r"Tensor.sum: keepdim must be a bool, got 'yes'"):
        x.sum(keepdim="yes")
    with pytest.raises(AclError, match=r"Tensor.expand: each of \*sizes must be an int or a list or tuple of ints"):
        x.expand(2, "3")
    with pytest.raises(AclError, match=r"npu.cat: tensors must be a list or tuple of Tensors, got \[1, 2\]"):
        npu.cat([1, 2])
    with pytest.raises(AclError, match=r"Tensor.clamp: 1180591620717411303424 is not a int64 value"):
        x.long().clamp(2**70)
    assert x.sum(dim=[0, 1]).item() == 6.0 and x.permute((1, 0)).shape == (3, 2) == x.permute(1, 0).shape


def test_a_parameter_without_a_check_is_refused_when_the_entry_is_made():
    def f(a, b: int) -> None: ...

    def g(a: "Weird[int]") -> None: ...   # noqa: F821

    with pytest.raises(TypeError, match="no argument check"):
        checking(f, "f")
    with pytest.raises(TypeError, match="no argument check"):
        checking(g, "g")
    assert checking(lambda self: None, "h").__name__ == "<lambda>"


def test_values_past_int64_or_the_rank_are_refused_at_the_call():
    """Found by the eager survey's other seeds: OverflowError from numpy for these."""
    x = npu.ones(2, 3, device="npu")
    for call, line in [(lambda: x.sum(2**70), "Tensor.sum: dim 1180591620717411303424 is out of range"),
                       (lambda: x.mean([0, 5]), "Tensor.mean: dim 5 is out of range for a tensor of 2 dims"),
                       (lambda: x.unsqueeze(-4), "Tensor.unsqueeze: dim -4 is out of range"),
                       (lambda: x.expand(-5, 3), r"Tensor.expand: sizes must be -1 or from 0 to 2\*\*63-1, got \[-5, 3\]"),
                       (lambda: x.add([1, 2, 3], 2**70), "Tensor.add: \\[1, 2, 3\\] times alpha")]:
        with pytest.raises(AclError, match=r"^ACL_ERROR_INVALID_PARAM \(100000\): " + line):
            call()
    assert x.unsqueeze(-3).shape == (1, 2, 3) and x.expand(4, -1, -1).shape == (4, 2, 3)
