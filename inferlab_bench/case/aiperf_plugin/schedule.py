"""The planned schedule of a rate-limited phase: recorded inside AIPerf, read by the stage.

AIPerf's rate loop asks its interval generator for the gap to the next send and keeps the
running sum as its target; it never writes the targets down. ``IntervalRecorder`` stands in
for the generator, passes every call through and keeps each interval drawn, so that the
stage can tell when each request was due (``validity.schedule``), not only when AIPerf
got round to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from inferlab_bench.atomic import write_bytes_atomic
from inferlab_bench.validity.schedule import PlannedSchedule

SCHEMA_VERSION = 1


class IntervalRecorder:
    """AIPerf's interval generator, with every interval it returns kept in order."""

    def __init__(self, generator: Any) -> None:
        self._generator = generator
        self.intervals: list[float] = []

    def next_interval(self) -> float:
        interval = float(self._generator.next_interval())
        self.intervals.append(interval)
        return interval

    def __getattr__(self, name: str) -> Any:
        # set_rate and anything else AIPerf asks of its generator.
        return getattr(self._generator, name)


def write_schedule(path: Path, started_at_ns: int, intervals: list[float]) -> None:
    """The plan as JSON, written atomically (a half-written plan is never read as one)."""
    document = {
        "schema_version": SCHEMA_VERSION,
        "started_at_ns": started_at_ns,
        "intervals_s": intervals,
    }
    write_bytes_atomic(path, orjson.dumps(document))


def read_schedule(path: Path) -> PlannedSchedule | None:
    """The recorded plan; None when there is none or it cannot be read (then the credit issue
    times stand in, and validity.json says so)."""
    try:
        data = orjson.loads(path.read_bytes())
        return PlannedSchedule(
            started_at_ns=int(data["started_at_ns"]),
            intervals_s=tuple(float(x) for x in data["intervals_s"]),
        )
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
