"""Preparation stage entry point (placeholder until the preparation issue lands)."""

from __future__ import annotations

from inferlab_bench.errors import InferlabError
from inferlab_bench.protocol import BenchDatasetPreparationRequest, BenchDatasetPreparationResult


def run_prepare(request: BenchDatasetPreparationRequest) -> BenchDatasetPreparationResult:
    raise InferlabError("prepare: not implemented yet")
