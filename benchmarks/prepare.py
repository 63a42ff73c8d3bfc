"""Preparation speed on real data: the reference runner 0.5.0 vs ours cold, warm, warm other seed.

    python benchmarks/prepare.py --dataset PATH --against il-0.5

``PATH`` is a real ShareGPT file (``../shared/tools/real-sharegpt`` writes the 17,671 real
conversations; ``scripts/repeat_sharegpt.py`` repeats them into a 94k file). One run times,
each as its own process with empty caches where it says cold: the reference runner
(InferLab bench runner 0.5.0, protocol 6, built by ``../shared/tools/il05-venv`` and driven
through its JSON ``--prepare`` request), then ours cold (empty token-table cache), warm
(same request again) and warm with another seed, each warm row ``--warm-trials`` times from
the cache the cold run left (the row is the median trial's, with every trial's wall time).
Ours runs as the stage alone in a fresh
Python (``--entry stage``, the default) or through ``inferlab-bench prepare``
(``--entry cli``). It prints wall and CPU seconds and peak RSS of each (the largest process:
our tokenizing workers are forked children), checks that the reference, cold and warm
populations are byte-identical and the census equal, and prints the ratios. The same v6
request goes to both.

``--sessions TRIALS`` times something else: cold preparations of a conversation population
(``sharegpt-multi-turn-v1``, ``--entries`` sessions) and of the single-request population of
the same file, alternated TRIALS times each, every run from an empty cache, with the load
average around each run and the ratio of the medians.

``--baseline DIR`` also times another checkout of ours (e.g. ``git archive`` of main into a
temporary directory) in the same run: its cold row right after ours, and its warm trials
alternated with ours, so that both see the same load on a shared host (``baseline_*``
rows; its populations must equal ours).
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import json
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
IL05_VENV = REPO.parent / "shared" / "tools" / "il05-venv"


def _request(
    source: Path,
    sha256: str,
    out: Path,
    args: argparse.Namespace,
    seed: int,
    materialization: str | None = None,
) -> Path:
    """A v6 preparation request as JSON (catalog facts: the file's own sha256; another
    ``materialization`` names one of our extensions, e.g. a conversation population)."""
    from tests.prepare.conftest import QWEN_DIR, catalog_entry

    entry = catalog_entry(sha256, "http://127.0.0.1:9/unused")
    if materialization is not None:
        entry["materialization_identity"] = materialization
    request = {
        "protocol_version": "6",
        "model": {"locator": args.tokenizer or QWEN_DIR, "served_name": "m"},
        "request_source": {
            "kind": "dataset",
            "dataset": "sharegpt",
            "max_input_tokens": args.max_input_tokens,
            "output_tokens": None,
            "catalog": {**entry, "cache_path": str(out / "unused"), "cache_state": "missing"},
        },
        "source_path": str(source),
        "required_entries": args.entries,
        "seed": seed,
        "request_body": {},
        "artifact_dir": str(out),
    }
    path = out.with_suffix(".request.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(request))
    return path


def _timed(command: list[str], env: dict[str, str], result: Path) -> dict[str, Any]:
    """Run one command as a child of a fresh ``python -c`` that reports the peak RSS of its
    own children (the command and, through it, its workers)."""
    probe = (
        "import resource, subprocess, sys, time, json;"
        "t = time.perf_counter(); rc = subprocess.run(sys.argv[1:]).returncode;"
        "s = time.perf_counter() - t; r = resource.getrusage(resource.RUSAGE_CHILDREN);"
        "print(json.dumps({'rc': rc, 'seconds': s, 'cpu_seconds': r.ru_utime + r.ru_stime,"
        " 'peak_rss_mb': r.ru_maxrss / 1024}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *command],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    outcome = json.loads(result.read_text())
    figures["status"] = outcome["status"]
    figures["error"] = outcome.get("error")
    population = outcome.get("population") or {}
    figures["population_sha256"] = population.get("sha256")
    figures["admitted"] = outcome.get("admitted_entries")
    figures["reasons"] = outcome.get("ineligible_reasons")
    manifest = result.parent / result.stem.replace(".result", "") / "preparation-manifest.json"
    if manifest.is_file():
        facts = json.loads(manifest.read_text())
        figures["source_digest"] = facts.get("source_digest")
        figures["chosen_entries_counted_now"] = facts.get("chosen_entries_counted_now")
        figures["tokenizer_loaded"] = facts.get("tokenizer_loaded")
    return figures


_STAGE = (
    "import sys; from pathlib import Path;"
    "from inferlab_bench.prepare.stage import run_prepare;"
    "from inferlab_bench.protocol import BenchDatasetPreparationRequest, parse_request;"
    "request = parse_request(BenchDatasetPreparationRequest, Path(sys.argv[1]).read_bytes());"
    "result = run_prepare(request, catalog_dir=Path(sys.argv[3]));"
    "Path(sys.argv[2]).write_text(result.model_dump_json())"
)
"""The preparation stage alone: ``inferlab-bench prepare`` also imports every other command
(1-2 s here: AIPerf, scipy, matplotlib), which ``--entry cli`` includes."""


def _ours(request: Path, env: dict[str, str], catalog: Path, entry: str) -> dict[str, Any]:
    """One run of ours (the checkout ``env``'s ``PYTHONPATH`` names)."""
    result = request.with_name(request.name.replace(".request", ".result"))
    if entry == "cli":
        command = [sys.executable, "-m", "inferlab_bench", "prepare", "--input", str(request)]
        command += ["--output", str(result), "--catalog-dir", str(catalog)]
    else:
        command = [sys.executable, "-c", _STAGE, str(request), str(result), str(catalog)]
    return _timed(command, env, result)


def _reference(request: Path, env: dict[str, str]) -> dict[str, Any]:
    bin_dir = subprocess.run([str(IL05_VENV)], capture_output=True, text=True, check=True)
    runner = Path(bin_dir.stdout.strip()) / "inferlab-bench-runner"
    result = request.with_name(request.name.replace(".request", ".result"))
    command = [str(runner), "--prepare", "--input", str(request), "--output", str(result)]
    return _timed(command, env, result)


def _median_trial(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of the trial with the median wall time, with every trial's wall time
    (``trials_seconds``): one run on a shared host moves by a third from hour to hour."""
    ordered = sorted(trials, key=lambda t: t["seconds"])
    median = dict(ordered[(len(ordered) - 1) // 2])
    median["trials_seconds"] = [round(t["seconds"], 3) for t in trials]
    median["same_population_every_trial"] = len({t["population_sha256"] for t in trials}) == 1
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True, help="a real ShareGPT file")
    parser.add_argument("--against", choices=["il-0.5", "none"], default="il-0.5")
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--max-input-tokens", type=int, default=1024)
    parser.add_argument("--tokenizer", help="tokenizer directory (default: the demo's Qwen2)")
    parser.add_argument(
        "--entry",
        choices=["stage", "cli"],
        default="stage",
        help="run ours as the stage alone (default) or through the whole CLI",
    )
    parser.add_argument(
        "--warm-trials",
        type=int,
        default=5,
        help="timed runs of each warm row, each from the cache the cold run left (default 5)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout of ours to time alongside, interleaved (e.g. main's)",
    )
    parser.add_argument(
        "--sessions",
        type=int,
        metavar="TRIALS",
        help="instead: cold conversation population (sharegpt-multi-turn-v1, --entries "
        "sessions) vs cold single-request prepare of the same file, alternated, TRIALS each",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="inferlab-bench-prepare-"))
    try:
        run = _sessions_run if args.sessions else _run
        print(json.dumps(run(work, args), indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _run(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    from tests.prepare.conftest import write_catalog

    source = args.dataset.resolve()
    sha256 = hashlib.sha256(source.read_bytes()).hexdigest()
    catalog = write_catalog(work / "catalog", sha256, "http://127.0.0.1:9/unused")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    sides = {"ours": REPO} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    for checkout in sides.values():
        # Byte-compiled first, as pip compiles an installed package (the reference's venv
        # has its .pyc files): an environment with PYTHONDONTWRITEBYTECODE set would
        # otherwise compile our modules from source in every timed run.
        compileall.compile_dir(checkout / "inferlab_bench", quiet=1)
    rows: dict[str, Any] = {"dataset": str(source), "source_mb": source.stat().st_size / 1e6}
    rows["load_average_before"] = os.getloadavg()
    if args.against == "il-0.5":
        ref_env = {**env, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(work / "ref-cache")}
        rows["reference"] = _reference(_request(source, sha256, work / "ref", args, 1), ref_env)
    envs = {
        side: {**env, "PYTHONPATH": str(path), "XDG_CACHE_HOME": str(work / f"{side}-cache")}
        for side, path in sides.items()
    }
    for side in sides:
        cold_request = _request(source, sha256, work / f"{side}_cold", args, 1)
        rows[f"{side}_cold"] = _ours(cold_request, envs[side], catalog, args.entry)
        shutil.copytree(work / f"{side}-cache", work / f"{side}-cache-after-cold")
    for name, seed in (("warm", 1), ("warm_other_seed", 2)):
        trials: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        for _ in range(max(1, args.warm_trials)):
            for side in sides:  # alternated, each trial right after its side's cold run
                request = _request(source, sha256, work / f"{side}_{name}", args, seed)
                shutil.rmtree(work / f"{side}-cache")
                shutil.copytree(work / f"{side}-cache-after-cold", work / f"{side}-cache")
                trials[side].append(_ours(request, envs[side], catalog, args.entry))
        for side in sides:
            rows[f"{side}_{name}"] = _median_trial(trials[side])
    rows["load_average_after"] = os.getloadavg()
    return _checks(rows)


def _sessions_run(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Cold single-request and cold conversation preparations of one file, alternated so
    that both see the same load, each from an empty cache (token table, kept tokenizer);
    the medians, their ratio, and the load average around every trial."""
    from inferlab_bench.prepare.sessions import MATERIALIZATION_IDENTITY
    from tests.prepare.conftest import write_catalog

    source = args.dataset.resolve()
    sha256 = hashlib.sha256(source.read_bytes()).hexdigest()
    catalog = write_catalog(work / "catalog", sha256, "http://127.0.0.1:9/unused")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(REPO)}
    compileall.compile_dir(REPO / "inferlab_bench", quiet=1)
    kinds = {"single_request": None, "sessions": MATERIALIZATION_IDENTITY}
    trials: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    for trial in range(max(1, args.sessions)):
        for kind, identity in kinds.items():
            run_env = {**env, "XDG_CACHE_HOME": str(work / f"{kind}-cache-{trial}")}
            request = _request(source, sha256, work / f"{kind}_{trial}", args, 1, identity)
            before = os.getloadavg()[0]
            figures = _ours(request, run_env, catalog, args.entry)
            figures["load_average"] = [round(before, 2), round(os.getloadavg()[0], 2)]
            trials[kind].append(figures)
    rows: dict[str, Any] = {"dataset": str(source), "entries": args.entries}
    for kind in kinds:
        rows[kind] = _median_trial(trials[kind])
        rows[f"{kind}_load_averages"] = [t["load_average"] for t in trials[kind]]
    rows["ratio_of_medians"] = round(
        rows["sessions"]["seconds"] / rows["single_request"]["seconds"], 2
    )
    rows["ratio_per_trial"] = [
        round(s["seconds"] / r["seconds"], 2)
        for s, r in zip(trials["sessions"], trials["single_request"], strict=True)
    ]
    rows["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return rows


def _checks(rows: dict[str, Any]) -> dict[str, Any]:
    """Whether the populations agree (the reference, cold and warm; another seed differs;
    the baseline's equal ours) and the ratios to the reference."""
    cold, warm = rows["ours_cold"], rows["ours_warm"]
    rows["other_seed_differs"] = (
        rows["ours_warm_other_seed"]["population_sha256"] != cold["population_sha256"]
    )
    shas = {cold["population_sha256"], warm["population_sha256"]}
    if "reference" in rows:
        reference = rows["reference"]
        shas.add(reference["population_sha256"])
        rows["same_census"] = (reference["admitted"], reference["reasons"]) == (
            cold["admitted"],
            cold["reasons"],
        )
        rows["cold_speedup"] = round(reference["seconds"] / cold["seconds"], 2)
        rows["warm_speedup"] = round(reference["seconds"] / warm["seconds"], 1)
    rows["identical_population"] = len(shas) == 1 and None not in shas
    if "baseline_cold" in rows:
        rows["baseline_populations_equal_ours"] = all(
            rows[f"baseline_{name}"]["population_sha256"]
            == rows[f"ours_{name}"]["population_sha256"]
            for name in ("cold", "warm", "warm_other_seed")
        )
    rows["this_process_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return rows


if __name__ == "__main__":
    main()
