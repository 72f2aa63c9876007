"""What a job submission may hold, defined once for the UI's submit form (`forms.JobSubmitForm`)
and the API's JSON body (`api.serializers.submission.JobSubmissionSerializer`), so the two doors
accept and refuse the same submissions and name the same field.

The bounds of single numbers are `koordweb.limits`'; this module adds the rules of a submission
as a whole: its name and namespace as Kubernetes has them, what one pod may request, and the
rules across fields. The service then checks the rest against the cluster (quota membership,
layers, shapes no node can hold). Pure: no ORM, no request, no form or serializer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from koordweb.kubenames import container_resource_errors, namespace_errors
from koordweb.limits import job_name_errors
from scheduler.vocabulary import (
    AMD_GPU,
    CAMBRICON_MLU,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    HUAWEI_NPU,
    HYGON_DCU,
    KOORD_GPU,
    NVIDIA_GPU,
)

MILLI = 1000
GIB = 1024**3
CARDS_PER_POD = 64
NAMESPACE_MAX = 63

# The rules of the text fields, run after their length is checked (no pattern ever runs over
# megabytes of text): each gives the reasons a value is refused, none when it is accepted.
TEXT_RULES: dict[str, Callable[[str], list[str]]] = {
    "name": job_name_errors,
    "namespace": namespace_errors,
}


@dataclass(frozen=True)
class PodLimit:
    """The most one pod may request of a resource, in its stored unit and in words."""

    maximum: int
    words: str
    # The amount in the unit a person types it in (cores, GiB, cards): the form's bound.
    typed: int


def _limit(maximum: int, unit: int, words: str) -> PodLimit:
    return PodLimit(maximum * unit, f"{maximum:,} {words}", maximum)


_CARDS = _limit(CARDS_PER_POD, 1, "cards")
_PERCENT_OF_CARDS = _limit(CARDS_PER_POD * 100, 1, "percent of a card (64 cards)")
PER_POD: dict[str, PodLimit] = {
    "cpu": _limit(10_000, MILLI, "cores"),
    "memory": _limit(100_000, GIB, "GiB"),
    GPU_MEMORY: _limit(1024, GIB, "GiB of GPU memory"),
    **dict.fromkeys((NVIDIA_GPU, AMD_GPU, HYGON_DCU, HUAWEI_NPU, CAMBRICON_MLU), _CARDS),
    **dict.fromkeys((KOORD_GPU, GPU_CORE, GPU_MEMORY_RATIO), _PERCENT_OF_CARDS),
}


def request_errors(requests: Mapping[str, int]) -> list[str]:
    """One pod's requests, checked with the pod's other fields: resources a container may ask
    for, at least one of them, and no more of each than one pod may have."""
    refused = container_resource_errors(requests)
    if refused:
        return refused
    if not any(requests.values()):
        return ["a pod must request at least one resource"]
    return [
        f"{name}: must be at most {PER_POD[name].words} per pod"
        for name, amount in requests.items()
        if name in PER_POD and amount > PER_POD[name].maximum
    ]


def submission_errors(*, replicas: int, min_available: int | None) -> dict[str, list[str]]:
    """The rules across fields, keyed by the field refused; run once every field (the pod's
    requests too) holds a valid value of its own."""
    if min_available is not None and min_available > replicas:
        return {"min_available": [f"must be at most the number of pods ({replicas})"]}
    return {}
