"""Versions of everything that can change a number: recorded in handshakes and artifacts."""

from __future__ import annotations

import platform
from importlib import metadata

from inferlab_bench import __version__

PINNED_AIPERF_VERSION = "0.13.0"


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


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
