"""Write a larger ShareGPT file by repeating a real one, each copy's ids suffixed.

The real ShareGPT V3 file has about 94k conversations; ``../shared/tools/real-sharegpt``
gives 17,671 of them. Repeating those (copy k > 0 has ``-r{k}`` after every string id; a
record without one keeps its ``row-{i}`` default, which differs by position anyway) makes a
file of the full file's count with the real cost profile, for benchmarks:

    python scripts/repeat_sharegpt.py REAL.json OUT.json --conversations 94000
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson


def repeated(records: list[Any], count: int) -> list[Any]:
    out = []
    for position in range(count):
        copy, index = divmod(position, len(records))
        record = records[index]
        if copy and isinstance(record, dict) and isinstance(record.get("id"), str):
            record = {**record, "id": f"{record['id']}-r{copy}"}
        out.append(record)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--conversations", type=int, default=94_000)
    args = parser.parse_args()
    records = orjson.loads(args.source.read_bytes())
    args.out.write_bytes(orjson.dumps(repeated(records, args.conversations)))


if __name__ == "__main__":
    main()
