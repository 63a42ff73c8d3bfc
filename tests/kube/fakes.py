"""Fake ``aiperf`` and ``kubectl`` executables for the engine: small scripts in a tmp dir.

Both read ``scenario.json`` beside them and append their argv to ``calls.jsonl``:

- ``kubectl get``: prints the next entry of ``phases`` (the last one repeats) and touches
  ``status-seen``; ``kubectl delete``: exits 0.
- ``aiperf kube validate|profile|cancel``: exit 0 (``profile_exit`` overrides);
  ``aiperf kube generate``: prints a tiny manifest; ``aiperf kube results NAME --output DIR``:
  copies the files of ``results_from`` into DIR (exit ``results_exit``, default 0).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCRIPT = """\
#!{python}
import json, shutil, sys
from pathlib import Path
here = Path(__file__).resolve().parent
scenario = json.loads((here / "scenario.json").read_text())
argv = sys.argv[1:]
with open(here / "calls.jsonl", "a") as log:
    log.write(json.dumps(["{tool}", *argv]) + "\\n")
if "{tool}" == "kubectl":
    if argv[0] == "get":
        counter = here / "status-count"
        n = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(n + 1))
        (here / "status-seen").touch()
        phases = scenario.get("phases", ["Running"])
        sys.stdout.write(phases[min(n, len(phases) - 1)])
    sys.exit(0)
command = argv[1]
if command == "profile":
    print("AIPerfJob created")
    sys.exit(scenario.get("profile_exit", 0))
if command == "generate":
    print("kind: JobSet")
if command == "results":
    output = Path(argv[argv.index("--output") + 1])
    output.mkdir(parents=True, exist_ok=True)
    source = scenario.get("results_from")
    if source:
        for item in Path(source).iterdir():
            shutil.copy2(item, output / item.name)
    sys.exit(scenario.get("results_exit", 0))
sys.exit(0)
"""


@dataclass(frozen=True)
class FakeCluster:
    """Where the fake tools live and what they were asked to do."""

    directory: Path

    @property
    def aiperf(self) -> tuple[str, ...]:
        return (str(self.directory / "aiperf"),)

    @property
    def kubectl(self) -> tuple[str, ...]:
        return (str(self.directory / "kubectl"),)

    def calls(self) -> list[list[str]]:
        path = self.directory / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def commands(self) -> list[str]:
        """Each call as ``tool subcommand``, e.g. ``aiperf kube cancel`` -> "aiperf cancel"."""
        out = []
        for call in self.calls():
            verb = call[2] if call[0] == "aiperf" else call[1]
            out.append(f"{call[0]} {verb}")
        return out


def fake_cluster(directory: Path, **scenario: Any) -> FakeCluster:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "scenario.json").write_text(json.dumps(scenario, default=str))
    for tool in ("aiperf", "kubectl"):
        path = directory / tool
        path.write_text(_SCRIPT.replace("{python}", sys.executable).replace("{tool}", tool))
        path.chmod(0o755)
    return FakeCluster(directory)


def call_seconds(directory: Path, calls: int = 3) -> float:
    """The longest of ``calls`` runs of a fake tool here and now (a Python start-up each; over
    1 s at load average 23 on 2 cores), in a cluster of its own so no test sees the calls.
    Deadlines in the engine's tests are multiples of it, not fixed fractions of a second."""
    cluster = fake_cluster(directory)
    longest = 0.0
    for _ in range(calls):
        started = time.monotonic()
        subprocess.run([*cluster.aiperf, "kube", "validate"], check=True, timeout=60)
        longest = max(longest, time.monotonic() - started)
    return longest
