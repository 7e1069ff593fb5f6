"""Reading .npy and .npz array files a model or a command line names, header first.

The header says the dtype and shape, so what the data would cost is known before a byte
of it is read: a 4 TiB claim, an object array (a pickle) or a 2 MB .npz that inflates to
gigabytes is refused from the header, and only then is the data read, once, in its dtype.
"""

from __future__ import annotations

import math
import os
import zipfile
from dataclasses import dataclass
from typing import IO

import numpy as np

from graphexec._limits import over_budget
from graphexec.errors import GraphExecError

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
PICKLE = "holds Python objects, which are not loaded; save a numeric array"


class ArrayFileError(GraphExecError):
    """An array file cannot be read; the message says why, the caller says which file."""


@dataclass(frozen=True, slots=True)
class Header:
    """What an array file's header declares: enough to price it before reading it."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize  # Python ints: a hostile shape cannot wrap

    def describe(self) -> str:
        return f"{self.dtype}[{'x'.join(map(str, self.shape))}]"


def header(path: str | os.PathLike[str], key: str | None = None, archive: bool = True,
           hbm: tuple[str, int] | None = None) -> Header:
    """The header of the .npy file ``path`` (or of array ``key`` in the .npz ``path``),
    refused if it holds objects or needs more than the host budget (or ``hbm``)."""
    with _open(path) as f:
        magic = f.read(6)
        if magic[:4] == ZIP_MAGIC[:4] and archive:
            return _member_header(path, key, hbm)
        if magic != NPY_MAGIC:
            kinds = ".npy or .npz" if archive else ".npy"
            raise ArrayFileError(f"not a {kinds} array file (write one with numpy.save"
                                 f"{' or numpy.savez' if archive else ''})")
        f.seek(0)
        return _checked(_read_header(f), hbm)


def read(path: str | os.PathLike[str], key: str | None = None) -> np.ndarray:
    """The data of an array file whose :func:`header` was accepted, read in its own dtype."""
    kind = ".npy"
    try:
        with _open(path) as f:
            if f.read(4) == ZIP_MAGIC[:4]:
                kind = ".npz"
                with zipfile.ZipFile(path) as z, z.open(_member(z, key)) as m:
                    return np.lib.format.read_array(m, allow_pickle=False)
            f.seek(0)
            return np.lib.format.read_array(f, allow_pickle=False)
    except ValueError as e:
        raise ArrayFileError(PICKLE if "pickle" in str(e) else f"not a readable {kind} array file ({e})") from None
    except (OSError, EOFError, zipfile.BadZipFile) as e:
        raise ArrayFileError(f"not a readable {kind} array file ({e or 'truncated'})") from None


def _open(path: str | os.PathLike[str]) -> IO[bytes]:
    if os.path.exists(path) and not os.path.isfile(path):  # a pipe would block, a device never end
        raise ArrayFileError("not a regular file")
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise ArrayFileError("no such file") from None
    except OSError as e:
        raise ArrayFileError(f"cannot read: {e.strerror or e}") from None


def _read_header(f: IO[bytes]) -> Header:
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    except (ValueError, EOFError, OSError, SyntaxError) as e:
        raise ArrayFileError(f"not a readable array file (its header: {e})") from None
    return Header(tuple(int(d) for d in shape), np.dtype(dtype), bool(fortran))


def _checked(h: Header, hbm: tuple[str, int] | None) -> Header:
    if h.dtype.hasobject:
        raise ArrayFileError(PICKLE)
    problem = over_budget(h.nbytes, hbm)
    if problem:
        raise ArrayFileError(f"its header declares {h.describe()}, which {problem}")
    return h


def _member(z: zipfile.ZipFile, key: str | None) -> str:
    names = [n.removesuffix(".npy") for n in z.namelist()]
    if key is None:
        if len(names) != 1:
            raise ArrayFileError(f"holds {len(names)} arrays; name one with key")
        key = names[0]
    if key not in names:
        raise ArrayFileError(f"has no array {key!r}; it has {', '.join(names) or 'none'}")
    return z.namelist()[names.index(key)]


def _member_header(path: str | os.PathLike[str], key: str | None, hbm: tuple[str, int] | None) -> Header:
    try:
        with zipfile.ZipFile(path) as z, z.open(_member(z, key)) as m:
            return _checked(_read_header(m), hbm)  # only the member's first bytes are inflated
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, EOFError) as e:
        raise ArrayFileError(f"not a readable .npz file ({e})") from None
