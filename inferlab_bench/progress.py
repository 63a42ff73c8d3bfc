"""The progress seam: stages report work done through ``ProgressSink``; the CLI renders it."""

from __future__ import annotations

from typing import Protocol


class ProgressSink(Protocol):
    """Where a stage reports long work. Stages never print; they call this."""

    def begin(self, description: str, total: float | None = None, unit: str = "") -> None:
        """Start a task (``total`` None when unknown). A new ``begin`` ends the previous one."""

    def advance(self, amount: float = 1.0) -> None:
        """Record ``amount`` more units of the current task as done."""

    def end(self) -> None:
        """The current task is finished."""


class NullProgress:
    """A sink that ignores everything: the default for stages and tests."""

    def begin(self, description: str, total: float | None = None, unit: str = "") -> None:
        pass

    def advance(self, amount: float = 1.0) -> None:
        pass

    def end(self) -> None:
        pass


NULL_PROGRESS: ProgressSink = NullProgress()
