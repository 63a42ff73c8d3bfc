"""How a case runs on Kubernetes: namespace, workers, operator or raw manifests, population."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from inferlab_bench.errors import ConfigurationError
from inferlab_bench.kube.population import PopulationDelivery, check_delivery
from inferlab_bench.versions import PINNED_AIPERF_VERSION

DEFAULT_IMAGE = f"nvcr.io/nvidia/aiperf:{PINNED_AIPERF_VERSION}"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class KubeOptions:
    """Everything the Kubernetes engine needs beyond the BenchClientRequest."""

    namespace: str
    workers: int | None = None
    operator: bool = True
    dry_run: bool = False
    image: str = DEFAULT_IMAGE
    population: PopulationDelivery | None = None
    tokenizer: str | None = None
    """The tokenizer name the pods load (``--pod-tokenizer``); None = the request's locator."""
    extra_urls: tuple[str, ...] = ()
    """Further replicas of the server (``--url`` repeated), spread by AIPerf's url_strategy."""
    name: str | None = None
    poll_seconds: float = 5.0
    kubeconfig: Path | None = None
    aiperf_command: tuple[str, ...] = (sys.executable, "-m", "aiperf")
    """This interpreter's own AIPerf (the pinned one), never whatever ``aiperf`` is on PATH."""
    kubectl_command: tuple[str, ...] = ("kubectl",)

    def __post_init__(self) -> None:
        if not _DNS_LABEL.fullmatch(self.namespace):
            raise ConfigurationError(
                f"--namespace: {self.namespace!r} is not a valid Kubernetes namespace",
                hint="lower-case letters, digits and '-', at most 63 characters",
            )
        if self.workers is not None and self.workers < 1:
            raise ConfigurationError(f"--workers: expected a positive count, found {self.workers}")
        if self.name is not None and (len(self.name) > 40 or not _DNS_LABEL.fullmatch(self.name)):
            raise ConfigurationError(
                f"--kube-name: {self.name!r} must be a DNS label of at most 40 characters"
            )
        if not self.image:
            raise ConfigurationError("--image: the AIPerf container image must not be empty")
        if self.poll_seconds <= 0:
            raise ConfigurationError(f"poll interval must be positive, found {self.poll_seconds}")
        if self.population is not None:
            check_delivery(self.population)
        for url in self.extra_urls:
            if not url.startswith(("http://", "https://")):
                raise ConfigurationError(
                    f"--url {url!r}: expected http://HOST:PORT (every --url after the first)"
                )
