"""The simulator's configuration: one frozen model shared by the CLI and in-process use."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ResetEndpoint = Literal["vllm", "sglang"]

RESET_PATHS: dict[ResetEndpoint, str] = {"vllm": "/reset_prefix_cache", "sglang": "/flush_cache"}


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LatencyConfig(_Frozen):
    """Parameters of the latency model (milliseconds); see ``latency`` for the formulas."""

    prefill_base_ms: float = Field(default=5.0, ge=0, description="fixed prefill cost per request")
    prefill_ms_per_token: float = Field(
        default=0.05, ge=0, description="prefill cost per uncached prompt token"
    )
    decode_base_ms: float = Field(
        default=8.0, ge=0, description="inter-token time of a lone sequence"
    )
    decode_ms_per_seq: float = Field(
        default=0.2, ge=0, description="extra inter-token time per running sequence"
    )
    max_num_seqs: int = Field(
        default=64, ge=1, description="running sequences; the rest queue FIFO"
    )
    jitter: float = Field(
        default=0.0, ge=0, lt=1, description="each duration times U(1-j, 1+j), seeded"
    )

    @classmethod
    def zero(cls, max_num_seqs: int = 1_000_000) -> LatencyConfig:
        """No modeled latency at all: the server answers as fast as it can."""
        return cls(
            prefill_base_ms=0,
            prefill_ms_per_token=0,
            decode_base_ms=0,
            decode_ms_per_seq=0,
            max_num_seqs=max_num_seqs,
        )

    @property
    def is_zero(self) -> bool:
        """True when every time term is zero (no sleeping at all)."""
        return not any(
            (
                self.prefill_base_ms,
                self.prefill_ms_per_token,
                self.decode_base_ms,
                self.decode_ms_per_seq,
            )
        )


class FaultConfig(_Frozen):
    """Fault injection; each rate is the seeded per-request probability (1.0 = every request)."""

    error_rate: float = Field(default=0.0, ge=0, le=1, description="share answered with an error")
    error_status: int = Field(
        default=500, ge=400, le=599, description="HTTP status of injected errors (500, 429...)"
    )
    stall_rate: float = Field(default=0.0, ge=0, le=1, description="share whose first byte stalls")
    stall_seconds: float = Field(default=0.0, ge=0, description="length of a stall")
    drop_rate: float = Field(
        default=0.0, ge=0, le=1, description="share whose connection is dropped mid-body"
    )
    drop_after_tokens: int = Field(default=1, ge=0, description="tokens sent before a drop")
    malformed_rate: float = Field(
        default=0.0, ge=0, le=1, description="share that get one invalid-JSON SSE chunk"
    )
    malformed_after_tokens: int = Field(
        default=1, ge=0, description="tokens sent before the malformed chunk"
    )
    prompt_tokens_offset: int = Field(default=0, description="added to reported prompt_tokens")
    ignore_min_tokens: bool = Field(
        default=False, description="emit half the tokens asked for, ignoring min_tokens"
    )
    reset_noop: bool = Field(default=False, description="resets answer 200 but keep the cache")


class LimitsConfig(_Frozen):
    """Bounds on what one client may send or ask for, checked before its prompt is tokenized.

    The defaults sit far above what the benchmark clients we run send (AIPerf, GuideLLM,
    ``vllm bench serve``, SGLang's ``bench_serving``), and well below what stalls the server.
    """

    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1, description="request body size in bytes (413 beyond)"
    )
    max_n: int = Field(default=128, ge=1, description="choices per prompt, n (400 beyond)")
    max_prompts: int = Field(
        default=256, ge=1, description="prompts in one completion batch (400 beyond)"
    )
    max_messages: int = Field(
        default=4096, ge=1, description="chat messages (or input items) in one request"
    )
    max_answer_tokens: int = Field(
        default=1 << 20,
        ge=1,
        description="choices x output cap x (1 + logprobs) of one answer (400 beyond)",
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        allow_inf_nan=False,
        description="time a client has to send a whole body (408 beyond)",
    )
    idle_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        allow_inf_nan=False,
        description="a connection without a whole request head this long is closed",
    )


class SimulatorConfig(_Frozen):
    """Everything the simulated server needs; the CLI builds exactly this from its flags."""

    model: str = "sim-model"
    tokenizer: str | None = None
    ground_truth_path: Path | None = None
    seed: int = 0
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    reset_endpoints: tuple[ResetEndpoint, ...] = ("vllm", "sglang")
    max_model_len: int = Field(default=32768, ge=1, description="context limit (400 beyond)")
    default_max_tokens: int = Field(
        default=256, ge=1, description="output cap when a request gives no max_tokens"
    )
    block_size: int = Field(default=16, ge=1, description="prefix-cache block, in tokens")
    cache_capacity_blocks: int = Field(
        default=65536, ge=0, description="prefix-cache LRU capacity (0 disables)"
    )
    latency: LatencyConfig = LatencyConfig()
    faults: FaultConfig = FaultConfig()
    limits: LimitsConfig = LimitsConfig()

    @field_validator("reset_endpoints")
    @classmethod
    def _unique(cls, value: tuple[ResetEndpoint, ...]) -> tuple[ResetEndpoint, ...]:
        return tuple(dict.fromkeys(value))
