"""Writing outputs so that a failure never leaves a half-written or mixed result.

Every file ptplan writes goes through here:

* :func:`write_atomic` writes one file: a temporary file in the same directory, flushed and
  synced, then renamed over the target (``os.replace`` is atomic on POSIX within a file
  system). A failure part-way (a full disk, a signal) leaves the old file as it was.
* :func:`write_tree` writes a set of files under one root (a render): every name is confined to
  the root, every file is written to a temporary first, and only when all are written are they
  renamed into place; should a rename fail, the files already replaced are restored from their
  backups, so the tree holds all of the new files or none of them.
* Writing through a symbolic link, or over a file the command read as its input, is refused
  unless ``force`` is given (then the link itself is replaced, never its target).

Refusals raise :class:`~ptplan.core.errors.InputError` (exit 2) naming the path and the fix.

The command line sets, for the command being run, whether ``--force`` was given and which paths
are its inputs (:func:`command_scope`); every write made under it (``-o``, ``--chart``, a
render) obeys them without each writer passing them along.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath

from ptplan.core.errors import InputError

__all__ = ["command_scope", "confine", "write_atomic", "write_tree"]

_SCOPE: contextvars.ContextVar[tuple[bool, tuple[Path, ...]]] = contextvars.ContextVar(
    "ptplan_write_scope", default=(False, ()))


@contextlib.contextmanager
def command_scope(force: bool, inputs: Iterable[Path]) -> Iterator[None]:
    """While a command runs: its ``--force`` and its input files, for every write it makes."""
    token = _SCOPE.set((force, tuple(Path(p) for p in inputs)))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def _with_scope(force: bool, inputs: Iterable[Path]) -> tuple[bool, list[Path]]:
    scope_force, scope_inputs = _SCOPE.get()
    return force or scope_force, [*(Path(p) for p in inputs), *scope_inputs]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _check_target(path: Path, option: str, inputs: Iterable[Path], force: bool) -> None:
    if force:
        return
    if path.is_symlink():
        raise InputError(f"{option}: {str(path)!r} is a symbolic link; ptplan does not write "
                         "through links: give the real path, or --force to replace the link")
    for src in inputs:
        if _same_file(path, Path(src)):
            raise InputError(f"{option}: {str(path)!r} is also an input of this command; "
                             "writing it would destroy the input: choose another path, or "
                             "--force")


def _temp_beside(path: Path) -> tuple[int, str]:
    return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)


def _write_temp(path: Path, data: bytes) -> str:
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if path.exists() and not path.is_symlink():
            with contextlib.suppress(OSError):
                os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def write_atomic(path: Path, data: str | bytes, *, option: str = "-o",
                 inputs: Iterable[Path] = (), force: bool = False) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically.

    Raises :class:`InputError` for a link or an input as the target (unless ``force``) and for
    an unwritable path; the old file, if any, is then unchanged.
    """
    path = Path(path)
    force, inputs = _with_scope(force, inputs)
    _check_target(path, option, inputs, force)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _write_temp(path, _bytes(data))
        try:
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise InputError(f"{option}: cannot write {str(path)!r} ({exc.strerror or exc}); "
                         "nothing was changed: choose a writable path") from None


def confine(root: Path, name: str, *, what: str = "file name") -> Path:
    """``root / name``, refused unless it stays under ``root``.

    ``name`` is a relative POSIX path taken from a spec, a plan or a campaign: an absolute
    path, a ``..`` part, a backslash, a NUL or a control character is refused, and so is a
    path whose resolved location (following links already on disk) leaves ``root``.
    """
    bad = (not name or "\x00" in name or "\\" in name
           or any(ord(c) < 32 or c == "\x7f" for c in name))
    parts = PurePosixPath(name).parts
    if (bad or PurePosixPath(name).is_absolute() or ".." in parts
            or any(p in ("", ".") for p in name.split("/"))):
        raise InputError(f"{what} {name!r} would be written outside the output directory; "
                         "use a relative name of letters, digits, '.', '-' and '_' without "
                         "'..'")
    base = Path(root).resolve()
    target = (base / name).resolve()
    if not target.is_relative_to(base):
        raise InputError(f"{what} {name!r} resolves to {str(target)!r}, outside the output "
                         f"directory {str(base)!r} (a link on the way?); remove the link or "
                         "choose another -o")
    return base / name


def write_tree(root: Path, files: Mapping[str, str | bytes], *, option: str = "-o",
               inputs: Iterable[Path] = (), force: bool = False) -> list[Path]:
    """Write every ``files[name]`` under ``root``: all of them or, on failure, none.

    Returns the paths written, in the order given. Names are confined to ``root``
    (:func:`confine`); a link or an input among the targets is refused unless ``force``.
    """
    root = Path(root)
    force, inputs = _with_scope(force, inputs)
    if root.is_symlink() and not force:
        raise InputError(f"{option}: {str(root)!r} is a symbolic link; ptplan does not write "
                         "through links: give the real directory, or --force to follow it")
    targets = [(confine(root, name), data) for name, data in files.items()]
    for path, _ in targets:
        _check_target(path, option, inputs, force)
    temps: list[tuple[Path, str]] = []
    backups: list[tuple[Path, str | None]] = []
    try:
        for path, data in targets:
            path.parent.mkdir(parents=True, exist_ok=True)
            temps.append((path, _write_temp(path, _bytes(data))))
        for path, tmp in temps:
            backup = None
            if path.exists() or path.is_symlink():
                fd, backup = _temp_beside(path)
                os.close(fd)
                try:
                    os.replace(path, backup)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(backup)
                    raise
            backups.append((path, backup))
            os.replace(tmp, path)
    except OSError as exc:
        _roll_back(temps, backups)
        raise InputError(f"{option}: cannot write under {str(root)!r} ({exc.strerror or exc}); "
                         "nothing was changed: choose a writable directory") from None
    except BaseException:
        _roll_back(temps, backups)
        raise
    for _, backup in backups:
        if backup is not None:
            with contextlib.suppress(OSError):
                os.unlink(backup)
    return [path for path, _ in targets]


def _roll_back(temps: list[tuple[Path, str]], backups: list[tuple[Path, str | None]]) -> None:
    """Undo a partial :func:`write_tree`: restore replaced files, drop new ones and temps."""
    for path, backup in reversed(backups):
        with contextlib.suppress(OSError):
            if backup is not None:
                os.replace(backup, path)
            else:
                os.unlink(path)
    for _, tmp in temps:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
