"""The hand-over from the case stage to the AIPerf plugin: settings in one environment variable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.case.reset import ResetTarget

ENV_VAR = "INFERLAB_RESET_AFTER_WARMUP"
"""JSON {base_url, method, path, origin, timeout, evidence_path}, set by our runner."""
CREDIT_WAIT_ENV_VAR = "INFERLAB_CREDIT_WAIT"
"""``1``: our request_rate strategy sleeps until a credit returns instead of spinning."""


@dataclass(frozen=True)
class HookSettings:
    """What the hook needs, handed over from the case stage through the environment."""

    base_url: str
    target: ResetTarget
    timeout: float
    evidence_path: Path
    metrics_path: Path | None = None
    """Where to write the server's /metrics read right before the first profiling credit."""

    def to_env(self) -> str:
        return orjson.dumps(
            {
                "base_url": self.base_url,
                "method": self.target.method,
                "path": self.target.path,
                "origin": self.target.origin,
                "timeout": self.timeout,
                "evidence_path": str(self.evidence_path),
                "metrics_path": None if self.metrics_path is None else str(self.metrics_path),
            }
        ).decode()

    @classmethod
    def from_env(cls, text: str) -> HookSettings:
        data: dict[str, Any] = orjson.loads(text)
        target = ResetTarget(data["method"], data["path"], data["origin"])
        metrics = data.get("metrics_path")
        return cls(
            data["base_url"],
            target,
            float(data["timeout"]),
            Path(data["evidence_path"]),
            None if metrics is None else Path(metrics),
        )
