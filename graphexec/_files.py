"""Output files are written whole or not at all: a temporary name in the same folder, then a rename.

A failed run therefore leaves no partial file and keeps whatever the output held before.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Sequence

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
    if p.exists() and not p.is_file():  # renaming over a device or a pipe would destroy it
        raise OutputError(f"{where}: exists and is not a regular file (a device, a pipe or a socket); "
                          "give a file name")
    if not folder.is_dir():
        raise OutputError(f"{where}: folder {folder} does not exist")
    return p


def inside(folder: str | os.PathLike[str], name: str) -> Path | None:
    """``folder/name`` resolved (symlinks and ``..`` included), or None when that leaves ``folder``.

    A model is untrusted: every path it names must stay in its own folder. The answer does
    not depend on what lies outside it (whether a file exists, or a link there): a name whose
    ``..`` leaves the folder even for a moment is refused before anything is looked up.
    """
    root = Path(folder).resolve()
    rel = Path(name)
    if rel.is_absolute():
        if not rel.is_relative_to(root):
            return None
        rel = rel.relative_to(root)
    depth = 0
    for part in rel.parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            return None
    path = (root / rel).resolve()
    return path if path.is_relative_to(root) else None


def _identity(path: str | os.PathLike[str]) -> tuple:
    """What two names of one file share: its inode when it exists (hard links too), else the real path."""
    try:
        st = os.stat(path)
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", os.path.realpath(path))


def check_targets(outputs: Sequence[tuple[str, str | os.PathLike[str], Sequence[str]]],
                  sources: Sequence[tuple[str, str | os.PathLike[str]]]) -> None:
    """Refuse an output that would replace a file the command reads or another output of it.

    ``outputs``: (option, path, names written inside it: () for a file, the files of a
    folder such as --profile's). ``sources``: (what it is, path), e.g. ("the model", path).
    """
    seen: dict[tuple, str] = {}
    for what, path in sources:
        seen.setdefault(_identity(path), what)
    for option, path, names in outputs:
        written = [Path(path) / n for n in names] if names else [Path(path)]
        for target in written:
            key = _identity(target)
            if key in seen:
                other = seen[key]
                reason = (f"is also the target of {other}; give each output its own name" if other.startswith("-")
                          else f"is {other}; an output may not replace a file the command reads")
                shown = f"{path}" if target == Path(path) else f"{path} (its {target.name})"
                raise OutputError(f"{option} {shown}: {reason}" if option else f"{shown}: {reason}")
            seen[key] = option


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


class Terminated(KeyboardInterrupt):
    """SIGTERM raised where the process is, so that every ``finally`` removing a temporary
    file or folder runs, as it does on Ctrl-C (a KeyboardInterrupt)."""


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread.

    A process forked meanwhile (a pool worker) gets the default action back, so that
    terminating a pool still ends its workers at once.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()

    def unwind(signum: int, frame: object) -> None:
        if os.getpid() != owner:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, unwind)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class SignalStop(BaseException):
    """SIGTERM or SIGINT raised where the process is (``signals_unwind``); a BaseException,
    so that no ``except Exception`` on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def signals_unwind() -> Iterator[None]:
    """Within the block (main thread), the first SIGTERM or SIGINT raises :class:`SignalStop`;
    later ones are ignored while the ``finally`` clauses on the way out remove what was half
    written. The handlers before are restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = (signal.SIGTERM, signal.SIGINT)

    def unwind(signum: int, frame: object) -> None:
        for s in caught:
            signal.signal(s, signal.SIG_IGN)
        raise SignalStop(signum)

    previous = {s: signal.signal(s, unwind) for s in caught}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
