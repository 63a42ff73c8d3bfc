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

    prefill_base_ms: float = Field(default=5.0, ge=0)
    prefill_ms_per_token: float = Field(default=0.05, ge=0)
    decode_base_ms: float = Field(default=8.0, ge=0)
    decode_ms_per_seq: float = Field(default=0.2, ge=0)
    max_num_seqs: int = Field(default=64, ge=1)
    jitter: float = Field(
        default=0.0, ge=0, lt=1, description="relative half-width of uniform jitter"
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

    error_rate: float = Field(default=0.0, ge=0, le=1)
    error_status: int = Field(default=500, ge=400, le=599)
    stall_rate: float = Field(default=0.0, ge=0, le=1)
    stall_seconds: float = Field(default=0.0, ge=0)
    drop_rate: float = Field(default=0.0, ge=0, le=1)
    drop_after_tokens: int = Field(default=1, ge=0)
    malformed_rate: float = Field(default=0.0, ge=0, le=1)
    malformed_after_tokens: int = Field(default=1, ge=0)
    prompt_tokens_offset: int = 0
    ignore_min_tokens: bool = False
    reset_noop: bool = False


class SimulatorConfig(_Frozen):
    """Everything the simulated server needs; the CLI builds exactly this from its flags."""

    model: str = "sim-model"
    tokenizer: str | None = None
    ground_truth_path: Path | None = None
    seed: int = 0
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    reset_endpoints: tuple[ResetEndpoint, ...] = ("vllm", "sglang")
    max_model_len: int = Field(default=32768, ge=1)
    default_max_tokens: int = Field(default=256, ge=1)
    block_size: int = Field(default=16, ge=1)
    cache_capacity_blocks: int = Field(default=65536, ge=0)
    latency: LatencyConfig = LatencyConfig()
    faults: FaultConfig = FaultConfig()

    @field_validator("reset_endpoints")
    @classmethod
    def _unique(cls, value: tuple[ResetEndpoint, ...]) -> tuple[ResetEndpoint, ...]:
        return tuple(dict.fromkeys(value))
