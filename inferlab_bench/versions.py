"""Versions of everything that can change a number: recorded in handshakes and artifacts."""

from __future__ import annotations

import functools
import os
import platform
import re
import sys

from inferlab_bench import __version__

PINNED_AIPERF_VERSION = "0.13.0"


@functools.cache
def package_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (None: not installed).

    Read, when it can be, from the name of its ``.dist-info`` directory: an installer names
    it ``{normalized name}-{version}.dist-info`` (the packaging spec for installed
    projects), and the first ``sys.path`` directory holding one for ``name`` is the one
    ``importlib.metadata`` reads. Anything less plain there (two of them, an ``.egg-info``)
    is left to ``importlib.metadata``, whose import alone cost a warm preparation 17 ms.
    """
    wanted = _normalized(name)
    for entry in sys.path:
        found = _distributions(entry or ".").get(wanted)
        if found is None:
            continue
        if len(found) == 1 and found[0].endswith(".dist-info"):
            return found[0][: -len(".dist-info")].split("-", 1)[1]
        break
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def _distributions(directory: str) -> dict[str, list[str]]:
    """Normalized distribution name -> its metadata directories in ``directory``."""
    try:
        names = os.listdir(directory)
    except OSError:
        return {}
    found: dict[str, list[str]] = {}
    for entry in names:
        for suffix in (".dist-info", ".egg-info"):
            if entry.endswith(suffix):
                name = entry[: -len(suffix)].split("-", 1)[0]  # an egg-info may lack a version
                found.setdefault(_normalized(name), []).append(entry)
    return found


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def handshake_facts() -> dict[str, object]:
    from inferlab_bench.protocol import PROTOCOL_VERSION  # pydantic: not for package_version

    return {
        "client": "inferlab-bench",
        "client_version": __version__,
        "protocol_version": PROTOCOL_VERSION,
        "aiperf_version": package_version("aiperf"),
        "aiperf_pinned_version": PINNED_AIPERF_VERSION,
        "transformers_version": package_version("transformers"),
        "tokenizers_version": package_version("tokenizers"),
        "python_version": platform.python_version(),
    }
