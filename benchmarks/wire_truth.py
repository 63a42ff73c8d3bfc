"""The wire as a third truth: what the client added, measured at the kernel's loopback device.

The simulator's truth stamps a request's arrival when the server parses it, and llama.cpp's
counts only its model's compute, so on a shared, busy host both put the server's own wait for
a core (its HTTP layer, its parse) on the client's side. The loopback device sees neither
process: a packet capture (``AF_PACKET`` on ``lo``, kernel timestamps) stamps the moment the
client's request bytes and each of the server's stream events were handed to the kernel.
Joined with AIPerf's raw export (every event's read time, under the request's X-Request-ID),
per request:

- wire TTFT = the first token's event on the wire - the request's first byte on the wire;
- client-added TTFT = client TTFT - wire TTFT: the client's start stamp to its first byte
  out, plus its first token on the wire to the client's read of it;
- the same for E2E (the event AIPerf ends the request on) and the decode (E2E - TTFT), and
  ITL = decode / (output tokens - 1);
- where the request opened its connection (AIPerf's start then comes before the connect),
  the server's part of the handshake, SYN to SYN-ACK, is the server's too.

Everything between the two directions (the kernel, the server's scheduling and parse) is the
server's. A retransmitted segment keeps the time it was first sent. Needs CAP_NET_RAW (root
here); ``capture`` raises ``PermissionError`` without it. Loopback traffic only: the server
must listen on 127.0.0.1. Tested against a known answer in ``tests/test_wire_truth.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import socket
import struct
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from inferlab_bench.validity.truth import (
    CLIENT_TOLERANCE,
    ClientTolerance,
    TruthRow,
    client_distortion,
)

ETH_P_IP = 0x0800
PACKET_HOST = 0
"""A socket bound to one protocol sees each loopback packet once, as received: stamped as the
loopback device takes it from the sender (``netif_rx``), within microseconds of its write."""
SO_TIMESTAMPNS = 35
SYN = 0x02
SOL_PACKET, PACKET_STATISTICS = 263, 6
RECEIVE_BUFFER = 64 << 20
REQUEST_ID = re.compile(rb"x-request-id:\s*([^\r\n]+)", re.IGNORECASE)
EVENT = re.compile(rb"data: ?([^\r\n]*)")


@dataclass(frozen=True)
class Packet:
    ns: int  # CLOCK_MONOTONIC, the clock AIPerf's perf_ns runs on
    connection: tuple[int, int]  # (client port, server port)
    to_server: bool
    payload: bytes
    sequence: int = 0  # TCP sequence number of the payload's first byte

    @property
    def opens(self) -> bool:
        """The client's SYN: it opens a connection (no payload: only SYNs are kept so)."""
        return self.to_server and not self.payload

    @property
    def accepts(self) -> bool:
        """The server's SYN-ACK."""
        return not self.to_server and not self.payload


@dataclass
class Capture:
    """Packets of TCP payload to or from ``port`` on 127.0.0.1, with kernel timestamps."""

    port: int
    packets: list[Packet] = field(default_factory=list)
    dropped: int = 0


@contextlib.contextmanager
def capture(port: int) -> Iterator[Capture]:
    """Capture ``port``'s loopback TCP payloads while the block runs."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("lo", 0))
    sock.settimeout(0.2)
    found = Capture(port)
    stop = threading.Event()
    # Kernel stamps are CLOCK_REALTIME; AIPerf's perf_ns is CLOCK_MONOTONIC.
    offset = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()

    def read() -> None:
        while not stop.is_set():
            try:
                data, ancillary, _, address = sock.recvmsg(1 << 16, 64)
            except TimeoutError:
                continue
            except OSError:
                return
            if address[2] != PACKET_HOST:
                continue
            packet = _tcp_payload(data, port)
            if packet is None:
                continue
            stamp = _stamp(ancillary)
            if stamp is None:
                continue
            found.packets.append(Packet(stamp - offset, *packet))

    reader = threading.Thread(target=read, name="wire-capture", daemon=True)
    reader.start()
    try:
        yield found
    finally:
        time.sleep(0.3)  # the last packets of the run are in the buffer
        stop.set()
        reader.join()
        with contextlib.suppress(OSError):
            stats = sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
            found.dropped = struct.unpack("II", stats)[1]
        sock.close()


def _stamp(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanos = struct.unpack("qq", data[:16])
            return int(seconds) * 1_000_000_000 + int(nanos)
    return None


def _tcp_payload(data: bytes, port: int) -> tuple[tuple[int, int], bool, bytes, int] | None:
    """(connection, to the server, payload, sequence) of an IPv4 TCP packet to or from ``port``."""
    if len(data) < 20 or data[9] != socket.IPPROTO_TCP:
        return None
    ihl = (data[0] & 0x0F) * 4
    source, dest, sequence = struct.unpack("!HHI", data[ihl : ihl + 8])
    if port not in (source, dest):
        return None
    offset = ihl + (data[ihl + 12] >> 4) * 4
    total = struct.unpack("!H", data[2:4])[0]
    payload = data[offset:total]
    to_server = dest == port
    if not payload and not data[ihl + 13] & SYN:  # kept without payload: the handshake's SYNs
        return None
    return ((source if to_server else dest), port), to_server, payload, sequence


# --- The join: pure, on captured packets and AIPerf's raw export ------------------------------


@dataclass(frozen=True)
class WireRequest:
    """One request as the wire saw it: its first packet out, and each event back (ns).

    When the request opened its connection (a server that closes after each response)
    AIPerf's start comes before the connect, so its figures hold the handshake: the wire's
    hold the server's part of it too (SYN to SYN-ACK, ``server_before_ms``), and the client's
    parts (start to SYN, SYN-ACK to its first byte) are the client's.
    """

    request_id: str
    sent_ns: int
    events: tuple[tuple[int, bytes], ...]  # (ns, the data line) in the order written
    server_before_ns: int = 0


@dataclass
class _Pending:
    """A request being read off its connection: its id once its head is in."""

    sent_ns: int
    server_before_ns: int
    head: bytes = b""
    request_id: str | None = None
    events: list[tuple[int, bytes]] = field(default_factory=list)

    def done(self) -> WireRequest | None:
        if not self.request_id:
            return None
        return WireRequest(self.request_id, self.sent_ns, tuple(self.events), self.server_before_ns)


def wire_requests(packets: Iterable[Packet]) -> dict[str, WireRequest]:
    """Every request on the wire by X-Request-ID, with the events written back to it.

    A request begins with a client packet that starts with an HTTP method; its events are
    the ``data:`` lines the server wrote on that connection until the next request there.
    """
    by_connection: dict[tuple[int, int], list[Packet]] = {}
    for packet in first_sendings(packets):
        by_connection.setdefault(packet.connection, []).append(packet)
    pending: list[_Pending] = []
    for stream in by_connection.values():
        current: _Pending | None = None
        opened: int | None = None
        handshake = 0
        for packet in stream:
            if packet.opens:
                opened = packet.ns
            elif packet.accepts:
                handshake = packet.ns - opened if opened is not None else 0
            elif packet.to_server:
                if packet.payload.startswith((b"POST ", b"GET ")):
                    current = _Pending(packet.ns, handshake)
                    pending.append(current)
                    handshake = 0
                if current is not None and current.request_id is None:
                    current.head += packet.payload
                    match = REQUEST_ID.search(current.head)
                    current.request_id = match.group(1).strip().decode() if match else None
            elif current is not None:
                current.events.extend(
                    (packet.ns, m.group(1)) for m in EVENT.finditer(packet.payload)
                )
    found = (request.done() for request in pending)
    return {request.request_id: request for request in found if request is not None}


def first_sendings(packets: Iterable[Packet]) -> list[Packet]:
    """The packets in time order, each byte once: a retransmitted segment (seen under the
    brake: the server's kernel sent again what the frozen client had not acknowledged) is
    dropped, or trimmed to its new part, so every byte keeps the time it was first sent."""
    sent_to: dict[tuple[tuple[int, int], bool], int] = {}
    kept = []
    for packet in sorted(packets, key=lambda p: p.ns):
        key = (packet.connection, packet.to_server)
        if not packet.payload:  # a SYN: no bytes of the stream
            kept.append(packet)
            continue
        end = (packet.sequence + len(packet.payload)) % 2**32
        seen = sent_to.get(key)
        if seen is not None and _after(seen, packet.sequence):
            if _after(seen, end):
                continue  # all of it sent before
            new = packet.payload[(seen - packet.sequence) % 2**32 :]
            packet = dataclasses.replace(packet, payload=new, sequence=seen)
        sent_to[key] = end
        kept.append(packet)
    return kept


def _after(a: int, b: int) -> bool:
    """``a`` at or after ``b`` in TCP's wrapping sequence space."""
    return (a - b) % 2**32 < 2**31


@dataclass(frozen=True)
class WireRow:
    """One request's client figures beside the wire's (ms)."""

    client_ttft_ms: float
    client_e2e_ms: float
    wire_ttft_ms: float
    wire_e2e_ms: float
    output_tokens: int

    @property
    def own(self) -> dict[str, float]:
        """The wire's figures: what a client that added nothing would report."""
        return _figures(self.wire_ttft_ms, self.wire_e2e_ms, self.output_tokens)

    @property
    def client(self) -> dict[str, float]:
        """The client's figures."""
        return _figures(self.client_ttft_ms, self.client_e2e_ms, self.output_tokens)

    @property
    def added(self) -> dict[str, float]:
        """What the client added: its figure minus the wire's."""
        own = self.own
        return {metric: value - own[metric] for metric, value in self.client.items()}


def _figures(ttft: float, e2e: float, tokens: int) -> dict[str, float]:
    """TTFT, ITL (AIPerf's: the decode over tokens - 1), E2E and the decode."""
    itl = (e2e - ttft) / (tokens - 1) if tokens > 1 else float("nan")
    return {"ttft": ttft, "itl": itl, "e2e": e2e, "decode": e2e - ttft}


def wire_rows(
    client: Iterable[Mapping[str, Any]],
    raw: Iterable[Mapping[str, Any]],
    wire: Mapping[str, WireRequest],
) -> tuple[list[WireRow], int]:
    """Profiling records joined to the wire; also how many could not be joined.

    A record's TTFT and E2E end on one of its raw responses (AIPerf's read time,
    ``start_perf_ns`` + the figure); the wire event of the same index, whose data line must
    equal the response's, is where the server wrote it.
    """
    responses = {}
    for record in raw:
        rid = (record.get("metadata") or {}).get("x_request_id")
        if rid:
            responses[rid] = record
    rows, missing = [], 0
    for record in client:
        meta, metrics = record.get("metadata") or {}, record.get("metrics") or {}
        if meta.get("benchmark_phase") != "profiling" or record.get("error"):
            continue
        rid = str(meta.get("x_request_id"))
        row = _join(metrics, responses.get(rid), wire.get(rid))
        if row is None:
            missing += 1
        else:
            rows.append(row)
    return rows, missing


def _join(
    metrics: Mapping[str, Any], raw: Mapping[str, Any] | None, wire: WireRequest | None
) -> WireRow | None:
    if raw is None or wire is None:
        return None
    reads = [int(r["perf_ns"]) for r in raw.get("responses") or []]
    lines = [
        ((r.get("packets") or [{}])[0].get("value") or "").encode()
        for r in raw.get("responses") or []
    ]
    if len(reads) != len(wire.events):
        return None
    if any(line != data for line, (_, data) in zip(lines, wire.events, strict=True)):
        return None
    start = int(raw["start_perf_ns"])
    ttft, e2e = (
        metric_value(metrics, "time_to_first_token"),
        metric_value(metrics, "request_latency"),
    )
    content = [i for i, line in enumerate(lines) if _has_content(line)]
    if not content:
        return None
    first, last = content[0], content[-1]  # where AIPerf's TTFT and E2E end
    if abs(reads[first] - start - ttft * 1e6) > 1e3 or abs(reads[last] - start - e2e * 1e6) > 1e3:
        return None
    return WireRow(
        client_ttft_ms=ttft,
        client_e2e_ms=e2e,
        wire_ttft_ms=(wire.events[first][0] - wire.sent_ns + wire.server_before_ns) / 1e6,
        wire_e2e_ms=(wire.events[last][0] - wire.sent_ns + wire.server_before_ns) / 1e6,
        output_tokens=int(metric_value(metrics, "output_sequence_length")),
    )


def _has_content(line: bytes) -> bool:
    """A stream event that carries output text (a chat delta's content or reasoning, or a
    completion's text): the events AIPerf's TTFT starts on and its E2E ends on."""
    if not line.startswith(b"{"):
        return False
    try:
        chunk = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("reasoning_content") or choice.get("text"):
            return True
    return False


def metric_value(metrics: Mapping[str, Any], tag: str) -> float:
    """An AIPerf record's metric value (``{"value": ..}``), NaN where it has none."""
    found = metrics.get(tag)
    value = found.get("value") if isinstance(found, Mapping) else None
    return float(value) if isinstance(value, int | float) else float("nan")


def added_figures(rows: list[WireRow]) -> dict[str, Any]:
    """What the client added to each reported percentile (``wire_ttft_p90_ms`` ...): its p50
    and p90 minus the wire's over the same requests, as ``validity.truth`` measures against
    the simulator; the wire's own percentiles (``wire_own_ttft_p90_ms`` ...), which the
    relative tolerance is taken of; and every row, to score again later."""
    as_truth = [
        TruthRow(
            client_ttft_ms=r.client_ttft_ms,
            client_itl_ms=r.client["itl"],
            client_e2e_ms=r.client_e2e_ms,
            ttft_ms=r.own["ttft"],
            itl_ms=r.own["itl"],
            e2e_ms=r.own["e2e"],
            arrival_ns=0,
            end_ns=0,
            status=200,
            cached_tokens=0,
        )
        for r in rows
    ]
    distortion = client_distortion(as_truth)
    figures: dict[str, Any] = {}
    for key, added in distortion.added_ms.items():
        metric, q = key.split("_p")
        own = np.array([getattr(t, f"{metric}_ms") for t in as_truth], dtype=np.float64)
        own = own[np.isfinite(own)]
        figures[f"wire_{key}_ms"] = added
        figures[f"wire_own_{key}_ms"] = float(np.percentile(own, int(q))) if own.size else np.nan
    figures["wire_rows"] = [
        [r.client_ttft_ms, r.client_e2e_ms, r.wire_ttft_ms, r.wire_e2e_ms, r.output_tokens]
        for r in rows
    ]
    return figures


def beyond_tolerance(
    figures: Mapping[str, float], tolerance: ClientTolerance = CLIENT_TOLERANCE
) -> bool:
    """True when the client added more than ``client_cost_low``'s tolerance to a TTFT, ITL or
    E2E p50 or p90: max(floor, relative x the wire's own percentile)."""
    for metric in ("ttft", "itl", "e2e"):
        floor = tolerance.itl_floor_ms if metric == "itl" else tolerance.floor_ms
        for q in (50, 90):
            added, own = figures[f"wire_{metric}_p{q}_ms"], figures[f"wire_own_{metric}_p{q}_ms"]
            if added > max(floor, tolerance.relative * own):
                return True
    return False
