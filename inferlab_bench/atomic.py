"""Writes that cannot hurt, and the path checks they share with request validation.

Every file we write goes through here. A write goes to a fresh temp file beside the
target (created with O_EXCL, so never through a planted link; named before it exists, so a
signal arriving the instant after its creation still finds it to remove), is fsynced, and is
renamed over the target; a rename replaces a symbolic link itself, never the file it points
to. A target that is not a regular file (a device, a FIFO, a socket, a directory, or a link
to one of these) is refused with an ``OutputError`` naming it, and left untouched. The file
gets the mode the user's umask gives any new file (0644 under 022): results, plots, pages and
bundles are published to others; a private 0600 is for secrets, and we write none.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO, TypeVar

from inferlab_bench.errors import OutputError

ProblemFinder = Callable[[Path], "str | None"]
T = TypeVar("T")

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """Yield a binary file that appears at ``path`` only if the block succeeds.

    On any exception the temp file is removed and ``path`` is left untouched, so a
    reader never sees a half-written file under the final name.
    """
    tmp = _temp_beside(path)
    try:
        fd = _create(tmp, path)
        with os.fdopen(fd, "wb") as handle:
            yield handle
            _os_step(path, handle.flush)
            _os_step(path, lambda: os.fsync(handle.fileno()))
        _replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_writer(path) as handle:
        handle.write(data)


@contextlib.contextmanager
def fresh_text_file(path: Path) -> Iterator[TextIO]:
    """A new text file at ``path`` for a live log: visible at once, written as it goes.

    The file is our own fresh inode renamed into place before the first write, so a link
    planted at ``path`` is replaced rather than written through.
    """
    tmp = _temp_beside(path)
    fd = None
    try:
        fd = _create(tmp, path)
        _replace(tmp, path)
    except BaseException:
        if fd is not None:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        yield handle


def open_for_append(path: Path) -> BinaryIO:
    """``path`` opened for appending (created if absent) when it is a regular file; a link,
    FIFO, device or directory planted there is refused naming it, never written through."""
    _os_step(path, lambda: path.parent.mkdir(parents=True, exist_ok=True))
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        kind = "a symbolic link" if path.is_symlink() else None
        raise OutputError(
            path,
            f"is {kind}; appending would write through it" if kind else f"cannot open ({exc})",
            hint="remove it, or name a new or regular file",
        ) from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OutputError(path, f"is {kind_of(mode) or 'not a regular file'}; not appended to")
    return os.fdopen(fd, "ab")


def remove_file(path: Path) -> None:
    """Remove an output of ours that may be stale; anything but a regular file (or a link,
    which goes itself) is refused and left in place, as a write over it would be."""
    refuse_unsafe_target(path)
    _os_step(path, lambda: path.unlink(missing_ok=True))


def refuse_unsafe_target(path: Path) -> None:
    """Raise ``OutputError`` unless ``path`` is absent, a regular file, or a link we may replace."""
    kind = unsafe_target_kind(path)
    if kind is not None:
        raise OutputError(
            path,
            f"is {kind}; only a regular file is ever replaced",
            hint="name a new or regular file; the existing one was left untouched",
        )


def unsafe_target_kind(path: Path) -> str | None:
    """What ``path`` is when writing over it could hurt (a device, FIFO, directory...)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None  # absent, or unreachable: creating the temp file beside it says why
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        try:
            target = os.stat(path).st_mode
        except OSError:
            return None  # a dangling link: the rename replaces the link itself
        kind = kind_of(target)
        return None if kind is None else f"a symbolic link to {kind}"
    return kind_of(mode) or "not a regular file"


def kind_of(mode: int) -> str | None:
    """``"a FIFO"``, ``"a directory"``... for a non-regular ``st_mode``; None for a file."""
    return next((name for test, name in _KINDS if test(mode)), None)


# --- Path checks of request fields (used by protocol's validators). ---


def wire_path_problem(text: str) -> str | None:
    """Why ``text`` cannot be a path at all (empty, NUL, ``..``), else None."""
    if not text.strip():
        return "must not be empty (an empty path would mean the current directory)"
    if "\x00" in text:
        return "must not contain a NUL byte"
    if ".." in Path(text).parts:
        return "must not contain '..' components; give the resolved path"
    return None


def readable_file_problem(path: Path) -> str | None:
    """Why ``path`` is not a regular file we can read (checked without opening it)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"{path}: {_reason(exc)}"
    kind = kind_of(mode)
    if kind is not None:
        return f"{path} is {kind}, expected a regular file"
    if not os.access(path, os.R_OK):
        return f"{path}: not readable (permission denied)"
    return None


def optional_file_problem(path: Path) -> str | None:
    """Like ``readable_file_problem``, but an absent path is fine."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        pass
    return readable_file_problem(path)


def writable_dir_problem(path: Path) -> str | None:
    """Why ``path`` is not a directory we can write in or create (probed, nothing left)."""
    existing = path.absolute()
    while True:
        try:
            mode = os.stat(existing).st_mode
            break
        except (FileNotFoundError, NotADirectoryError):
            if existing.parent == existing:
                return f"{path}: no existing parent directory"
            existing = existing.parent
        except OSError as exc:
            return f"{existing}: {_reason(exc)}"
    here = existing == path.absolute()
    if not stat.S_ISDIR(mode):
        what = kind_of(mode) or "a regular file"
        if here:
            return f"{path} is {what}, expected a directory"
        return f"{path}: its parent {existing} is {what}, expected a directory"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        where = "cannot write in it" if here else f"cannot create it in {existing}"
        return f"{path}: {where} ({_reason(exc)})"
    return None


def os_condition(exc: OSError) -> OutputError:
    """A file-system error that escaped a stage, as an error naming the file and the reason."""
    where = Path(os.fsdecode(exc.filename)) if exc.filename is not None else Path("(a file)")
    return OutputError(
        where,
        f"cannot be used ({_reason(exc)})",
        hint="check the paths in the request: their kind, permissions and free space",
    )


def _reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file or directory"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return (exc.strerror or str(exc)).lower()


# --- Steps shared by the writers. ---


def _temp_beside(path: Path) -> Path:
    """A new temp file's name beside ``path`` (checked and its directory made, not created).

    The name is known before the file exists, so a stop (a signal raised as an exception)
    arriving the instant after it is created still finds it to remove."""
    refuse_unsafe_target(path)
    _os_step(path, lambda: path.parent.mkdir(parents=True, exist_ok=True))
    return path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.part"


def _create(tmp: Path, path: Path) -> int:
    """Create ``tmp`` (never through a link or over a file) with the mode the umask gives."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return _os_step(path, lambda: os.open(tmp, flags, 0o666))


def remove_stale_parts(path: Path) -> list[Path]:
    """Remove the temp files of writes to ``path`` whose process is gone (one killed with
    SIGKILL cannot clean up); the temp file of a write still in progress is left alone."""
    removed = []
    for part in path.parent.glob(f".{path.name}.*.part"):
        owner = part.name[len(path.name) + 2 :].split(".", 1)[0]
        if owner.isdigit() and not _alive(int(owner)):
            with contextlib.suppress(OSError):
                part.unlink()
                removed.append(part)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _replace(tmp: Path, path: Path) -> None:
    refuse_unsafe_target(path)  # again, just before the rename: it may have appeared since
    _os_step(path, lambda: os.replace(tmp, path))


def _os_step(path: Path, step: Callable[[], T]) -> T:
    try:
        return step()
    except OSError as exc:
        raise OutputError(
            path,
            f"cannot be written ({_reason(exc)})",
            hint="check that the directory exists, is writable and has free space",
        ) from exc


def _fsync_dir(directory: Path) -> None:
    # The rename is only durable once the directory entry is on disk too.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
