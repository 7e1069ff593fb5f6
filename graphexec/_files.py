"""Output files are written whole or not at all: a temporary name in the same folder, then a rename.

A failed run therefore leaves no partial file and keeps whatever the output held before.
"""

from __future__ import annotations

import os
import pickle
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, NoReturn, Sequence, TypeVar

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


T = TypeVar("T")
ASIDE_MIN_NODES = 5_000   # onnx's inference takes ~7 us a node, its version converter grows faster: below
                          # this a call holds the interpreter for tens of milliseconds at most


def interruptible(call: Callable[[], T], big: bool) -> T:
    """``call()``, stoppable by SIGINT and SIGTERM even while it runs in C (onnx's shape inference
    and version converter hold the GIL for the whole call, so no Python signal handler runs, and a
    worker thread would not help). A ``big`` call runs in a forked child; the parent waits on a
    pipe, where a signal's handler runs at once: its exception (KeyboardInterrupt, Terminated)
    kills the child and goes on up, with nothing written. The child sends back the result or the
    exception, pickled, and leaves by ``os._exit`` (no exit hook of the parent's runs twice).
    Small calls, other threads and systems without fork call directly."""
    if not big or not hasattr(os, "fork") or threading.current_thread() is not threading.main_thread():
        return call()
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:   # no memory or processes left for a child: the call, uninterruptible, as before
        os.close(r)
        os.close(w)
        return call()
    if pid == 0:
        _child(call, r, w)
    os.close(w)
    try:
        data = _read_all(r)
    finally:
        os.close(r)
        _reap(pid)
    if not data:
        raise RuntimeError("the process running a long onnx call ended without a result")
    value = pickle.loads(data[1:])
    if data[:1] == b"E":
        raise value
    return value


def _child(call: Callable[[], object], r: int, w: int) -> NoReturn:
    """In the forked child: the call's result (b'R') or exception (b'E'), pickled, down ``w``."""
    try:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_DFL)
        os.close(r)
        try:
            out = b"R" + pickle.dumps(call(), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001  (handed to the parent, which raises it)
            try:
                out = b"E" + pickle.dumps(e)
            except Exception:  # noqa: BLE001  (an exception that does not pickle: its text)
                out = b"E" + pickle.dumps(RuntimeError(f"{type(e).__name__}: {e}"))
        view = memoryview(out)
        while view:
            view = view[os.write(w, view):]
    finally:
        os._exit(0)


def _read_all(fd: int) -> bytes:
    """Everything until the writer closes; a signal's handler runs inside os.read (PEP 475)."""
    parts = []
    while chunk := os.read(fd, 1 << 20):
        parts.append(chunk)
    return b"".join(parts)


def _reap(pid: int) -> None:
    """The child ended, or is ended now (the parent stops waiting on a signal)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except ChildProcessError:
        pass
