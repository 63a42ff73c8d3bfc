"""Measurement validity: pure checks that say whether a case's numbers can be trusted."""

from inferlab_bench.validity.adapter import assess_case, expectations_from_population, phase_records
from inferlab_bench.validity.assess import CaseFacts, Tolerances, assess
from inferlab_bench.validity.cache import (
    COLD_WAVE,
    CacheColdness,
    ColdStart,
    assess_cache,
    cold_start,
    first_wave,
)
from inferlab_bench.validity.client_cost import (
    ClientCost,
    ClientCostTolerances,
    ClientUsage,
    assess_client_cost,
)
from inferlab_bench.validity.digests import SequenceDigest, population_sha256, sequence_digest
from inferlab_bench.validity.dispatch import DispatchFidelity, DispatchTolerances, assess_dispatch
from inferlab_bench.validity.distribution import Distribution, describe
from inferlab_bench.validity.goodput import TokenGoodput, token_goodput
from inferlab_bench.validity.inputs import Expectations, PhaseRecords
from inferlab_bench.validity.report import (
    VALIDITY_SCHEMA,
    VALIDITY_SCHEMA_VERSION,
    ValidityDocument,
    build_document,
    comparison_lines,
    failed_check_text,
    summary_lines,
    trial_lines,
)
from inferlab_bench.validity.tokens import (
    TokenReconciliation,
    TokenTolerance,
    reconcile_output_tokens,
    reconcile_prompt_tokens,
)
from inferlab_bench.validity.trials import (
    HEADLINE_METRICS,
    MetricSummary,
    NoiseComparison,
    compare_trials,
    summarize,
    summarize_trials,
    welch,
)
from inferlab_bench.validity.verdict import Check, Verdict

__all__ = [
    "COLD_WAVE",
    "CacheColdness",
    "ColdStart",
    "CaseFacts",
    "Check",
    "ClientCost",
    "ClientCostTolerances",
    "ClientUsage",
    "DispatchFidelity",
    "DispatchTolerances",
    "Distribution",
    "Expectations",
    "HEADLINE_METRICS",
    "MetricSummary",
    "NoiseComparison",
    "PhaseRecords",
    "SequenceDigest",
    "TokenGoodput",
    "TokenReconciliation",
    "TokenTolerance",
    "Tolerances",
    "VALIDITY_SCHEMA",
    "VALIDITY_SCHEMA_VERSION",
    "ValidityDocument",
    "Verdict",
    "assess",
    "assess_cache",
    "assess_client_cost",
    "cold_start",
    "first_wave",
    "phase_records",
    "assess_case",
    "assess_dispatch",
    "build_document",
    "compare_trials",
    "comparison_lines",
    "describe",
    "expectations_from_population",
    "failed_check_text",
    "population_sha256",
    "reconcile_output_tokens",
    "reconcile_prompt_tokens",
    "sequence_digest",
    "summarize",
    "summarize_trials",
    "summary_lines",
    "token_goodput",
    "trial_lines",
    "welch",
]
