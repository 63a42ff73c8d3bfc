"""AIPerf's reason for failing, in words, read from its console log."""

from __future__ import annotations

import re
from pathlib import Path

_BOX = re.compile(r"^[\s│╭╰─┃━┏┗┓┛╮╯|]+|[\s│╭╰─┃━┏┗┓┛╮╯|]+$")
_MARKERS = ("Reason:", " ERROR ", "Error:", "Exception:", "error:")


def failure_reason(log_path: Path, limit: int = 400) -> str:
    """The first line of AIPerf's log that states why it failed, without box borders; the
    last meaningful line when none does."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return "no output"
    text = [_BOX.sub("", line) for line in lines]
    text = [line for line in text if line and not line.startswith("Traceback")]
    stated = [line for line in text if any(m in line for m in _MARKERS)]
    boxed = _boxed_message(lines)
    reason = boxed or (stated[0] if stated else (text[-1] if text else "no output"))
    return reason[:limit]


def _boxed_message(lines: list[str]) -> str:
    """The body of AIPerf's first error box (``╭─ Error ... ╮`` ... ``╰──╯``), one line."""
    for start, line in enumerate(lines):
        if line.lstrip().startswith("╭") and "rror" in line:
            body = []
            for inner in lines[start + 1 :]:
                if inner.lstrip().startswith("╰"):
                    break
                cleaned = _BOX.sub("", inner)
                if cleaned:
                    body.append(cleaned)
            return " ".join(body)
    return ""
