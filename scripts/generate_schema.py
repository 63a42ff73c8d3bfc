"""Regenerate the committed JSON schemas (inferlab_bench/schema/) from the models.

Run after changing inferlab_bench/protocol.py or the validity document's models:
``python3 scripts/generate_schema.py``. ``--check`` exits 1 when a committed file differs
from what the models give.
"""

from __future__ import annotations

import sys

from inferlab_bench.schema import committed


def main(argv: list[str]) -> int:
    stale = 0
    for path, fresh in committed().items():
        if "--check" in argv:
            same = path.is_file() and path.read_bytes() == fresh
            print(f"{path}: {'up to date' if same else 'stale; regenerate it'}")
            stale += not same
        else:
            path.write_bytes(fresh)
            print(f"wrote {path} ({len(fresh)} bytes)")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
