"""Output files are written whole or not at all: a temporary name in the same folder, then a rename.

A failed run therefore leaves no partial file and keeps whatever the output held before.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from graphexec.errors import OutputError

Writer = Callable[[Path], object]  # what it returns (e.g. write_text's count) is ignored


def check_output(path: str | os.PathLike[str], what: str = "") -> Path:
    """The output ``path``, after checking it can be written (its folder exists, it is no folder).

    ``what`` (an option such as "--save") starts the message when given.
    """
    p = Path(path)
    folder = p.absolute().parent
    where = f"{what} {path}" if what else str(path)
    if p.is_dir():
        raise OutputError(f"{where}: is a folder; give a file name")
    if not folder.is_dir():
        raise OutputError(f"{where}: folder {folder} does not exist")
    return p


def write_atomic(outputs: Sequence[tuple[str | os.PathLike[str], Writer]]) -> None:
    """Write every (path, writer) to a temporary file, then rename them all into place.

    ``writer`` gets the temporary path, which keeps the output's suffix. Nothing is
    renamed unless every writer succeeded, so files that belong together (a YAML graph
    and its .npz) stay consistent.
    """
    temps: list[tuple[Path, Path]] = []
    try:
        for path, write in outputs:
            p = check_output(path)
            fd, name = tempfile.mkstemp(dir=p.absolute().parent, prefix=".graphexec-", suffix=p.suffix)
            os.close(fd)
            temps.append((Path(name), p))
            write(Path(name))
            os.chmod(name, 0o666 & ~_umask())  # mkstemp makes 0600; an output gets the usual mode
        for tmp, p in temps:
            os.replace(tmp, p)
    except OSError as e:
        where = temps[-1][1] if temps else outputs[0][0]
        raise OutputError(f"{where}: cannot write: {e.strerror or e}") from None
    finally:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)


def write_one(path: str | os.PathLike[str], write: Writer) -> None:
    """:func:`write_atomic` for a single file."""
    write_atomic([(path, write)])


def folder_mode() -> int:
    """The mode a new folder gets under the current umask (mkdtemp makes 0700)."""
    return 0o777 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
