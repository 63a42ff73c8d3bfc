"""AIPerf's metric tags and the names we give them: the one table every reader and writer asks.

AIPerf names a per-request metric by a tag (``time_to_first_token``) and writes the same tag
in its summary. Our protocol and our Parquet records name the millisecond latencies
``ttft_ms``, ``tpot_ms`` and ``request_latency_ms``; the wire's SLO fields use those names too.
"""

from __future__ import annotations

TTFT = "time_to_first_token"
ITL = "inter_token_latency"
TTST = "time_to_second_token"
"""First token -> second token at the client: near zero when the two were read together."""
CHUNK_GAPS = "inter_chunk_latency"
"""Per request, the gaps between the chunks the client read (a list; its first is TTST)."""
REQUEST_LATENCY = "request_latency"
OUTPUT_TOKENS = "output_sequence_length"
GOOD_REQUEST_COUNT = "good_request_count"
PROMPT_TOKENS = "usage_prompt_tokens"
CACHED_PROMPT_TOKENS = "usage_prompt_cache_read_tokens"
CLIENT_SEND = "http_req_sending"
"""AIPerf's aiohttp trace, request start -> body written: the client's own time before a
request was on the wire. aiohttp signals a request's start before it asks its pool for a
connection, so this already holds the wait for one and a new one's connect."""
CONNECTING = "http_req_connecting"
SEND_PARTS = ("http_req_blocked", CONNECTING, CLIENT_SEND)
"""The trace's pool wait and connect (parts of ``CLIENT_SEND``, kept in the records)."""

LATENCIES_MS = {
    "request_latency_ms": REQUEST_LATENCY,
    "ttft_ms": TTFT,
    "tpot_ms": ITL,
}
"""Our millisecond latency names (protocol metrics, SLO fields, Parquet columns) -> tags."""
MS_NAME = {tag: name for name, tag in LATENCIES_MS.items()}
"""Tag -> our millisecond name."""

RECORD_TAGS = (
    TTFT,
    REQUEST_LATENCY,
    ITL,
    TTST,
    OUTPUT_TOKENS,
    GOOD_REQUEST_COUNT,
    PROMPT_TOKENS,
    CACHED_PROMPT_TOKENS,
    *SEND_PARTS,
)
"""The per-request metrics we read from AIPerf's records (the rest is skipped)."""

THROUGHPUTS = {
    "request_throughput": "request_throughput",
    "output_throughput": "output_token_throughput",
    "total_token_throughput": "total_token_throughput",
}
"""Our throughput names -> AIPerf summary tags."""
CACHE_READ_PCT = "overall_usage_prompt_cache_read_pct"
"""AIPerf's summary tag of the prompt-cache read share (percent)."""
