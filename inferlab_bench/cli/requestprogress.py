"""Per-request progress of a running command, read from the records AIPerf writes as it goes.

AIPerf appends one line per finished request (warmup and profiling) to ``aiperf/profile.jsonl``
in each case folder, a few records at a time. A thread tails those files twice a second (a
``stat`` each, and a read of only the new bytes) and counts newlines: no hook into AIPerf, no
load on the machine (``benchmarks/progress_cost.py`` measures it). On a terminal the count is a
bar with rate and ETA beside the cases' bar; piped or with ``--json``, a plain line goes to
stderr every few seconds.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from inferlab_bench.layout import AIPERF_DIR, AIPERF_PREFIX
from inferlab_bench.progress import ProgressSink

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

POLL_SECONDS = 0.5
LINE_SECONDS = 5.0
"""How often a plain progress line is printed when stderr is no terminal (or with --json)."""
RESCAN_SECONDS = 2.0
"""How often new case folders are looked for (the tail of known files runs every poll)."""
MAX_DEPTH = 4
"""Case folders lie at most this deep under the output folder (reproduce: run/01-c1/trial-01)."""
RATE_WINDOW_SECONDS = 20.0


@dataclass(frozen=True)
class Snapshot:
    """Requests done so far, of how many (None: not known ahead), the recent rate, the ETA;
    ``noun`` says what a record is (``turns`` for a conversation population)."""

    done: int
    planned: int | None
    rate: float | None
    eta_seconds: float | None
    noun: str = "requests"

    def line(self, cases: str = "") -> str:
        of = f"/{self.planned}" if self.planned else ""
        parts = [f"{self.done}{of} {self.noun} done"]
        if self.rate is not None:
            parts.append(f"{self.rate:.1f}/s")
        if self.eta_seconds is not None:
            parts.append(f"ETA {_duration(self.eta_seconds)}")
        text = ", ".join(parts)
        return f"progress: {text}" + (f"; {cases}" if cases else "")


class RequestCount:
    """The count, its rate over the last ``RATE_WINDOW_SECONDS`` and the ETA (pure)."""

    def __init__(self, planned: int | None, noun: str = "requests") -> None:
        self.planned = planned
        self.noun = noun
        self.done = 0
        self._history: deque[tuple[float, int]] = deque()

    def add(self, finished: int, now: float) -> Snapshot:
        self.done += finished
        self._history.append((now, self.done))
        while self._history and now - self._history[0][0] > RATE_WINDOW_SECONDS:
            self._history.popleft()
        return self.snapshot()

    def snapshot(self) -> Snapshot:
        rate = None
        if len(self._history) > 1:
            (t0, n0), (t1, n1) = self._history[0], self._history[-1]
            rate = (n1 - n0) / (t1 - t0) if t1 > t0 and n1 > n0 else None
        eta = None
        if rate and self.planned:
            eta = max(self.planned - self.done, 0) / rate
        return Snapshot(self.done, self.planned, rate, eta, self.noun)


class RecordTail:
    """New record lines under ``root`` since the watch began. Files present then are left
    alone (looked at only when folders are rescanned) until one grows or is replaced."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._active: dict[Path, tuple[int, int]] = {}  # path -> (inode, offset read)
        self._before: dict[Path, tuple[int, int]] = {}  # files of earlier runs: (inode, size)
        self._last_scan = 0.0
        for path in self._files():
            if (stat := _stat(path)) is not None:
                self._before[path] = (stat.st_ino, stat.st_size)

    def new_lines(self, now: float) -> int:
        if now - self._last_scan >= RESCAN_SECONDS:
            self._last_scan = now
            self._rescan()
        return sum(self._read(path) for path in list(self._active))

    def _rescan(self) -> None:
        for path in self._files():
            if path in self._active:
                continue
            earlier = self._before.get(path)
            if earlier is None:
                self._active[path] = (-1, 0)
                continue
            stat = _stat(path)
            if stat is not None and (stat.st_ino, stat.st_size) != earlier:
                del self._before[path]
                same = stat.st_ino == earlier[0] and stat.st_size > earlier[1]
                self._active[path] = (stat.st_ino, earlier[1] if same else 0)

    def _files(self) -> list[Path]:
        """Every ``aiperf/profile.jsonl`` down to ``MAX_DEPTH`` folders (never inside AIPerf's
        own folder, which holds its logs and phases: one walk, not one glob per depth)."""
        found: list[Path] = []
        stack = [(str(self._root), 0)]
        while stack:
            folder, depth = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if entry.name == AIPERF_DIR:
                    records = Path(entry.path) / f"{AIPERF_PREFIX}.jsonl"
                    if records.is_file():
                        found.append(records)
                elif depth < MAX_DEPTH:
                    stack.append((entry.path, depth + 1))
        return found

    def _read(self, path: Path) -> int:
        stat = _stat(path)
        if stat is None:
            return 0
        inode, offset = self._active[path]
        if stat.st_ino != inode and inode != -1 or stat.st_size < offset:
            offset = 0  # a new file (a re-run into the same folder)
        if stat.st_size == offset:
            self._active[path] = (stat.st_ino, offset)
            return 0
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read(stat.st_size - offset)
        complete = data.rfind(b"\n") + 1  # a half-written last line waits for the next poll
        self._active[path] = (stat.st_ino, offset + complete)
        return data.count(b"\n", 0, complete)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Watcher:
    """The thread that tails the records and hands each snapshot to ``show``."""

    def __init__(
        self,
        root: Path,
        planned: int | None,
        show: Callable[[Snapshot], None],
        noun: str = "requests",
    ) -> None:
        self._tail = RecordTail(root)
        self._count = RequestCount(planned, noun)
        self._show = show
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="request-progress", daemon=True)
        self.cpu_seconds = 0.0
        """CPU time the thread used (its own clock): what the progress costs."""

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            started = time.thread_time()
            now = time.monotonic()
            snapshot = self._count.add(self._tail.new_lines(now), now)
            self._show(snapshot)
            self.cpu_seconds += time.thread_time() - started


class PlainLines:
    """A ``ProgressSink`` for logs: the cases' count, and a line every ``LINE_SECONDS``."""

    def __init__(self, stream: IO[str], every: float = LINE_SECONDS) -> None:
        self._stream = stream
        self._every = every
        self._cases = ""
        self._done = 0.0
        self._total: float | None = None
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def begin(self, description: str, total: float | None = None, unit: str = "") -> None:
        with self._lock:
            self._description, self._unit, self._total, self._done = description, unit, total, 0
            self._cases = self._case_text()

    def advance(self, amount: float = 1.0) -> None:
        with self._lock:
            self._done += amount
            self._cases = self._case_text()

    def end(self) -> None:
        pass

    def _case_text(self) -> str:
        of = f"/{self._total:g}" if self._total else ""
        return f"{self._description} {self._done:g}{of} {self._unit}".rstrip()

    def show(self, snapshot: Snapshot) -> None:
        now = time.monotonic()
        if now - self._last < self._every:
            return
        self._last = now
        with self._lock:
            cases = self._cases
        print(f"inferlab-bench: {snapshot.line(cases)}", file=self._stream, flush=True)


class RichRequests:
    """A ``ProgressSink`` for a terminal: the cases' bar and the requests' bar in one display
    (rich allows one live display at a time)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress: Progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._requests: TaskID = self._progress.add_task("requests", total=None, rate="")
        self._cases: TaskID | None = None
        self._progress.start()

    def begin(self, description: str, total: float | None = None, unit: str = "") -> None:
        if self._cases is not None:
            self._progress.remove_task(self._cases)
        self._cases = self._progress.add_task(description, total=total, rate=unit)

    def advance(self, amount: float = 1.0) -> None:
        if self._cases is not None:
            self._progress.advance(self._cases, amount)

    def end(self) -> None:
        pass

    def show(self, snapshot: Snapshot) -> None:
        unit = "req" if snapshot.noun == "requests" else snapshot.noun.rstrip("s")
        rate = "" if snapshot.rate is None else f"{snapshot.rate:.1f} {unit}/s"
        self._progress.update(
            self._requests,
            description=snapshot.noun,
            completed=snapshot.done,
            total=snapshot.planned,
            rate=rate,
        )

    def close(self) -> None:
        self._progress.stop()


@contextmanager
def request_progress(
    out: Path, planned: int | None, *, plain: bool = False, noun: str = "requests"
) -> Iterator[ProgressSink]:
    """Progress for a command that writes its cases under ``out``: a sink for the stage's
    own count of cases, and the per-request count beside it, until the block ends. AIPerf
    writes one record per request: a conversation case's records are turns (``noun``)."""
    terminal = sys.stderr.isatty() and not plain
    sink: RichRequests | PlainLines = RichRequests() if terminal else PlainLines(sys.stderr)
    watcher = Watcher(out, planned, sink.show, noun)
    watcher.start()
    try:
        yield sink
    finally:
        watcher.stop()
        if isinstance(sink, RichRequests):
            sink.close()
