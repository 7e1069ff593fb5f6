"""Sequences, maps and optionals in ``.npz`` files: the form ``run --save`` writes them in and
``run --input NAME=FILE.npz`` reads them back (documented in the README).

Value NAME, by its type:

- a tensor: the array ``NAME`` (a string tensor as a unicode array);
- a sequence of n values: ``NAME#len`` (an int64 scalar) and each element ``NAME#0`` ..
  ``NAME#<n-1>`` in the form of its own type;
- a map: its keys as one array ``NAME#keys`` (int64 or str), and its values as one array
  ``NAME#values`` when each is a number or a 0-d array (ZipMap's scores), else as a sequence
  under ``NAME#values``;
- an optional: ``NAME#none`` (a bool scalar) when empty, else its value's form under ``NAME``.

Nothing is pickled: every array is a plain numeric or string array (``np.load`` with
``allow_pickle=False`` reads them).
"""

from __future__ import annotations

import zipfile
from numbers import Number
from typing import Any, Iterator, Mapping

import numpy as np

from graphexec._arrays import ArrayFileError, header, read

MAX_DEPTH = 16   # containers nest; a file's keys may not make the reader recurse for ever


def flatten(name: str, value: Any) -> Iterator[tuple[str, np.ndarray]]:
    """The (key, array) pairs of ``value`` under ``name``, in the form above."""
    if value is None:
        yield f"{name}#none", np.array(True)
    elif isinstance(value, (list, tuple)):
        yield f"{name}#len", np.array(len(value), np.int64)
        for i, item in enumerate(value):
            yield from flatten(f"{name}#{i}", item)
    elif isinstance(value, dict):
        yield f"{name}#keys", np.array(list(value), dtype=None if value else np.int64)
        items = list(value.values())
        if all(isinstance(v, Number) or (isinstance(v, np.ndarray) and v.ndim == 0) for v in items):
            yield f"{name}#values", np.array(items, dtype=None if items else np.float32)
        else:
            yield from flatten(f"{name}#values", items)
    else:
        yield name, _plain(np.asarray(value))


def _plain(a: np.ndarray) -> np.ndarray:
    """An object array of strings (string tensors) as a unicode array: savez would pickle it."""
    if a.dtype == object and all(isinstance(x, str) for x in a.flat):
        return a.astype(str)
    return a


def unflatten(arrays: Mapping[str, np.ndarray], name: str, depth: int = 0) -> Any:
    """The value stored under ``name`` in the form above; KeyError naming the key that is missing,
    ValueError for one that is malformed."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{name}: containers nest more than {MAX_DEPTH} deep")
    if name in arrays:
        return arrays[name]
    if f"{name}#none" in arrays:
        return None
    if f"{name}#len" in arrays:
        n = arrays[f"{name}#len"]
        if n.shape != () or n.dtype.kind not in "iu" or int(n) < 0:
            raise ValueError(f"{name}#len: not a count")
        return [unflatten(arrays, f"{name}#{i}", depth + 1) for i in range(int(n))]
    if f"{name}#keys" in arrays:
        keys = arrays[f"{name}#keys"].tolist()
        values = arrays[f"{name}#values"].tolist() if f"{name}#values" in arrays \
            else unflatten(arrays, f"{name}#values", depth + 1)
        if not isinstance(keys, list) or not isinstance(values, list) or len(keys) != len(values):
            raise ValueError(f"{name}: a map needs as many values as keys")
        return dict(zip(keys, values))
    raise KeyError(name)


def read_npz_value(name: str, path: str, hbm: tuple[str, int] | None = None) -> Any:
    """The value ``name`` of the .npz ``path`` in the form above, each array's header checked
    first (no objects, within the host budget); ArrayFileError saying what is wrong."""
    try:
        with zipfile.ZipFile(path) as z:
            keys = [n.removesuffix(".npy") for n in z.namelist()]
    except (OSError, zipfile.BadZipFile) as e:
        raise ArrayFileError(f"not a readable .npz array file ({e})") from None
    mine = [k for k in keys if k == name or k.startswith(f"{name}#")]
    if not mine:
        raise ArrayFileError(f"has no value {name!r} (an array {name!r}, or {name}#len, #keys, #none for a "
                             f"sequence, map or optional); it has {', '.join(keys[:8]) or 'none'}")
    arrays = {}
    for k in mine:
        header(path, k, hbm=hbm)
        arrays[k] = read(path, k)
    try:
        return unflatten(arrays, name)
    except KeyError as e:
        raise ArrayFileError(f"value {name!r}: array {e.args[0]!r} is missing") from None
    except ValueError as e:
        raise ArrayFileError(f"value {name!r}: {e}") from None
