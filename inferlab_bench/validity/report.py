"""The validity.json document (its own schema and version) and its human summary lines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from inferlab_bench.validity import words
from inferlab_bench.validity.cache import CacheColdness
from inferlab_bench.validity.certify import BoundClaim, MetricCertification
from inferlab_bench.validity.client_cost import ClientCost
from inferlab_bench.validity.digests import SequenceDigest
from inferlab_bench.validity.dispatch import DispatchFidelity
from inferlab_bench.validity.failures import FailedRequests
from inferlab_bench.validity.goodput import TokenGoodput
from inferlab_bench.validity.measured import Measured
from inferlab_bench.validity.schedule import ScheduledLatency
from inferlab_bench.validity.steady import SteadyState
from inferlab_bench.validity.tokens import TokenReconciliation
from inferlab_bench.validity.trials import MetricSummary, NoiseComparison
from inferlab_bench.validity.verdict import Check, Figures, Verdict, combine

VALIDITY_SCHEMA: Literal["inferlab-validity-v1"] = "inferlab-validity-v1"
VALIDITY_SCHEMA_VERSION = 1


class ValidityDocument(Figures):
    """Every verdict of one case with the figures behind it; written as validity.json."""

    schema_name: Literal["inferlab-validity-v1"] = VALIDITY_SCHEMA
    schema_version: int = VALIDITY_SCHEMA_VERSION
    verdict: Verdict
    verdicts: dict[str, Verdict]
    dispatch: DispatchFidelity
    prompt_tokens: TokenReconciliation
    output_tokens: TokenReconciliation
    cache: CacheColdness
    goodput: TokenGoodput
    population_sha256: str | None
    sequences: tuple[SequenceDigest, ...]
    trials: tuple[MetricSummary, ...] = ()
    failures: FailedRequests | None = None
    """The verdict ``requests_succeeded`` (None only in documents written before it)."""
    certification: tuple[MetricCertification, ...] = ()
    """Per latency metric, which percentiles the sample size certifies (``certify``); empty
    in documents written before it."""
    slo_bounds: tuple[BoundClaim, ...] = ()
    """Per SLO bound, whether it holds at the SLO's percentile, certified or by share only."""
    scheduled_latency: ScheduledLatency | None = None
    """TTFT and E2E from when each request was due, beside from when it was sent."""
    steady_state: SteadyState | None = None
    """Where the run settled (MSER-5), and its figures over that window."""
    explanations: dict[str, str] = Field(default_factory=dict)
    """One plain sentence per entry of ``verdicts``, for a person."""
    client_cost: ClientCost | None = None
    """The verdict ``client_cost_low`` (None: the client's processes were not sampled)."""
    measured: Measured | None = None
    """The server's truth of these requests (our simulator): client-added latency, arrival
    lateness, the first wave's cached tokens, and what the proxies said. When present it
    decided ``client_cost_low``, ``load_generator_kept_up`` and ``cache_cold``."""

    def to_json_dict(self) -> dict[str, Any]:
        """The document as plain JSON values (enums as their strings)."""
        return self.model_dump(mode="json")

    def failed(self) -> list[str]:
        """Names of the verdicts that failed (what ``run --strict`` reports)."""
        return [name for name, verdict in self.verdicts.items() if verdict is Verdict.FAIL]

    def failed_checks(self) -> list[Check]:
        """The checks that failed, behind whichever verdicts failed."""
        checks = (
            *self.dispatch.checks,
            self.prompt_tokens.check,
            self.output_tokens.check,
            *self.cache.checks,
            *((self.failures.check,) if self.failures is not None else ()),
            *(self.client_cost.checks if self.client_cost is not None else ()),
        )
        return [c for c in checks if c.verdict is Verdict.FAIL]


def build_document(
    dispatch: DispatchFidelity,
    prompt_tokens: TokenReconciliation,
    output_tokens: TokenReconciliation,
    cache: CacheColdness,
    goodput: TokenGoodput,
    population_sha256: str | None,
    sequences: Sequence[SequenceDigest],
    trials: Sequence[MetricSummary] = (),
    failures: FailedRequests | None = None,
    certification: Sequence[MetricCertification] = (),
    slo_bounds: Sequence[BoundClaim] = (),
    scheduled_latency: ScheduledLatency | None = None,
    steady_state: SteadyState | None = None,
    client_cost: ClientCost | None = None,
    measured: Measured | None = None,
) -> ValidityDocument:
    """Assemble the document; ``verdict`` combines the named verdicts."""
    verdicts: dict[str, Verdict] = {}
    if failures is not None:
        verdicts["requests_succeeded"] = failures.verdict
    verdicts |= {
        "load_generator_kept_up": dispatch.load_generator_kept_up,
        "prompt_tokens_reconciled": prompt_tokens.verdict,
        "output_lengths_honored": output_tokens.verdict,
        "cache_cold": cache.cache_cold,
    }
    if client_cost is not None:
        verdicts["client_cost_low"] = client_cost.client_cost_low
    explanations: dict[str, str] = {}
    if failures is not None:
        explanations["requests_succeeded"] = words.requests_succeeded(failures)
    explanations |= {
        "load_generator_kept_up": words.load_generator_kept_up(dispatch, measured),
        "prompt_tokens_reconciled": words.tokens_reconciled(prompt_tokens, "prompt"),
        "output_lengths_honored": words.tokens_reconciled(output_tokens, "output"),
        "cache_cold": words.cache_cold(cache, measured),
    }
    if client_cost is not None:
        explanations["client_cost_low"] = words.client_cost(client_cost, measured)
    return ValidityDocument(
        verdict=combine(verdicts.values()),
        verdicts=verdicts,
        dispatch=dispatch,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        cache=cache,
        goodput=goodput,
        population_sha256=population_sha256,
        sequences=tuple(sequences),
        trials=tuple(trials),
        failures=failures,
        certification=tuple(certification),
        slo_bounds=tuple(slo_bounds),
        scheduled_latency=scheduled_latency,
        steady_state=steady_state,
        explanations=explanations,
        client_cost=client_cost,
        measured=measured,
    )


def summary_lines(doc: ValidityDocument) -> list[str]:
    """A few human lines: each verdict with its key figures, goodput, digests, trials."""
    lines = [f"validity: {doc.verdict.value}{_failures_headline(doc.failures)}"]
    figures = {
        "requests_succeeded": lambda: _failure_figures(doc.failures) if doc.failures else "",
        "load_generator_kept_up": lambda: _dispatch_figures(doc.dispatch),
        "prompt_tokens_reconciled": lambda: _token_figures(doc.prompt_tokens),
        "output_lengths_honored": lambda: _token_figures(doc.output_tokens),
        "cache_cold": lambda: _cache_figures(doc.cache),
        "client_cost_low": lambda: _cost_figures(doc.client_cost) if doc.client_cost else "",
    }
    for name, verdict in doc.verdicts.items():
        lines.append(verdict_line(doc, name, verdict))
        if name in figures and not (name == "requests_succeeded" and verdict is Verdict.PASS):
            lines.append(f"      figures: {figures[name]()}")
    if doc.goodput.slo_set:
        lines.append(f"  token goodput: {_goodput_figures(doc.goodput)}")
    lines += [_certification_line(m) for m in doc.certification if m.samples]
    lines += [_bound_line(b) for b in doc.slo_bounds]
    if doc.scheduled_latency is not None:
        lines.append(f"  latency from the scheduled send: {doc.scheduled_latency.sentence}")
    if doc.steady_state is not None:
        lines.append(f"  steady state: {doc.steady_state.sentence}")
    if doc.measured is not None:
        lines.append(f"  measured: {measured_figures(doc.measured)}")
    lines += _digest_lines(doc)
    lines += trial_lines(doc.trials)
    return lines


def verdict_line(doc: ValidityDocument, name: str, verdict: Verdict) -> str:
    """``  load generator kept up: pass. The client sent ...``: a verdict and its sentence."""
    sentence = doc.explanations.get(name)
    head = f"  {name.replace('_', ' ')}: {verdict.value}"
    return f"{head}. {sentence}" if sentence else head


def _certification_line(metric: MetricCertification) -> str:
    """``ttft_ms percentiles from 40 requests: p90, p95, p99 not certified (p90 needs 64 ...)``."""
    missing = [c for c in metric.claims if not c.certified]
    head = f"  {metric.metric} percentiles from {metric.samples} requests: "
    if not missing:
        return head + "all certified (MLPerf early stopping, 99% confidence)"
    needs = ", ".join(f"p{c.percentile:g} needs {c.needed_samples}" for c in missing)
    best = metric.highest_certified_percentile
    certified = f"certified up to p{best:g}" if best is not None else "none certified"
    return f"{head}{certified}; estimates only beyond ({needs})"


def _bound_line(claim: BoundClaim) -> str:
    """``SLO ttft_ms <= 500 at p90: holds, certified (3 of 100 over; 67 needed)``."""
    head = f"  SLO {claim.metric} <= {claim.bound_ms:g} at p{claim.percentile:g}: "
    figures = f"{claim.over_bound} of {claim.samples} over; {claim.needed_samples} needed"
    if claim.certified:
        return f"{head}holds, certified ({figures})"
    if claim.met_by_share:
        more = claim.needed_samples - claim.samples
        return f"{head}holds by share but not certified: {more} more requests needed ({figures})"
    return f"{head}missed ({figures})"


def failed_check_text(check: Check) -> str:
    """``name observed (bound b)``: one failed check, short enough for a case's one line."""
    parts = [check.name]
    if check.observed is not None:
        parts.append(_num(check.observed))
    if check.bound is not None:
        parts.append(f"(bound {check.bound:.3g})")
    return " ".join(parts)


def _failures_headline(failures: FailedRequests | None) -> str:
    """`` (6 of 24 requests failed: transport 6)``: the first line says it when any failed."""
    if failures is None or not failures.failed:
        return ""
    return f" ({failures.in_words()})"


def _failure_figures(f: FailedRequests) -> str:
    examples = "; ".join(f"{c.error_class.value}: {c.example}" for c in f.classes)
    return f.in_words() + (f"; first of each: {examples}" if examples else "")


def _dispatch_figures(d: DispatchFidelity) -> str:
    parts = []
    if d.target_rate is not None:
        parts.append(f"rate {_num(d.achieved_rate)}/s of {d.target_rate:g}/s")
        parts.append(f"CV {_num(d.interarrival_cv)} vs {_num(d.expected_interarrival_cv)}")
    if d.asked_concurrency is not None:
        parts.append(f"held {_num(d.held_concurrency)} of {d.asked_concurrency} in flight")
    if d.dispatch_delay_ms is not None:
        parts.append(f"dispatch delay p95 {d.dispatch_delay_ms.p95:.1f} ms")
    if d.client_send_ms is not None:
        parts.append(f"client send mean {d.client_send_ms.mean:.2f} ms")
    failed = [c.name for c in d.checks if c.verdict is Verdict.FAIL]
    if failed:
        parts.append("failed: " + ", ".join(failed))
    return "; ".join(parts)


def _cost_figures(c: ClientCost) -> str:
    parts = []
    if c.cpu_ms_per_request is not None:
        parts.append(f"CPU {c.cpu_ms_per_request:.1f} ms per request")
    if c.cores_used is not None:
        parts.append(f"{c.cores_used:.2f} of {c.host_cores} cores")
    if c.runnable_per_core is not None:
        parts.append(f"run queue {c.runnable_per_core:.2f} per core")
    if c.first_token_late_p90_ms is not None:
        parts.append(f"first token read late p90 {c.first_token_late_p90_ms:.2f} ms")
    if c.stream_stall_p90_ms is not None:
        parts.append(f"stream read stall p90 {c.stream_stall_p90_ms:.2f} ms")
    if c.send_time_ms is not None:
        parts.append(f"send time p95 {c.send_time_ms.p95:.2f} ms")
    if c.send_delay_ms is not None:
        parts.append(f"send delay p95 {c.send_delay_ms.p95:.2f} ms")
    failed = [check.name for check in c.checks if check.verdict is Verdict.FAIL]
    if failed:
        parts.append("failed: " + ", ".join(failed))
    return "; ".join(parts) or c.in_words


def measured_figures(m: Measured) -> str:
    """``client added TTFT p50/p90 +0.4/+1.1 ms, ...; arrival late p95 2.0 ms ...``."""
    added = m.client_added_ms

    def pair(metric: str) -> str:
        p50, p90 = added.get(f"{metric}_p50"), added.get(f"{metric}_p90")
        shown = "/".join("n/a" if v is None else f"{v:+.2f}" for v in (p50, p90))
        return f"{metric.upper()} p50/p90 {shown} ms"

    parts = [
        f"against the simulator's ground truth ({m.requests} requests): client added "
        + ", ".join(pair(metric) for metric in ("ttft", "itl", "e2e"))
    ]
    if m.arrival_late_ms is not None:
        parts.append(
            f"arrival late p50 {m.arrival_late_ms.p50:.1f} ms, p95 {m.arrival_late_ms.p95:.1f} "
            f"ms (allowed {m.arrival_late_bound_ms:g})"
        )
    if m.first_wave_cached_tokens is not None:
        parts.append(f"first wave found {m.first_wave_cached_tokens} cached tokens")
    proxies = [
        f"{name} {said.value}"
        for name, said in m.by_proxies.items()
        if said in (Verdict.PASS, Verdict.FAIL)
    ]
    if proxies:
        parts.append("the proxies alone said " + ", ".join(proxies))
    return "; ".join(parts)


def _token_figures(t: TokenReconciliation) -> str:
    if t.difference is None:
        return t.check.detail
    if t.constant_offset is not None:
        return (
            f"constant offset {t.constant_offset:+d} tokens on all {t.compared} requests: "
            "the server adds something to every prompt (a BOS token, a default system prompt)"
        )
    return (
        f"{t.mismatched}/{t.compared} off, {t.shorter} short, {t.longer} long; "
        f"difference p50 {t.difference.p50:+g}, min {t.difference.minimum:+g}, "
        f"max {t.difference.maximum:+g} tokens"
    )


def _cache_figures(c: CacheColdness) -> str:
    ratios = ", ".join(f"{p.phase} read ratio {_num(p.read_ratio)}" for p in c.phases)
    if c.cold_start is None:
        return f"{ratios}; first wave: not judged"
    cold = c.cold_start
    return (
        f"{ratios}; first wave of {cold.checked_requests}: first request cached "
        f"{cold.first_request_cached_tokens}, {cold.exceeding_requests} over their shared prefix"
    )


def _goodput_figures(g: TokenGoodput) -> str:
    return (
        f"{_num(g.request_goodput)} good req/s, {_num(g.good_output_token_goodput)} good "
        f"output tok/s, {_num(g.good_total_token_goodput)} good total tok/s"
    )


def _digest_lines(doc: ValidityDocument) -> list[str]:
    lines = [f"  population sha256: {doc.population_sha256 or 'n/a'}"]
    lines += [
        f"  {s.phase} sequence sha256: {s.sequence_sha256} ({s.requests} requests)"
        for s in doc.sequences
    ]
    return lines


def trial_lines(summaries: Sequence[MetricSummary]) -> list[str]:
    """One line per metric: mean and confidence interval, or why it is unknown."""
    lines = []
    for s in summaries:
        if s.ci_half_width is None:
            lines.append(f"  {s.metric}: {s.mean:.4g} (1 trial: confidence interval unknown)")
        else:
            lines.append(
                f"  {s.metric}: {s.mean:.4g} ± {s.ci_half_width:.3g} "
                f"({s.confidence:.0%} CI, {s.trials} trials)"
            )
    return lines


def comparison_lines(comparisons: Sequence[NoiseComparison]) -> list[str]:
    """One line per metric: the difference b - a and whether it is beyond noise."""
    lines = []
    for c in comparisons:
        p = "" if c.p_value is None else f", p={c.p_value:.3g}"
        noise = c.noise.replace("_", " ")
        lines.append(
            f"  {c.metric}: {c.a_mean:.4g} -> {c.b_mean:.4g} ({c.difference:+.4g}{p}): {noise}"
        )
    return lines


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"
