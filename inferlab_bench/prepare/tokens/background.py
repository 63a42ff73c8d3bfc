"""One call on a thread while the caller goes on (a load, a write that releases the GIL)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Background:
    """One call on a daemon thread; ``result`` waits for it and re-raises its error."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self._value = call()
        except BaseException as exc:  # handed to whoever waits for the result
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value
