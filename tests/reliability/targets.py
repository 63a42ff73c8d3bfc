"""Things a write could hurt, made in a private temp dir, and a fingerprint of them."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

DEV_NULL = os.makedev(1, 3)


def make_fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def make_device(path: Path) -> Path:
    """A character device like /dev/null, private to the test (needs root; else a FIFO)."""
    if os.geteuid() == 0:
        os.mknod(path, 0o666 | stat.S_IFCHR, DEV_NULL)
    else:
        os.mkfifo(path)
    return path


def make_dir(path: Path) -> Path:
    path.mkdir()
    (path / "keep.txt").write_text("user data\n")
    return path


def make_user_file(path: Path) -> Path:
    path.write_text("the user's own file\n")
    return path


def link_to(maker: Callable[[Path], Path]) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        target = maker(path.with_name(path.name + ".target"))
        path.symlink_to(target)
        return path

    return make


# name -> (maker, refused?) for an output path that must only ever be a regular file.
OUTPUT_KINDS: dict[str, tuple[Callable[[Path], Path], bool]] = {
    "fifo": (make_fifo, True),
    "device": (make_device, True),
    "directory": (make_dir, True),
    "link-to-fifo": (link_to(make_fifo), True),
    "link-to-device": (link_to(make_device), True),
    "link-to-directory": (link_to(make_dir), True),
    # Replacing the link itself is safe: the file it points to is left as it was.
    "link-to-user-file": (link_to(make_user_file), False),
    "regular-file": (make_user_file, False),
}


def fingerprint(root: Path) -> dict[str, tuple[int, int, bytes | str | None]]:
    """Kind, device number and content (or link text) of everything under ``root``."""
    seen: dict[str, tuple[int, int, bytes | str | None]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            info = os.lstat(path)
            kind = stat.S_IFMT(info.st_mode)
            content: bytes | str | None = None
            if stat.S_ISREG(info.st_mode):
                content = path.read_bytes()
            elif stat.S_ISLNK(info.st_mode):
                content = os.readlink(path)
            seen[str(path.relative_to(root))] = (kind, info.st_rdev, content)
    return seen
