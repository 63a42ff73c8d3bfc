"""Regenerate inferlab_bench/schema/protocol-v6.schema.json from the wire models.

Run after changing inferlab_bench/protocol.py: ``python3 scripts/generate_schema.py``.
``--check`` exits 1 when the committed file differs from what the models give.
"""

from __future__ import annotations

import sys

from inferlab_bench.schema import SCHEMA_PATH, render


def main(argv: list[str]) -> int:
    fresh = render()
    if "--check" in argv:
        same = SCHEMA_PATH.is_file() and SCHEMA_PATH.read_bytes() == fresh
        print(f"{SCHEMA_PATH}: {'up to date' if same else 'stale; regenerate it'}")
        return 0 if same else 1
    SCHEMA_PATH.write_bytes(fresh)
    print(f"wrote {SCHEMA_PATH} ({len(fresh)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
