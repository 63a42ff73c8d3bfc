"""The one error hierarchy of inferlab-bench.

Every failure the project reports is an ``InferlabError``; foreign exceptions are
translated into one of these at the edge where they enter (``raise ... from exc``).
The message is what a failed protocol result carries in its ``error`` field: which
thing, what was expected, what was found. ``hint`` says what to do about it.

    InferlabError
    ├── RequestError             the JSON request cannot be read or is invalid
    ├── ConfigurationError       flags/options/environment are inconsistent
    ├── DatasetError             acquiring the source dataset
    │   ├── CatalogMismatchError     request catalog != datasets_catalog/ entry
    │   ├── DownloadError            HTTP status, dropped connection, disk full
    │   └── DigestMismatchError      sha256 of the bytes != expected sha256
    ├── TokenizerError           the model's tokenizer cannot be loaded or applied
    ├── PopulationError          materialization/selection cannot give a population
    │   └── InsufficientEntriesError fewer admitted entries than required
    ├── ServerError              the inference server (reset, probe) misbehaved
    │   └── PrefixCacheResetError
    ├── LoadGeneratorError       AIPerf could not be run or stopped abnormally
    ├── StoppedError             the stage was stopped before it could finish
    │   ├── DeadlineExceededError    the case budget ran out
    │   └── InterruptedStageError    SIGTERM/SIGINT stopped the stage
    ├── RecordsError             AIPerf's outputs are missing, corrupt or inconsistent
    ├── MetricsError             a required metric is missing or not finite
    ├── BundleError              a published bundle cannot be written, read or trusted
    │   └── ReproductionError        a bundle's case cannot be reproduced as recorded
    ├── BaselineError            a peer tool's result file cannot be read as a baseline
    └── OutputError              a file we must write is not safe or possible to write
"""

from __future__ import annotations

from pathlib import Path


class InferlabError(Exception):
    """Root of every error this project raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message} (hint: {self.hint})"


class RequestError(InferlabError):
    """The JSON request could not be read, parsed or validated."""


class ConfigurationError(InferlabError):
    """Options given to the command contradict each other or the request."""


class DatasetError(InferlabError):
    """The source dataset could not be acquired."""


class CatalogMismatchError(DatasetError):
    """A catalog fact in the request differs from the project's catalog."""

    def __init__(self, field: str, requested: str, catalog: str) -> None:
        super().__init__(
            f"catalog.{field}: request has {requested!r}, datasets_catalog/ has {catalog!r}",
            hint="the control plane and this client must come from the same release",
        )
        self.field = field
        self.requested = requested
        self.catalog = catalog


class DownloadError(DatasetError):
    """Fetching the dataset failed (HTTP status, connection, disk)."""


class DigestMismatchError(DatasetError):
    """The bytes on hand do not hash to the expected sha256."""

    def __init__(
        self,
        what: str,
        expected: str,
        actual: str,
        *,
        hint: str = "the file is corrupt or not the catalogued one; it was not kept",
    ) -> None:
        super().__init__(f"{what}: sha256 mismatch, expected {expected}, got {actual}", hint=hint)
        self.expected = expected
        self.actual = actual


class TokenizerError(InferlabError):
    """The tokenizer could not be loaded or its chat template applied."""


class PopulationError(InferlabError):
    """A population could not be materialized or read."""


class InsufficientEntriesError(PopulationError):
    """Fewer entries were admitted than the request requires."""

    def __init__(self, required: int, admitted: int) -> None:
        super().__init__(
            f"required_entries: {required} needed, only {admitted} admitted",
            hint="raise max_input_tokens, lower required_entries, or use a larger dataset",
        )
        self.required = required
        self.admitted = admitted


class ServerError(InferlabError):
    """The inference server answered in a way we cannot use."""


class PrefixCacheResetError(ServerError):
    """The prefix-cache reset was asked for but could not be done."""


class LoadGeneratorError(InferlabError):
    """AIPerf could not be started, or it ended abnormally."""


class StoppedError(InferlabError):
    """The stage was stopped (deadline or signal) before it finished."""


class DeadlineExceededError(StoppedError):
    """The case's budget ran out; the whole stage, AIPerf's shutdown included, ends by it."""


class InterruptedStageError(StoppedError):
    """SIGTERM or SIGINT arrived; the stage stopped what it ran and wrote a failed result."""


class RecordsError(InferlabError):
    """AIPerf's output files are missing, corrupt or inconsistent."""


class MetricsError(InferlabError):
    """A metric required by the normalization schema is missing or not finite."""


class BundleError(InferlabError):
    """A bundle is unsafe, damaged or inconsistent; the message names the member."""


class ReproductionError(BundleError):
    """A bundle's inputs cannot be rebuilt or reused here (names the differing input)."""


class BaselineError(InferlabError):
    """A vLLM or GuideLLM result file cannot be read as the published side."""


class OutputError(InferlabError):
    """A result or artifact path cannot be written, or writing it could hurt (a device...)."""

    def __init__(self, path: Path, problem: str, *, hint: str | None = None) -> None:
        super().__init__(f"{path}: {problem}", hint=hint)
        self.path = path
        self.problem = problem
