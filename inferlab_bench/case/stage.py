"""Case stage entry point (placeholder until the case issue lands)."""

from __future__ import annotations

from inferlab_bench.errors import InferlabError
from inferlab_bench.protocol import BenchClientRequest, BenchClientResult


def run_case(request: BenchClientRequest) -> BenchClientResult:
    raise InferlabError("case: not implemented yet")
