"""``inferlab-bench handshake``: print client, protocol and AIPerf versions as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from inferlab_bench.versions import handshake_facts


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("handshake", help="print versions (client, protocol, AIPerf) as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    json.dump(handshake_facts(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0
