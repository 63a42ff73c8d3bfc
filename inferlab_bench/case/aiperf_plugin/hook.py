"""The hand-over from the case stage to the AIPerf plugin: settings in one environment variable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.case.reset import ResetTarget

ENV_VAR = "INFERLAB_AIPERF_PLUGIN"
"""JSON of ``HookSettings``, set by our runner for the ``aiperf profile`` subprocess."""


@dataclass(frozen=True)
class HookSettings:
    """What the plugin does in the profiling phase, handed over through the environment."""

    base_url: str
    target: ResetTarget | None
    """The prefix-cache reset to make after warmup drains (None: no reset)."""
    timeout: float
    evidence_path: Path
    metrics_path: Path | None = None
    """Where to write the server's /metrics read right before the first profiling credit."""
    schedule_path: Path | None = None
    """Where to write the rate loop's planned schedule (None: not recorded)."""

    def to_env(self) -> str:
        target = self.target
        return orjson.dumps(
            {
                "base_url": self.base_url,
                "reset": None
                if target is None
                else {"method": target.method, "path": target.path, "origin": target.origin},
                "timeout": self.timeout,
                "evidence_path": str(self.evidence_path),
                "metrics_path": _text(self.metrics_path),
                "schedule_path": _text(self.schedule_path),
            }
        ).decode()

    @classmethod
    def from_env(cls, text: str) -> HookSettings:
        data: dict[str, Any] = orjson.loads(text)
        reset = data.get("reset")
        return cls(
            data["base_url"],
            None if reset is None else ResetTarget(reset["method"], reset["path"], reset["origin"]),
            float(data["timeout"]),
            Path(data["evidence_path"]),
            _path(data.get("metrics_path")),
            _path(data.get("schedule_path")),
        )


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _path(text: str | None) -> Path | None:
    return None if text is None else Path(text)
