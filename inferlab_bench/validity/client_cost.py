"""Client cost: the load generator judged by what it spends, not by a share of what it distorts.

The verdict ``client_cost_low`` over the profiling window (first request start to last
request end), from samples the case stage took of /proc while AIPerf ran:

- CPU time per request of the client's processes (AIPerf's whole process tree): a client
  that polls instead of waiting spends tens of milliseconds of CPU per request at any load;
- the first token read late: a client that was not running when its first token came
  (frozen, throttled, waiting for a core) reads it together with the second one, so its
  time to the second token falls far below its inter-token latency. Per request the lateness
  is at least ITL - TTST when TTST < half the ITL (else taken as 0); its p90 must stay within
  the tolerance ``client_cost_low`` protects, client-added TTFT p90 at most
  max(3 ms, 5% of TTFT p90). Calibrated in docs/calibration.md against the simulator's truth:
  a brake freezing AIPerf 40% of every 100 ms added 26-42 ms to TTFT and this estimate saw it.
  Counted over the whole burst that opens the stream (``read_bursts``), not only its first
  two tokens, where AIPerf kept the chunk gaps;
- a stream read in bursts: the largest burst anywhere in each stream, p90, within
  max(3 ms, 5% of E2E p90). Against llama.cpp (ITL 3-5 ms, 32 tokens) the brake's freezes
  fell mid-stream or at its end, adding 25-36 ms to E2E p90 and about 1 ms to ITL p90 while
  the first token was read on time: the first-token check missed them, this one did not;
- the host's run queue (tasks running or waiting for a core, per core, over the window) is a
  figure and a sentence, not a check: on a busy 2-core host it was 1.8-4.7 in runs whose
  client-added TTFT p90 was under 2 ms (docs/calibration.md). Client and server sharing cores
  is a fact to state, not by itself a failure;
- the client's send inside TTFT: where the request's start is AIPerf's (taken before aiohttp
  asks its pool for a connection: a server that closes after each response, or no plugin of
  ours), the client's own span from that start until the request was written (AIPerf's
  traced ``http_req_sending``: the pool wait, the connect, aiohttp's work, the write) lies
  inside every TTFT and latency. Less the connect's round trip (the run's fastest connect,
  the server's and the network's part), its p90 must stay within max(3 ms, 5% of TTFT p90).
  Calibrated against the wire (docs/calibration.md): beside llama-server on 2 cores at c=4,
  a connection per request, the client added 5-9 ms to TTFT p90 on a quiet host, most of it
  here, and no other check saw it. With the start at the first byte (our transport, every
  pooled run) the send lies before the start, and this is not applicable;
- send time (a figure): from the moment AIPerf's timing strategy decided to send
  (``credit_issued_ns``) until the request was written, less the wait behind the same
  worker's earlier writes, p95. It delays the load (``load_generator_kept_up`` judges that)
  and, beyond the send above, not a latency; it was a check until the wire showed which
  part of it lies inside TTFT.

Every figure comes with a sentence that says, in words, whether the client and the server
share the machine and whether they competed for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inferlab_bench.validity.distribution import Distribution, describe
from inferlab_bench.validity.inputs import BoolArray, FloatArray, PhaseRecords
from inferlab_bench.validity.read_bursts import FIRST_SHARE
from inferlab_bench.validity.verdict import (
    Check,
    Figures,
    Verdict,
    at_most,
    combine_checks,
    not_applicable,
    unknown,
)

NS_PER_S = 1e9
NS_PER_MS = 1e6
MIN_WINDOW_SAMPLES = 2
STALL_CHECK = "stream_read_stall_p90_ms"
SEND_CHECK = "client_send_in_ttft_p90_ms"


@dataclass(frozen=True)
class ClientUsage:
    """What was sampled while the load ran (``case.usage.UsageSeries`` by its shape)."""

    time_ns: tuple[int, ...]
    cpu_seconds: tuple[float, ...]
    """Cumulative CPU seconds of the client's processes at each sample."""
    runnable: tuple[int, ...]
    """Host-wide runnable tasks at each sample (the sampler excluded)."""
    host_cores: int
    server_on_this_host: bool | None = None
    """True: the server answers on an address of this machine; None: not known."""
    start_at_first_byte: bool = False
    """True: the client's request start is its first byte written (our transport's
    ``INFERLAB_WIRE_START``), so its own send time already lies between issue and start."""


@dataclass(frozen=True)
class ClientCostTolerances:
    """Bounds of ``client_cost_low`` (see docs/case.md for how they were measured)."""

    max_cpu_ms_per_request: float = 50.0
    """A waiting AIPerf spends 8-25 ms per 64-token request (most at c=1, where a cost per
    second of run dominates); a spinning one 200-500 ms at c=1 and 20-40 ms at c=16."""
    max_runnable_per_core: float = 1.0
    """Above it client and server are said to have competed (a figure and a sentence)."""
    read_late_floor_ms: float = 3.0
    read_late_relative: float = 0.05
    """First token read late and the send inside TTFT, p90, each at most max(floor,
    relative * TTFT p90); a stream's bursts against E2E p90: the tolerance of client-added
    latency that the calibration measured against the simulator's truth and the wire."""


class ClientCost(Figures):
    """The verdict ``client_cost_low``, its figures and the sentence that says them."""

    client_cost_low: Verdict
    window_seconds: float | None = None
    cpu_seconds: float | None = None
    cpu_ms_per_request: float | None = None
    cores_used: float | None = None
    """Client CPU seconds per second of the window: how many cores it kept busy."""
    host_cores: int | None = None
    mean_runnable: float | None = None
    max_runnable: int | None = None
    runnable_per_core: float | None = None
    server_on_this_host: bool | None = None
    competed: bool | None = None
    """Shared host and more runnable tasks than cores: client and server took turns."""
    send_delay_ms: Distribution | None = None
    """Credit issued -> request written, the whole of it."""
    send_time_ms: Distribution | None = None
    """The same less the wait behind the worker's earlier writes (see ``send_times_ms``)."""
    first_token_late_ms: Distribution | None = None
    """Per request, how late the client read its first token at least (``read_late_ms``)."""
    first_token_late_p90_ms: float | None = None
    late_reads: int | None = None
    """Requests whose first tokens were read in a burst (at least the first two together)."""
    stream_stall_p90_ms: float | None = None
    """p90 over requests of the largest burst anywhere in a stream (``read_bursts``)."""
    send_in_ttft_p90_ms: float | None = None
    """p90 over requests of the client's send inside TTFT (``send_in_ttft_ms``)."""
    checks: tuple[Check, ...] = ()
    in_words: str = ""


def interpolate(time_ns: FloatArray, values: FloatArray, at_ns: float) -> float:
    """A cumulative series' value at ``at_ns`` (clamped to the first and last sample)."""
    return float(np.interp(at_ns, time_ns, values))


def window_usage(usage: ClientUsage, lo_ns: int, hi_ns: int) -> tuple[float, float, int] | None:
    """CPU seconds spent in [lo, hi], mean and max runnable tasks there; None: too few samples."""
    times = np.asarray(usage.time_ns, dtype=np.float64)
    if times.size < MIN_WINDOW_SAMPLES or hi_ns <= lo_ns:
        return None
    if times[0] > hi_ns or times[-1] < lo_ns:
        return None
    cpu = np.asarray(usage.cpu_seconds, dtype=np.float64)
    spent = interpolate(times, cpu, hi_ns) - interpolate(times, cpu, lo_ns)
    inside = (times >= lo_ns) & (times <= hi_ns)
    runnable = np.asarray(usage.runnable, dtype=np.float64)
    if not inside.any():  # a window shorter than the sampling interval: the nearest sample
        inside = np.abs(times - (lo_ns + hi_ns) / 2) == np.abs(times - (lo_ns + hi_ns) / 2).min()
    return max(0.0, spent), float(runnable[inside].mean()), int(runnable[inside].max())


def send_delays_ms(records: PhaseRecords, start_at_write: bool = False) -> FloatArray | None:
    """Per request, ms from the credit's issue until the request was written (None: unknown).

    AIPerf's start stamp comes before the client's traced send time (waiting for a
    connection, connecting, writing), which is added; a start taken at the write
    (``start_at_write``) already includes it.
    """
    if records.credit_issued_ns is None:
        return None
    delay = (records.start_ns - records.credit_issued_ns).astype(np.float64) / NS_PER_MS
    if records.client_send_ms is not None and not start_at_write:
        delay = delay + np.nan_to_num(records.client_send_ms)
    return delay


def send_times_ms(delays_ms: FloatArray, records: PhaseRecords) -> FloatArray | None:
    """Per request, ms its worker took to write it once the worker was free to.

    The worker is free from the credit's issue or from its own previous write, whichever
    comes later: taken in the order each worker wrote, time ``k`` is ``written_k -
    max(issued_k, written_{k-1})``, the service time of a queue's k-th departure. Over a
    burst the times add up to the whole burst (first issue to last write). None: the
    records name no workers.
    """
    if records.credit_issued_ns is None or records.worker_ids is None or len(records) == 0:
        return None
    issued = (records.credit_issued_ns - records.credit_issued_ns.min()).astype(np.float64)
    issued /= NS_PER_MS
    written = issued + delays_ms
    times = np.empty_like(delays_ms)
    workers = np.asarray(records.worker_ids, dtype=object)
    for worker in set(records.worker_ids):
        mine = np.flatnonzero(workers == worker)
        mine = mine[np.argsort(written[mine], kind="stable")]
        previous = np.concatenate(([-np.inf], written[mine][:-1]))
        times[mine] = written[mine] - np.maximum(issued[mine], previous)
    # Never more than the whole delay: taken apart and put back, the float sums can round a
    # request with no queue a few 1e-15 ms over it.
    found: FloatArray = np.minimum(times, delays_ms)
    return found


def assess_client_cost(
    records: PhaseRecords,
    usage: ClientUsage | None,
    tol: ClientCostTolerances = ClientCostTolerances(),
) -> ClientCost:
    """``client_cost_low`` of one phase: CPU per request, the send inside TTFT, the reads, the
    run queue and the send time, in words."""
    at_write = None if usage is None else usage.start_at_first_byte
    delays = send_delays_ms(records, bool(at_write))
    send = describe(delays) if delays is not None else None
    own = send_times_ms(delays, records) if delays is not None else None
    send_time = describe(own) if own is not None else None
    send_check = _send_check(records, send_in_ttft_ms(records, bool(at_write)), at_write, tol)
    late = read_late_ms(records)
    read_check = _read_check(records, late, tol)
    stalls = stall_ms(records)
    stall_check = _stall_check(records, stalls, tol)
    late_figures = describe(late) if late is not None and late.size else None
    late_p90 = read_check.observed
    late_count = None if late is None else int(np.count_nonzero(late))
    window = _window(records, usage)
    if usage is None or window is None:
        reason = (
            "the client's processes were not sampled (AIPerf ran elsewhere, or not on Linux)"
            if usage is None
            else "too few samples inside the load window"
        )
        checks: tuple[Check, ...] = (
            unknown("client_cpu_ms_per_request", reason),
            send_check,
            read_check,
            stall_check,
        )
        return ClientCost(
            client_cost_low=combine_checks(checks),
            server_on_this_host=None if usage is None else usage.server_on_this_host,
            send_delay_ms=send,
            send_time_ms=send_time,
            first_token_late_ms=late_figures,
            first_token_late_p90_ms=late_p90,
            late_reads=late_count,
            stream_stall_p90_ms=stall_check.observed,
            send_in_ttft_p90_ms=send_check.observed,
            checks=checks,
            in_words=f"client cost not measured: {reason}",
        )
    seconds, (cpu, mean_run, max_run) = window
    n = max(len(records), 1)
    per_request = cpu * 1e3 / n
    per_core = mean_run / usage.host_cores
    shared = usage.server_on_this_host
    competed = None if shared is None else bool(shared and per_core > tol.max_runnable_per_core)
    checks = (
        at_most(
            "client_cpu_ms_per_request",
            per_request,
            tol.max_cpu_ms_per_request,
            f"{cpu:.2f} s of client CPU over {len(records)} requests",
        ),
        send_check,
        read_check,
        stall_check,
    )
    cost = ClientCost(
        client_cost_low=combine_checks(checks),
        window_seconds=seconds,
        cpu_seconds=cpu,
        cpu_ms_per_request=per_request,
        cores_used=cpu / seconds,
        host_cores=usage.host_cores,
        mean_runnable=mean_run,
        max_runnable=max_run,
        runnable_per_core=per_core,
        server_on_this_host=shared,
        competed=competed,
        send_delay_ms=send,
        send_time_ms=send_time,
        first_token_late_ms=late_figures,
        first_token_late_p90_ms=late_p90,
        late_reads=late_count,
        stream_stall_p90_ms=stall_check.observed,
        send_in_ttft_p90_ms=send_check.observed,
        checks=checks,
    )
    return cost.model_copy(update={"in_words": in_words(cost)})


def send_in_ttft_ms(records: PhaseRecords, start_at_write: bool) -> FloatArray | None:
    """Per succeeded request, ms of the client's own send inside its TTFT (None: none lies
    there, or it was not traced).

    AIPerf's traced send (its start until the request was written) less the connect's round
    trip, taken as the run's fastest connect, for the requests that connected: what is left
    is the pool wait, aiohttp's work, the client's waits for a core and the write. With the
    start at the first byte (``start_at_write``) the send lies before the start.
    """
    if start_at_write or records.client_send_ms is None:
        return None
    send = records.client_send_ms
    if records.connect_ms is not None:
        connected = records.connect_ms > 0
        if connected.any():
            send = send - np.where(connected, records.connect_ms[connected].min(), 0.0)
    found = send[records.succeeded & np.isfinite(send)]
    return np.maximum(found, 0.0) if found.size else None


def _send_check(
    records: PhaseRecords,
    send: FloatArray | None,
    at_write: bool | None,
    tol: ClientCostTolerances,
) -> Check:
    if at_write is None:
        return unknown(SEND_CHECK, "not known whether the start was the first byte written")
    if at_write:
        return not_applicable(
            SEND_CHECK, "the requests' start is their first byte written: the send lies before it"
        )
    if send is None:
        return unknown(SEND_CHECK, "AIPerf traced no send (http_req_sending)")
    ttft_p90 = _p90(records.ttft_ms, records.succeeded)
    bound = max(tol.read_late_floor_ms, tol.read_late_relative * ttft_p90)
    return at_most(
        SEND_CHECK,
        float(np.percentile(send, 90)),
        bound,
        f"ms from the request's start until it was written, less the connect's round trip "
        f"(p50 {np.percentile(send, 50):.2f} ms); allowed max({tol.read_late_floor_ms:g} ms, "
        f"{tol.read_late_relative:.0%} of TTFT p90 {ttft_p90:.1f} ms)",
    )


def _p90(values: FloatArray | None, succeeded: BoolArray) -> float:
    """p90 of a column over the succeeded requests where it was measured (0: none)."""
    finite = values[succeeded & np.isfinite(values)] if values is not None else np.zeros(0)
    return float(np.percentile(finite, 90)) if finite.size else 0.0


def read_late_ms(records: PhaseRecords) -> FloatArray | None:
    """Per succeeded request, ms its first token was read late at least (None: not measured).

    From the burst that opens its stream (``read_bursts``); where the records kept no chunk
    gaps, from TTST alone: ITL - TTST when TTST is under half the ITL (one ITL at most).
    A punctual read gives 0.
    """
    if records.ttst_ms is None or records.itl_ms is None:
        return None
    ttst, itl = records.ttst_ms, records.itl_ms
    ok = records.succeeded & np.isfinite(ttst) & np.isfinite(itl) & (itl > 0)
    if not ok.any():
        return None
    ttst, itl = ttst[ok], itl[ok]
    late: FloatArray = np.where(ttst < FIRST_SHARE * itl, itl - ttst, 0.0)
    if records.first_burst_ms is not None:
        burst = records.first_burst_ms[ok]
        late = np.where(np.isfinite(burst), burst, late)
    return late


def stall_ms(records: PhaseRecords) -> FloatArray | None:
    """Per succeeded request, the largest burst anywhere in its stream, ms (None: no record
    kept its chunk gaps)."""
    if records.largest_burst_ms is None:
        return None
    found = records.largest_burst_ms[records.succeeded]
    found = found[np.isfinite(found)]
    return found if found.size else None


def _stall_check(
    records: PhaseRecords, stall: FloatArray | None, tol: ClientCostTolerances
) -> Check:
    if stall is None:
        return unknown(STALL_CHECK, "AIPerf kept no chunk gaps (inter_chunk_latency)")
    e2e_p90 = _p90(records.latency_ms, records.succeeded)
    bound = max(tol.read_late_floor_ms, tol.read_late_relative * e2e_p90)
    return at_most(
        STALL_CHECK,
        float(np.percentile(stall, 90)),
        bound,
        f"{int(np.count_nonzero(stall))} of {stall.size} requests read tokens of their stream "
        f"in a burst; allowed max({tol.read_late_floor_ms:g} ms, "
        f"{tol.read_late_relative:.0%} of E2E p90 {e2e_p90:.1f} ms)",
    )


def _read_check(records: PhaseRecords, late: FloatArray | None, tol: ClientCostTolerances) -> Check:
    if late is None:
        return unknown(
            "first_token_read_late_p90_ms",
            "no request has a second token (AIPerf's time_to_second_token)",
        )
    ttft_p90 = _p90(records.ttft_ms, records.succeeded)
    bound = max(tol.read_late_floor_ms, tol.read_late_relative * ttft_p90)
    return at_most(
        "first_token_read_late_p90_ms",
        float(np.percentile(late, 90)),
        bound,
        f"{int(np.count_nonzero(late))} of {late.size} requests read their first tokens "
        f"in a burst; allowed max({tol.read_late_floor_ms:g} ms, "
        f"{tol.read_late_relative:.0%} of TTFT p90 {ttft_p90:.1f} ms)",
    )


def in_words(cost: ClientCost) -> str:
    """One plain sentence: the client's cost, and whether it and the server competed."""
    assert cost.cpu_ms_per_request is not None and cost.cores_used is not None
    head = (
        f"the client used {cost.cpu_ms_per_request:.1f} ms of CPU per request "
        f"({cost.cores_used:.2f} of {cost.host_cores} cores)"
    )
    queue = f"{cost.mean_runnable:.1f} tasks wanted a core on average"
    if cost.first_token_late_p90_ms is not None and cost.late_reads:
        queue += (
            f"; {cost.late_reads} requests read their first token late "
            f"(by at least {cost.first_token_late_p90_ms:.1f} ms at p90)"
        )
    slow_send = any(c.name == SEND_CHECK and c.verdict is Verdict.FAIL for c in cost.checks)
    if slow_send and cost.send_in_ttft_p90_ms is not None:
        queue += (
            f"; requests took {cost.send_in_ttft_p90_ms:.1f} ms at p90 from their start to "
            "their first byte written, inside their TTFT"
        )
    stalled = any(c.name == STALL_CHECK and c.verdict is Verdict.FAIL for c in cost.checks)
    if stalled and cost.stream_stall_p90_ms is not None:
        queue += (
            f"; tokens were read in bursts mid-stream (held at least "
            f"{cost.stream_stall_p90_ms:.1f} ms at p90, by the client or between it and the server)"
        )
    if cost.server_on_this_host is None:
        where = "whether the server runs on this machine is not known"
    elif not cost.server_on_this_host:
        where = "the server runs on another machine"
    elif cost.competed:
        where = (
            "client and server share this machine and competed for its cores: "
            "server time in the latencies includes waits for a core"
        )
    else:
        where = "client and server share this machine but did not compete for its cores"
    return f"{head}; {queue}; {where}"


def _window(
    records: PhaseRecords, usage: ClientUsage | None
) -> tuple[float, tuple[float, float, int]] | None:
    if usage is None or len(records) == 0:
        return None
    lo, hi = int(records.start_ns.min()), int(records.end_ns.max())
    found = window_usage(usage, lo, hi)
    return None if found is None else ((hi - lo) / NS_PER_S, found)
