"""Rich progress bars on stderr for a ``ProgressSink``, shown only on a terminal."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TYPE_CHECKING

from inferlab_bench.progress import NULL_PROGRESS, ProgressSink

if TYPE_CHECKING:  # rich is imported only when a terminal shows progress
    from rich.console import Console
    from rich.progress import Progress, TaskID


class RichProgress:
    """Renders stage progress with rich; bytes get a download-style bar."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def begin(self, description: str, total: float | None = None, unit: str = "") -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.end()
        columns = [TextColumn("{task.description}"), BarColumn()]
        if unit == "bytes":
            columns += [DownloadColumn(), TransferSpeedColumn()]
        else:
            columns += [MofNCompleteColumn(), TextColumn(unit)]
        columns += [TimeElapsedColumn(), TimeRemainingColumn()]
        self._progress = Progress(*columns, console=self._console, transient=False)
        self._progress.start()
        self._task = self._progress.add_task(description, total=total)

    def advance(self, amount: float = 1.0) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, amount)

    def end(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        self._progress = None
        self._task = None

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.end()


def stderr_progress() -> ProgressSink:
    """A rich sink when stderr is a terminal, else the null sink (logs stay clean)."""
    if not sys.stderr.isatty():
        return NULL_PROGRESS
    from rich.console import Console

    return RichProgress(Console(stderr=True))
