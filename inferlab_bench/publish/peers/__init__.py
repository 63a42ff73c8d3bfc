"""Peers' result files as the published side: one reader per tool and format generation,
each stating the fields it uses, told apart by content (never by file name): ``guidellm``,
``vllm``, ``sglang`` and ``aiperf`` (one module per tool), ``model`` (the bounded cases they
produce) and ``documents`` (a file read into JSON or YAML documents within bounds).

``load_baseline`` reads a file into cases in our metric names; ``peer_kind`` says whether a
file is one of them without raising; ``FORMATS`` is the list an unrecognised file is told.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from inferlab_bench.errors import BaselineError
from inferlab_bench.publish.peers import aiperf, guidellm, sglang, vllm
from inferlab_bench.publish.peers.documents import Documents, read_documents
from inferlab_bench.publish.peers.model import Baseline, BaselineCase

__all__ = ["FORMATS", "Baseline", "BaselineCase", "load_baseline", "peer_kind"]

FORMATS = (
    "GuideLLM 0.4-0.8 benchmarks report (JSON or YAML, with `metadata`)",
    "GuideLLM 0.2/0.3 benchmarks report (JSON or YAML, `args.strategy`, no `metadata`)",
    "vllm bench serve / benchmark_serving.py --save-result JSON (2024 to now, trimmed nightly "
    "files too), vllm bench sweep run=N.json",
    "vllm bench sweep summary.json (a list of runs)",
    "SGLang bench_serving --output-file JSON Lines (one run per line)",
    "AIPerf profile_export_aiperf.json (a run of ours keeps it as aiperf/profile.json)",
)

Reader = Callable[[Path, Any, str], Baseline]


def _one_line(path: Path, data: Any, syntax: str) -> Baseline:
    return sglang.read_lines(path, (data,), syntax)


KINDS: dict[Reader, str] = {
    guidellm.read_v04: "guidellm",
    guidellm.read_v03: "guidellm",
    vllm.read_sweep_summary: "vllm",
    vllm.read_result: "vllm",
    aiperf.read_export: "aiperf",
    sglang.read_lines: "sglang",
    _one_line: "sglang",
}


def load_baseline(path: Path) -> Baseline:
    """``path`` read by the reader of the tool that wrote it, or a BaselineError saying which
    formats are read."""
    documents = read_documents(path)
    reader = _reader(documents)
    if reader is None:
        raise unrecognised(path)
    content: Any = documents.items if documents.syntax == "jsonl" else documents.items[0]
    baseline = reader(path, content, documents.syntax)
    if not baseline.cases:
        raise BaselineError(f"{path}: {baseline.format} holds no benchmark")
    return baseline


def peer_kind(path: Path) -> str | None:
    """Which peer's format ``path`` is in (None when it is none of them or unreadable)."""
    if not path.is_file() or path.name.endswith(".tar.gz"):
        return None
    try:
        documents = read_documents(path)
    except BaselineError:
        return None
    reader = _reader(documents)
    return None if reader is None else KINDS[reader]


def unrecognised(path: Path) -> BaselineError:
    listed = "; ".join(FORMATS)
    return BaselineError(
        f"{path}: not a result file of a tool we read (we read: {listed})",
        hint="pass one of those files, or a run directory of ours",
    )


def _reader(documents: Documents) -> Reader | None:
    items = documents.items
    if documents.syntax == "jsonl":
        return sglang.read_lines if all(sglang.is_line(d) for d in items) else None
    data = items[0]
    for test, reader in (
        (guidellm.is_v04, guidellm.read_v04),
        (guidellm.is_v03, guidellm.read_v03),
        (vllm.is_sweep_summary, vllm.read_sweep_summary),
        (vllm.is_result, vllm.read_result),
        (aiperf.is_export, aiperf.read_export),
    ):
        if test(data):
            return reader
    if sglang.is_line(data):
        return _one_line
    return None
