"""One plain sentence per verdict, for a person: what it found, and what to do about a failure.

The figures stay in validity.json beside each verdict; these sentences say what they mean
(``client_send_share_of_ttft 0.298`` becomes "the client itself took 30% of the time to first
token: ..."). validity.json carries them as ``explanations`` and every screen shows them.
"""

from __future__ import annotations

from collections.abc import Callable

from inferlab_bench.validity.cache import CacheColdness
from inferlab_bench.validity.client_cost import ClientCost
from inferlab_bench.validity.dispatch import DispatchFidelity
from inferlab_bench.validity.failures import FailedRequests
from inferlab_bench.validity.measured import Measured, distortion_of
from inferlab_bench.validity.tokens import TokenReconciliation
from inferlab_bench.validity.verdict import Check, Verdict

KUBE_HINT = "lower the load or run the client on its own machine (--engine kube)"
CALIBRATED_FOR = (
    "these checks stand in for the client-added latency; they were calibrated against the "
    "simulator's truth to fail when the client adds more than max(3 ms, 5%) to TTFT p90 "
    "(docs/calibration.md)"
)


def requests_succeeded(failures: FailedRequests) -> str:
    if failures.verdict is Verdict.PASS:
        return f"All {failures.requests} requests succeeded."
    if failures.verdict is not Verdict.FAIL:
        return f"Not judged: {failures.check.detail}."
    return (
        f"{_capital(failures.in_words())}: every figure covers only the ones that succeeded, "
        "so the server did not carry the load that was asked; see the first error of each kind."
    )


def load_generator_kept_up(dispatch: DispatchFidelity, measured: Measured | None = None) -> str:
    sentence = _kept_up(dispatch)
    late = measured.arrival_late_ms if measured is not None else None
    if measured is None or late is None:
        return sentence
    if any(c.name == "arrival_late_p95_ms" and c.verdict is Verdict.FAIL for c in dispatch.checks):
        return sentence
    return (
        f"{sentence} Requests reached the server {late.p95:.1f} ms (p95) after AIPerf decided "
        f"to send them, within {measured.arrival_late_bound_ms:g} ms (the simulator's truth)."
    )


def _kept_up(dispatch: DispatchFidelity) -> str:
    verdict = dispatch.load_generator_kept_up
    failed = [c for c in dispatch.checks if c.verdict is Verdict.FAIL]
    if failed:
        return " ".join(_capital(_dispatch_failure(c, dispatch)) + "." for c in failed)
    if verdict is Verdict.UNKNOWN:
        undecided = [c for c in dispatch.checks if c.verdict is Verdict.UNKNOWN]
        reasons = "; ".join(c.detail or c.name for c in undecided)
        return f"Could not tell whether the client kept up with the load ({reasons})."
    if dispatch.target_rate is not None and dispatch.achieved_rate is not None:
        return (
            f"The client sent at {dispatch.achieved_rate:.3g} requests/s of the "
            f"{dispatch.target_rate:g} asked, with the arrival pattern asked."
        )
    if dispatch.asked_concurrency is not None and dispatch.held_concurrency is not None:
        return (
            f"The client kept {dispatch.held_concurrency:.3g} of {dispatch.asked_concurrency} "
            f"{dispatch.held_unit} in flight, as asked."
        )
    return "The client sent the load as asked."


def _dispatch_failure(check: Check, d: DispatchFidelity) -> str:
    """The sentence for one failed dispatch check, by name (its detail for any other)."""
    sentence = _DISPATCH.get(check.name)
    return sentence(check, d) if sentence is not None else f"{check.name}: {check.detail}"


def _delay(check: Check, d: DispatchFidelity) -> str:
    return (
        f"requests waited {check.observed or 0:.0f} ms (p95) between the moment they were due "
        f"and the moment they were sent: the client fell behind the load; {KUBE_HINT}"
    )


def _late(check: Check, d: DispatchFidelity) -> str:
    return (
        f"requests reached the server {check.observed or 0:.0f} ms (p95) after AIPerf decided "
        f"to send them, beyond {check.bound or 0:g} ms (the simulator's truth): the client fell "
        f"behind the load; {KUBE_HINT}"
    )


def _rate(check: Check, d: DispatchFidelity) -> str:
    return (
        f"the client reached {d.achieved_rate or 0:.3g} requests/s of the {d.target_rate or 0:g} "
        f"asked: this machine could not send the rate; {KUBE_HINT}"
    )


def _cv(check: Check, d: DispatchFidelity) -> str:
    return (
        f"the gaps between sends had a spread (CV) of {d.interarrival_cv or 0:.2f} where the "
        f"arrival pattern asks {d.expected_interarrival_cv or 0:.2f}: the load was not the "
        f"one asked; {KUBE_HINT}"
    )


def _held(check: Check, d: DispatchFidelity) -> str:
    return (
        f"only {d.held_concurrency or 0:.3g} of {d.asked_concurrency} {d.held_unit} were in flight "
        f"on average: the client could not keep {d.asked_concurrency} streams busy; {KUBE_HINT}"
    )


def _send_share(check: Check, d: DispatchFidelity) -> str:
    streams = f"{d.asked_concurrency} concurrent streams" if d.asked_concurrency else "this load"
    return (
        f"the client itself took {check.observed or 0:.0%} of the time to first token "
        f"(sending each request): this machine is too slow to drive {streams}; lower the "
        "concurrency or run on Kubernetes (--engine kube)"
    )


def _too_few(check: Check, d: DispatchFidelity) -> str:
    return f"too few requests to judge the dispatch ({check.detail})"


_DISPATCH: dict[str, Callable[[Check, DispatchFidelity], str]] = {
    "dispatch_delay_p95_ms": _delay,
    "arrival_late_p95_ms": _late,
    "achieved_rate_relative_error": _rate,
    "interarrival_cv_error": _cv,
    "held_concurrency_ratio": _held,
    "client_send_share_of_ttft": _send_share,
    "enough_requests": _too_few,
}


def client_cost(cost: ClientCost, measured: Measured | None = None) -> str:
    """``client_cost_low``: its own sentence, with what to do when it failed.

    With the server's truth at hand, the measured client-added latency first, and the
    proxies (CPU, read-late, send time, run queue) as figures after it; else the proxies and
    the bound they were calibrated for.
    """
    if measured is not None and cost.checks and cost.checks[0].name == "client_added_latency_ms":
        return _client_measured(cost, measured)
    sentence = _capital(cost.in_words) + "." if cost.in_words else ""
    if cost.client_cost_low is Verdict.FAIL:
        broken = "; ".join(
            f"{c.name} {c.observed:.2f} over its bound {c.bound:.2f}"
            for c in cost.checks
            if c.verdict is Verdict.FAIL and c.observed is not None and c.bound is not None
        )
        sentence += (
            f" The client cost too much for these latencies to be the server's alone "
            f"({broken}); " + KUBE_HINT + "."
        )
    return f"{sentence} {_capital(CALIBRATED_FOR)}.".strip()


def _client_measured(cost: ClientCost, measured: Measured) -> str:
    """``The client added +4.20 ms to TTFT p90, beyond max(3 ms, 5%) ...``."""
    check = cost.checks[0]
    if check.verdict is Verdict.UNKNOWN:
        return f"Not judged against the simulator's truth: {check.detail}."
    d = distortion_of(measured)
    key = d.worst
    metric, q = key.split("_")
    floor = "0.5 ms" if metric == "itl" else f"{d.tolerance.floor_ms:g} ms"
    rule = f"max({floor}, {d.tolerance.relative:.0%}) = {d.allowed_ms[key]:.2f} ms"
    head = (
        f"Against the simulator's ground truth ({measured.requests} requests) the client added "
        f"{d.added_ms[key]:+.2f} ms to {metric.upper()} {q}"
    )
    if key != "ttft_p90":
        head += f" (TTFT p90 {d.added_ms['ttft_p90']:+.2f} ms)"
    if check.verdict is Verdict.FAIL:
        sentence = (
            f"{head}, beyond {rule}: these latencies are not the server's alone; {KUBE_HINT}."
        )
    else:
        sentence = f"{head}, within {rule}: the latencies are the server's."
    proxies = _proxy_figures(cost, measured)
    return f"{sentence} {proxies}" if proxies else sentence


def _proxy_figures(cost: ClientCost, measured: Measured) -> str:
    """The proxies' own figures and verdict, as a sentence after the measured one."""
    said = measured.by_proxies.get("client_cost_low")
    parts = []
    if cost.cpu_ms_per_request is not None:
        parts.append(f"{cost.cpu_ms_per_request:.1f} ms of CPU per request")
    if cost.first_token_late_p90_ms is not None:
        parts.append(f"first token read late by {cost.first_token_late_p90_ms:.1f} ms at p90")
    if cost.stream_stall_p90_ms is not None:
        parts.append(f"streams read in bursts of {cost.stream_stall_p90_ms:.1f} ms at p90")
    if cost.send_time_ms is not None:
        parts.append(f"send time p95 {cost.send_time_ms.p95:.1f} ms")
    if cost.runnable_per_core is not None:
        parts.append(f"{cost.runnable_per_core:.1f} runnable tasks per core")
    if not parts:
        return ""
    verdict = f" (alone they would have said {said.value})" if said is not None else ""
    return f"Proxies: {', '.join(parts)}{verdict}."


def tokens_reconciled(t: TokenReconciliation, what: str) -> str:
    """``what`` is ``prompt`` or ``output``."""
    if t.verdict is Verdict.PASS:
        if what == "prompt":
            return (
                f"The server counted the prompt tokens the population planned on all "
                f"{t.compared} requests."
            )
        return f"Every one of the {t.compared} requests produced the output length asked."
    if t.verdict is not Verdict.FAIL:
        return f"Not checked: {t.check.detail}."
    if t.constant_offset is not None:
        return (
            f"The server counted {t.constant_offset:+d} {what} tokens on every request: it adds "
            "something of its own to each (a BOS token, a default system prompt); the prompts "
            "are otherwise the ones prepared."
        )
    if what == "prompt":
        return (
            f"The server counted other prompt tokens than planned on {t.mismatched} of "
            f"{t.compared} requests: it does not see the prompts as prepared (another tokenizer "
            "or chat template?), so this is not the population's workload."
        )
    return (
        f"{t.mismatched} of {t.compared} requests did not produce the output length asked "
        f"({t.shorter} short, {t.longer} long): the server ignores max_tokens or ignore_eos, "
        "so the decode work differs from the plan."
    )


def cache_cold(c: CacheColdness, measured: Measured | None = None) -> str:
    sentence = _cache_cold(c)
    if measured is None or measured.first_wave_cached_tokens is None:
        return sentence
    return (
        f"{sentence} Judged by the server's own count: the first wave found "
        f"{measured.first_wave_cached_tokens} cached tokens (the simulator's truth)."
    )


def _cache_cold(c: CacheColdness) -> str:
    check = c.checks[0] if c.checks else None
    if c.cache_cold is Verdict.NOT_APPLICABLE:
        return "No prefix-cache reset was asked, so whether the run started cold is not judged."
    if c.cache_cold is Verdict.UNKNOWN:
        reason = check.detail if check is not None else "no evidence"
        return f"Could not tell whether the run started from an empty prefix cache: {reason}."
    cold = c.cold_start
    if c.cache_cold is Verdict.PASS:
        return (
            "The run started from an empty prefix cache: no early request found more cached "
            "than its prompt shares with the ones before it."
        )
    reason = cold.reason if cold is not None else (check.detail if check else "")
    return (
        f"The prefix cache was not empty when the run started ({reason}): the first TTFTs are "
        "flattered; check the reset method (--reset-prefix-cache)."
    )


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
