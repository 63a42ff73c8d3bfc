"""Preparation speed: the straightforward reference vs ours (cold and warm), side by side.

    python benchmarks/prepare.py --conversations 94000

Generates a ShareGPT-like file with scripts/make_sharegpt_like.py, then times, in one run:
the reference (one apply_chat_template per candidate), our stage with an empty token-table
cache (cold), and again with the cache (warm); checks the populations are byte-identical
and prints the ratios and peak RSS of each (each measured in its own child process).

It also prints where the reference's tokenizer time went (candidates past the limit,
inputs that fit, targets), to compare with the one profile measured on the real file
(DESIGN.md: about 85% / 4% / 11%): the closer the generated file is to it, the more the
ratio says about the real one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _request(source: Path, catalog: Path, out: Path, args: argparse.Namespace, seed: int) -> Any:
    from tests.prepare.conftest import QWEN_DIR, prep_request

    return prep_request(
        source,
        catalog,
        out,
        locator=QWEN_DIR,
        required=args.entries,
        max_input=args.max_input_tokens,
        seed=seed,
    )


def _ours(
    source: Path, catalog: Path, out: Path, args: argparse.Namespace, seed: int, queue: Any
) -> None:
    from inferlab_bench.prepare.stage import run_prepare

    started = time.perf_counter()
    result = run_prepare(_request(source, catalog, out, args, seed), catalog_dir=catalog)
    queue.put(
        {
            "seconds": time.perf_counter() - started,
            "status": result.status.value,
            "sha256": result.population.sha256 if result.population else None,
            **_rss(),
        }
    )


def _rss() -> dict[str, float]:
    """Peak RSS of this process and of its largest child (our tokenizing workers)."""
    return {
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_children_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


class _TimedTokenizer:
    """The reference's tokenizer, timing each call by what it was for."""

    def __init__(self, tok: Any, limit: int) -> None:
        self._tok, self._limit = tok, limit
        self.seconds = {"past_limit": 0.0, "fitting_input": 0.0, "target": 0.0}

    def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        ids = self._tok.apply_chat_template(*args, **kwargs)
        count = len(ids["input_ids"] if hasattr(ids, "keys") else ids)
        kind = "past_limit" if count > self._limit else "fitting_input"
        self.seconds[kind] += time.perf_counter() - started
        return ids

    def encode(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        ids = self._tok.encode(*args, **kwargs)
        self.seconds["target"] += time.perf_counter() - started
        return ids

    def shares(self) -> dict[str, str]:
        total = sum(self.seconds.values())
        return {kind: f"{seconds / total:.0%}" for kind, seconds in self.seconds.items()}


def _reference(source: Path, args: argparse.Namespace, queue: Any) -> None:
    from transformers import AutoTokenizer

    from inferlab_bench.prepare.write import Entry, population_bytes
    from tests.prepare.conftest import QWEN_DIR
    from tests.prepare.reference import reference_select

    started = time.perf_counter()
    tok = _TimedTokenizer(
        AutoTokenizer.from_pretrained(QWEN_DIR, local_files_only=True), args.max_input_tokens
    )
    ref = reference_select(
        json.loads(source.read_bytes()),
        tok,
        seed=1,
        required=args.entries,
        max_input_tokens=args.max_input_tokens,
        output_tokens=None,
    )
    entries = [
        Entry(i, sid, o["messages"], o["target"], 0, o["input_tokens"], 0, o["output_length"])
        for _, i, sid, o in ref["chosen"]
    ]
    queue.put(
        {
            "seconds": time.perf_counter() - started,
            "sha256": hashlib.sha256(population_bytes(entries)).hexdigest(),
            "tokenizer_time_shares": tok.shares(),
            **_rss(),
        }
    )


def _measure(target: Any, *params: Any) -> dict[str, Any]:
    queue: Any = multiprocessing.get_context("fork").Queue()
    process = multiprocessing.get_context("fork").Process(target=target, args=(*params, queue))
    process.start()
    figures: dict[str, Any] = queue.get()
    process.join()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=94_000)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--max-input-tokens", type=int, default=1024)
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="inferlab-bench-prepare-"))
    try:
        _run(work, args)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _run(work: Path, args: argparse.Namespace) -> None:
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")
    source = work / "sharegpt-like.json"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "make_sharegpt_like.py"),
            str(source),
            "--conversations",
            str(args.conversations),
        ],
        check=True,
    )
    from tests.prepare.conftest import write_catalog

    catalog = write_catalog(
        work / "catalog", hashlib.sha256(source.read_bytes()).hexdigest(), "http://127.0.0.1:9/"
    )
    cold = _measure(_ours, source, catalog, work / "cold", args, 1)
    warm = _measure(_ours, source, catalog, work / "warm", args, 1)
    # The cache is keyed without the seed: another seed is warm too, and picks other entries.
    other = _measure(_ours, source, catalog, work / "other-seed", args, 2)
    rows = {"ours_cold": cold, "ours_warm": warm, "ours_warm_other_seed": other}
    rows["other_seed_differs"] = other["sha256"] != cold["sha256"]
    if not args.skip_reference:
        rows["reference"] = _measure(_reference, source, args)
        rows["cold_speedup"] = rows["reference"]["seconds"] / cold["seconds"]
        rows["identical_population"] = (
            rows["reference"]["sha256"] == cold["sha256"] == warm["sha256"]
        )
    rows["conversations"] = args.conversations
    rows["source_mb"] = source.stat().st_size / 1e6
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
