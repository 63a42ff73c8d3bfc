"""Every human command's flags as one validated model; field names are the flags' dests.

A model holds what a person may type and nothing else: bounds, path kinds and the rules
between flags. The CLI validates its namespace into one of these before anything starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic.fields import FieldInfo

from inferlab_bench.cli.flagvalues import (
    AnyPath,
    Budget,
    ConnectionsOption,
    Count,
    CountList,
    CountRange,
    DatasetName,
    ExistingDir,
    ExistingFile,
    ExistingPath,
    JsonObject,
    Milliseconds,
    Positive,
    Rate,
    RateList,
    RateRange,
    Ratio,
    ResetOption,
    Seed,
    ServerUrl,
    Text,
    Tokens,
    Trials,
    Url,
    UrlPath,
    Workers,
    WritableDir,
    WritableFile,
    ZeroOrMore,
)
from inferlab_bench.cli.rules import (
    AtMost,
    Conflicts,
    Needs,
    OneOf,
    Repeated,
    Required,
    Rule,
    check,
    rule_error,
)
from inferlab_bench.load import Load
from inferlab_bench.protocol import BenchLoadInput
from inferlab_bench.simulator.config import FaultConfig, LatencyConfig, SimulatorConfig


class FlagModel(BaseModel):
    """Base of the flag models: unknown fields are errors, strings convert (flags are text)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    RULES: ClassVar[tuple[Rule, ...]] = ()

    @model_validator(mode="after")
    def _rules(self) -> Self:
        check(self, self.RULES)
        return self


KUBE_ONLY = (
    "namespace",
    "workers",
    "operator",
    "dry_run",
    "image",
    "pod_tokenizer",
    "population_url",
    "population_pvc",
    "kubeconfig",
    "kube_name",
)
_KUBE_HINT = "add --engine kube (see docs/kube.md)"
_WORKLOAD_HINT = "--population FILE, or --random-input-tokens N with --random-output-tokens M"

CASE_RULES: tuple[Rule, ...] = (
    *(Needs(f, ("engine",), _KUBE_HINT, value="kube") for f in KUBE_ONLY),
    Needs("engine", ("namespace",), "the namespace the AIPerfJob runs in", when="kube"),
    Repeated("url", "engine", "kube", "the local engine measures one server"),
    Conflicts("dry_run", "trials", "--dry-run writes the manifests once; drop --trials"),
    Conflicts("population_url", "population_pvc", "the pods read the population one way"),
    Needs("prepare_request", ("population",), "--prepare-request describes a --population"),
    Conflicts("population", "random_input_tokens", _WORKLOAD_HINT),
    Conflicts("population", "random_output_tokens", _WORKLOAD_HINT),
    Needs("random_input_tokens", ("random_output_tokens",), _WORKLOAD_HINT),
    Needs("random_output_tokens", ("random_input_tokens",), _WORKLOAD_HINT),
    OneOf(("population", "random_input_tokens"), _WORKLOAD_HINT),
    Needs(
        "slo_min_ratio",
        ("slo_ttft_ms", "slo_tpot_ms", "slo_latency_ms"),
        "the ratio applies to SLO bounds; give one of them",
    ),
    Needs("warmup", ("concurrency",), "warmup runs at a fixed concurrency only"),
    Needs("burstiness", ("rate",), "burstiness shapes the arrivals of a request rate"),
    AtMost("concurrency", "requests", "a concurrency above the request count is never reached"),
)


class CaseFlags(FlagModel):
    """The flags ``run`` and ``sweep`` share: server, workload, SLOs, run and engine."""

    url: list[ServerUrl] = Field(min_length=1)
    model: Text
    tokenizer: Text
    chat_path: UrlPath = "/v1/chat/completions"
    population: ExistingFile | None = None
    prepare_request: ExistingFile | None = None
    random_input_tokens: Tokens | None = None
    random_output_tokens: Tokens | None = None
    requests: Count
    warmup: ZeroOrMore = 0
    seed: Seed = 0
    request_body: JsonObject | None = None
    slo_ttft_ms: Positive | None = None
    slo_tpot_ms: Positive | None = None
    slo_latency_ms: Positive | None = None
    slo_min_ratio: Ratio = 0.9
    think_time_ms: Milliseconds = 0.0
    think_time_ratio: Ratio = 1.0
    think_time: Literal["fixed", "exponential"] = "fixed"
    cache_block_tokens: Count = 16
    reset_prefix_cache: ResetOption | None = None
    connections: ConnectionsOption | None = None
    budget: Budget = 3600.0
    trials: Trials = 1
    strict: bool = False
    out: WritableDir
    as_json: bool = False
    verbose: bool = False
    engine: Literal["local", "kube"] = "local"
    namespace: Text | None = None
    workers: Workers | None = None
    operator: bool | None = None
    dry_run: bool = False
    image: Text | None = None
    pod_tokenizer: Text | None = None
    population_url: Url | None = None
    population_pvc: Text | None = None
    kubeconfig: ExistingFile | None = None
    kube_name: Text | None = None

    @model_validator(mode="after")
    def _engine_needs(self) -> Self:
        """What depends on the engine: a local tokenizer; no reset between phases on kube."""
        if self.engine == "local" and not Path(self.tokenizer).is_dir():
            raise refuse_field("tokenizer", "expected a local tokenizer directory", self.tokenizer)
        resets = self.reset_prefix_cache not in (None, "none")
        if self.engine == "kube" and self.warmup > 0 and resets:
            raise rule_error(
                "{0} with {1} cannot run on {2} kube",
                ("warmup", "reset_prefix_cache", "engine"),
                "the reset must fall between the phases; the stock AIPerf image has no hook",
            )
        return self


def refuse_field(field: str, expected: str, value: object) -> Exception:
    """A value error found after the fields were read (it depends on another flag)."""
    shown = repr(value).replace("{", "{{").replace("}", "}}")
    return rule_error(f"{{0}}: {expected} (found {shown})", (field,), "")


class RunFlags(CaseFlags):
    """``run``: one case at one load."""

    RULES = (
        OneOf(("concurrency", "rate", "unbounded"), "e.g. --concurrency 8"),
        *CASE_RULES,
    )
    concurrency: Count | None = None
    rate: Rate | None = None
    burstiness: Positive | None = None
    unbounded: bool = False

    def load(self) -> BenchLoadInput:
        """The one load these flags chose (``RULES`` made sure exactly one was given)."""
        if self.concurrency is not None:
            return Load.at_concurrency(self.concurrency).wire()
        if self.rate is not None:
            return Load.at_rate(self.rate, self.burstiness).wire()
        return Load.unbounded().wire()


class SweepFlags(CaseFlags):
    """``sweep``: one case per concurrency or per rate."""

    RULES = (OneOf(("concurrency", "rate"), "e.g. --concurrency 1,4,16"), *CASE_RULES)
    concurrency: CountList | None = None
    rate: RateList | None = None
    burstiness: Positive | None = None

    def loads(self) -> list[BenchLoadInput]:
        """One load per --concurrency or --rate value (``RULES``: exactly one list given)."""
        if self.concurrency is not None:
            return [Load.at_concurrency(c).wire() for c in self.concurrency]
        return [Load.at_rate(r, self.burstiness).wire() for r in self.rate or []]


_RANGE_HINT = "e.g. --concurrency-range 1:256 or --rate-range 0.5:64"
_NOT_FOR_CAPACITY = {"concurrency", "rate", "burstiness", "warmup", "trials", "dry_run"}
_CRITERION = "the criterion is --attainment FRACTION or --percentile pNN"


class CapacityFlags(CaseFlags):
    """``capacity``: the case flags, a load range, the SLO criterion and AIPerf's planner."""

    RULES = (
        OneOf(("concurrency_range", "rate_range"), _RANGE_HINT),
        OneOf(("attainment", "percentile"), "the SLO criterion is one of them", required=False),
        Needs("warmup", ("concurrency_range",), "warmup runs at a fixed concurrency only"),
        Needs("burstiness", ("rate_range",), "burstiness shapes the arrivals of a request rate"),
        Conflicts("dry_run", "engine", "a search decides each probe from the last one"),
        *(r for r in CASE_RULES if not set(r.violation()) & _NOT_FOR_CAPACITY),
    )
    concurrency_range: CountRange | None = None
    rate_range: RateRange | None = None
    burstiness: Positive | None = None
    attainment: Ratio = 0.95
    percentile: Literal["p50", "p75", "p90", "p95", "p99"] | None = None
    planner: Literal["smooth-isotonic", "monotonic", "bayesian"] = "smooth-isotonic"
    max_probes: Annotated[int, Field(ge=2, le=200)] = 20
    reruns: Annotated[int, Field(ge=0, le=3)] = 1

    @model_validator(mode="after")
    def _capacity_needs(self) -> Self:
        """An SLO to search under; a range the requests can reach; one run per probe."""
        if not any((self.slo_ttft_ms, self.slo_tpot_ms, self.slo_latency_ms)):
            raise rule_error(
                "give {0}, {1} or {2}: capacity is the load that meets an SLO",
                ("slo_ttft_ms", "slo_tpot_ms", "slo_latency_ms"),
                "e.g. --slo-ttft-ms 500",
            )
        if "slo_min_ratio" in self.model_fields_set:
            raise rule_error("{0} does not apply to capacity", ("slo_min_ratio",), _CRITERION)
        if self.trials > 1:
            raise rule_error("{0} does not apply to capacity", ("trials",), "one case per probe")
        top = self.concurrency_range[1] if self.concurrency_range else None
        if top is not None and top > self.requests:
            raise refuse_field(
                "concurrency_range",
                f"a top of at most --requests ({self.requests}): more are never in flight",
                top,
            )
        return self


class CapacityJsonFlags(FlagModel):
    """``capacity-json``: the request file is judged by the JSON-mode contract, not here."""

    input: AnyPath
    output: AnyPath


_HUMAN_PREPARE = (
    "model",
    "served_name",
    "dataset",
    "entries",
    "max_input_tokens",
    "output_tokens",
    "sessions",
    "seed",
    "chat_template_kwargs",
    "out",
    "as_json",
)


class PrepareFlags(FlagModel):
    """``prepare``: JSON mode (--input/--output) or human flags, never both."""

    RULES = (
        Needs("input", ("output",), "JSON mode reads --input and writes --output"),
        Needs("output", ("input",), "JSON mode reads --input and writes --output"),
        *(
            Conflicts("input", f, "JSON mode takes everything from the request")
            for f in _HUMAN_PREPARE
        ),
        Needs("catalog_dir", ("input",), "--catalog-dir applies to JSON mode"),
        Required(
            ("model", "dataset", "entries", "max_input_tokens", "out"),
            "input",
            "see `inferlab-bench prepare --help`",
        ),
    )
    input: AnyPath | None = None
    output: AnyPath | None = None
    catalog_dir: ExistingDir | None = None
    model: ExistingDir | None = None
    served_name: Text | None = None
    dataset: DatasetName | None = None
    entries: Count | None = None
    max_input_tokens: Tokens | None = None
    output_tokens: Tokens | None = None
    seed: Seed = 0
    chat_template_kwargs: JsonObject | None = None
    out: WritableDir | None = None
    sessions: bool = False
    as_json: bool = False


class CaseCommandFlags(FlagModel):
    """``case`` (JSON mode): the request file is judged by the JSON-mode contract, not here."""

    input: AnyPath
    output: AnyPath
    prefix_cache_reset: ResetOption | None = None
    connections: ConnectionsOption | None = None


class DatasetFlags(FlagModel):
    """``dataset fetch NAME`` and ``dataset path NAME``."""

    name: Literal["sharegpt"]
    catalog_dir: ExistingDir | None = None


class DatasetVerifyFlags(FlagModel):
    """``dataset verify TARGET``: the cached copy (``sharegpt``) or a file."""

    target: DatasetName
    catalog_dir: ExistingDir | None = None


class ReportFlags(FlagModel):
    directory: ExistingDir
    no_plots: bool = False
    as_json: bool = False
    html: WritableFile | None = None
    check: bool = False


class CompareFlags(FlagModel):
    a: ExistingPath
    b: ExistingPath
    as_json: bool = False


_BUNDLE_HINT = "`bundle DIR --out NAME.tar.gz`, or `bundle --verify NAME.tar.gz`"


class BundleFlags(FlagModel):
    """``bundle DIR --out FILE [--no-records]`` or ``bundle --verify FILE``."""

    RULES = (
        Conflicts("verify", "directory", _BUNDLE_HINT),
        Conflicts("verify", "out", _BUNDLE_HINT),
        Conflicts("verify", "no_records", _BUNDLE_HINT),
        Required(("directory", "out"), "verify", _BUNDLE_HINT),
    )
    directory: ExistingDir | None = None
    out: WritableFile | None = None
    no_records: bool = False
    verify: ExistingFile | None = None
    as_json: bool = False


class ReproduceFlags(FlagModel):
    """``reproduce BUNDLE --url --model --tokenizer --out [--trials N] [--reprepare]``."""

    RULES = (Needs("dataset", ("reprepare",), "--dataset is read only to prepare again"),)
    bundle: ExistingFile
    url: ServerUrl
    model: Text
    tokenizer: ExistingDir
    out: WritableDir
    trials: Trials = 3
    reprepare: bool = False
    dataset: ExistingFile | None = None
    baseline: ExistingFile | None = None
    tolerance: Annotated[float, Field(ge=0.0, lt=1.0, allow_inf_nan=False)] = 0.05
    reset_prefix_cache: ResetOption | None = None
    """The reset call to make where a case reset its cache (a bundle never picks one itself)."""
    as_json: bool = False
    verbose: bool = False


class DemoFlags(FlagModel):
    RULES = (AtMost("concurrency", "requests", "a concurrency above --requests is never reached"),)
    out: WritableDir = Path("inferlab-demo")
    concurrency: CountList = Field(default_factory=lambda: [1, 4, 16])
    requests: Count = 32
    as_json: bool = False
    verbose: bool = False


RESET_CHOICES: dict[str, tuple[Literal["vllm", "sglang"], ...]] = {
    "vllm": ("vllm",),
    "sglang": ("sglang",),
    "both": ("vllm", "sglang"),
    "none": (),
}
SERVER_FIELDS = ("max_model_len", "default_max_tokens", "block_size", "cache_capacity_blocks")
LATENCY_FIELDS = tuple(LatencyConfig.model_fields)
FAULT_FIELDS = tuple(FaultConfig.model_fields)


class _SimulateBase(FlagModel):
    RULES = tuple(
        Conflicts("zero_latency", f, "--zero-latency sets every latency term to 0")
        for f in LATENCY_FIELDS
    )


def _copied(model: type[BaseModel], names: tuple[str, ...]) -> dict[str, Any]:
    """Fields of a simulator model, with their bounds and help; floats must be finite."""
    fields: dict[str, Any] = {}
    for name in names:
        info = model.model_fields[name]
        extra = [Field(allow_inf_nan=False)] if info.annotation is float else []
        merged = FieldInfo.merge_field_infos(info, *extra) if extra else info
        fields[name] = (info.annotation, merged)
    return fields


SimulateFlags: type[FlagModel] = create_model(
    "SimulateFlags",
    __base__=_SimulateBase,
    host=(Text, "127.0.0.1"),
    port=(int, Field(default=8000, ge=0, le=65535)),
    model=(Text, "sim-model"),
    tokenizer=(ExistingDir | None, None),
    ground_truth_path=(WritableFile | None, None),
    seed=(Seed, 0),
    reset_endpoints=(Literal["vllm", "sglang", "both", "none"], "both"),
    zero_latency=(bool, False),
    **_copied(SimulatorConfig, SERVER_FIELDS),
    **_copied(LatencyConfig, LATENCY_FIELDS),
    **_copied(FaultConfig, FAULT_FIELDS),
)
"""``simulate``: the simulator's own config fields as flat flags (their bounds, one source)."""


def simulator_config(flags: FlagModel) -> SimulatorConfig:
    """The one SimulatorConfig that validated ``simulate`` flags describe."""
    values = dict(flags)
    if values["zero_latency"]:
        latency = LatencyConfig.zero()
    else:
        latency = LatencyConfig(**{name: values[name] for name in LATENCY_FIELDS})
    return SimulatorConfig(
        model=values["model"],
        tokenizer=None if values["tokenizer"] is None else str(values["tokenizer"]),
        ground_truth_path=values["ground_truth_path"],
        seed=values["seed"],
        host=values["host"],
        port=values["port"],
        reset_endpoints=RESET_CHOICES[values["reset_endpoints"]],
        latency=latency,
        faults=FaultConfig(**{name: values[name] for name in FAULT_FIELDS}),
        **{name: values[name] for name in SERVER_FIELDS},
    )


__all__ = [
    "CapacityFlags",
    "CapacityJsonFlags",
    "BundleFlags",
    "ReproduceFlags",
    "CaseCommandFlags",
    "CaseFlags",
    "CompareFlags",
    "DatasetFlags",
    "DatasetVerifyFlags",
    "DemoFlags",
    "FlagModel",
    "PrepareFlags",
    "ReportFlags",
    "RunFlags",
    "SimulateFlags",
    "SweepFlags",
    "simulator_config",
]
