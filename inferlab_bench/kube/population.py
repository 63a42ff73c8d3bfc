"""Population delivery into AIPerf's pods: a volume plus an init container that checks the sha256.

A ConfigMap holds at most about 1 MiB and a 1,000-entry ShareGPT population is several MB,
so the population travels as a file on a pod volume. Two sources fill that volume:

- ``UrlDelivery``: an ``emptyDir`` that an init container fills by downloading the file;
  it needs no storage class, only an HTTP(S) URL the pods can reach (object store, web server).
- ``PvcDelivery``: a PersistentVolumeClaim that already holds the file, mounted read-only
  (``ReadOnlyMany`` or ``ReadWriteMany``: the controller and worker pods all mount it).

Either way the init container hashes the file and exits non-zero on a mismatch, so no AIPerf
container starts, and no request is sent, unless the bytes are the frozen population.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeAlias

from inferlab_bench.errors import ConfigurationError

VOLUME_NAME = "inferlab-population"
MOUNT_DIR = "/inferlab/population"
INIT_CONTAINER_NAME = "inferlab-population-check"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")

# Runs in the AIPerf image (AIPerf's own results sidecar runs `python -m ...` there). Fetches
# when a URL is given, then hashes the file in 1 MiB chunks; a mismatch or a failed fetch
# exits 1 and the pod never starts its services.
CHECK_SCRIPT = """\
import hashlib, os, sys, urllib.request
path = os.environ["INFERLAB_POPULATION_PATH"]
expected = os.environ["INFERLAB_POPULATION_SHA256"]
url = os.environ.get("INFERLAB_POPULATION_URL", "")
if url:
    part = path + ".part"
    with urllib.request.urlopen(url, timeout=120) as response, open(part, "wb") as out:
        while chunk := response.read(1 << 20):
            out.write(chunk)
    os.replace(part, path)
digest = hashlib.sha256()
with open(path, "rb") as handle:
    while chunk := handle.read(1 << 20):
        digest.update(chunk)
actual = digest.hexdigest()
if actual != expected:
    sys.stderr.write(f"inferlab population {path}: sha256 mismatch, "
                     f"expected {expected}, got {actual}\\n")
    sys.exit(1)
print(f"inferlab population {path}: sha256 {actual} verified")
"""


@dataclass(frozen=True)
class UrlDelivery:
    """Download the population from ``url`` into an emptyDir before the load starts."""

    url: str


@dataclass(frozen=True)
class PvcDelivery:
    """Mount ``claim`` read-only; the population is the file ``sub_path`` on it."""

    claim: str
    sub_path: str = "population.jsonl"


PopulationDelivery: TypeAlias = UrlDelivery | PvcDelivery


@dataclass(frozen=True)
class PodPopulation:
    """What the pod template needs for one population: where it is and how it gets there."""

    path: str
    volumes: tuple[dict[str, Any], ...]
    volume_mounts: tuple[dict[str, Any], ...]
    init_containers: tuple[dict[str, Any], ...]


def check_delivery(delivery: PopulationDelivery) -> None:
    """Reject a delivery that could never work, before anything is generated."""
    if isinstance(delivery, UrlDelivery):
        if not delivery.url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"--population-url: expected an http:// or https:// URL, found {delivery.url!r}",
                hint="upload population.jsonl where the cluster's pods can fetch it",
            )
        return
    if not _DNS_LABEL.fullmatch(delivery.claim):
        raise ConfigurationError(
            f"--population-pvc: {delivery.claim!r} is not a valid PersistentVolumeClaim name",
            hint="lower-case letters, digits and '-', at most 63 characters",
        )
    if delivery.sub_path.startswith("/") or ".." in delivery.sub_path.split("/"):
        raise ConfigurationError(
            f"--population-pvc: file {delivery.sub_path!r} must be a relative path on the claim"
        )


def pod_population(delivery: PopulationDelivery, sha256: str, image: str) -> PodPopulation:
    """The volume, mounts and sha256-checking init container for one population file."""
    check_delivery(delivery)
    if not _SHA256.fullmatch(sha256):
        raise ConfigurationError(
            f"population.sha256: expected 64 lower-case hex digits, found {sha256!r}"
        )
    if isinstance(delivery, UrlDelivery):
        path = f"{MOUNT_DIR}/population.jsonl"
        volume: dict[str, Any] = {"name": VOLUME_NAME, "emptyDir": {}}
        env = [{"name": "INFERLAB_POPULATION_URL", "value": delivery.url}]
        init_mount: dict[str, Any] = {"name": VOLUME_NAME, "mountPath": MOUNT_DIR}
    else:
        path = f"{MOUNT_DIR}/{delivery.sub_path}"
        volume = {
            "name": VOLUME_NAME,
            "persistentVolumeClaim": {"claimName": delivery.claim, "readOnly": True},
        }
        env = []
        init_mount = {"name": VOLUME_NAME, "mountPath": MOUNT_DIR, "readOnly": True}
    env += [
        {"name": "INFERLAB_POPULATION_PATH", "value": path},
        {"name": "INFERLAB_POPULATION_SHA256", "value": sha256},
    ]
    init = {
        "name": INIT_CONTAINER_NAME,
        "image": image,
        "command": ["python", "-c", CHECK_SCRIPT],
        "env": env,
        "volumeMounts": [init_mount],
    }
    return PodPopulation(
        path=path,
        volumes=(volume,),
        volume_mounts=({"name": VOLUME_NAME, "mountPath": MOUNT_DIR, "readOnly": True},),
        init_containers=(init,),
    )
