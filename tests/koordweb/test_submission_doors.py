"""The UI's submit form and the API's JSON body accept and refuse the same submissions, naming the
same field: generated submissions (hypothesis) go through both doors (`koordweb.submission` is
their one definition).

The fields both doors take are generated: name, namespace, pods, pods that must start together,
duration, and a pod's CPU, memory and whole cards. What only one door has is left out: the
form's choices of the cluster's quotas, classes and layers (the API names them and the service
checks), its "GPU share" (part of one card) and the API's labels, tolerations and gang mode.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordweb.api.serializers.submission import JobSubmissionSerializer
from koordweb.forms import JobSubmitForm
from koordweb.limits import DURATION, JOB_NAME_MAX, POD_COUNT
from koordweb.submission import CARDS_PER_POD, PER_POD

# The form's inputs a pod's requests are made of; the API names the pod instead ("__all__": the
# form says a refusal of the requests as a whole above its fields).
AS_THE_API_NAMES = {"cpu": "pod", "memory": "pod", "gpus": "pod", "__all__": "pod"}

KUBERNETES_NAMES = st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?", fullmatch=True)
AWKWARD_TEXT = st.sampled_from(
    [
        "",
        " padded ",
        "Upper-Case",
        "a" * JOB_NAME_MAX,
        "a" * (JOB_NAME_MAX + 1),
        "a" * 64,
        "dots.in.name",
        "-leading",
        "job\u202etxt",
        "nul\x00byte",
        "<b>markup</b>",
    ]
)
NAMES = st.one_of(KUBERNETES_NAMES, AWKWARD_TEXT, st.text(max_size=12))


def around(low: int, high: int) -> st.SearchStrategy[int]:
    """Whole numbers inside a bound and just past each end."""
    return st.one_of(
        st.integers(low, high), st.sampled_from([low - 1, low, high, high + 1]), st.integers()
    )


SUBMISSIONS = st.fixed_dictionaries(
    {
        "name": NAMES,
        "namespace": NAMES,
        "replicas": around(POD_COUNT.minimum, POD_COUNT.maximum),
        "min_available": st.none() | around(1, 12),
        "duration_seconds": st.none() | around(DURATION.minimum, DURATION.maximum),
        "cpu_milli": around(0, PER_POD["cpu"].maximum),
        "memory_gib": around(0, PER_POD["memory"].typed),
        "cards": around(0, CARDS_PER_POD),
    }
)


def through_the_form(case: dict[str, Any]) -> set[str]:
    post = {
        "name": case["name"],
        "namespace": case["namespace"],
        "replicas": str(case["replicas"]),
        "min_available": "" if case["min_available"] is None else str(case["min_available"]),
        "duration_seconds": ""
        if case["duration_seconds"] is None
        else str(case["duration_seconds"]),
        "device": "gpu",
        "gpus": str(case["cards"]),
        "cpu": str(Decimal(case["cpu_milli"]) / 1000),
        "memory": str(case["memory_gib"]),
    }
    form = JobSubmitForm(post, quotas=[], priority_classes=[], layers=[], admin=True)
    form.is_valid()
    return {AS_THE_API_NAMES.get(field, field) for field in form.errors}


def through_the_api(case: dict[str, Any]) -> set[str]:
    body = {
        "name": case["name"],
        "namespace": case["namespace"],
        "replicas": case["replicas"],
        "min_available": case["min_available"],
        "duration_seconds": case["duration_seconds"],
        "pod": {
            "requests": {
                "cpu": f"{case['cpu_milli']}m",
                "memory": f"{case['memory_gib']}Gi",
                "nvidia.com/gpu": str(case["cards"]),
            }
        },
    }
    serializer = JobSubmissionSerializer(data=body)
    serializer.is_valid()
    return set(serializer.errors)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SUBMISSIONS)
def test_the_form_and_the_api_refuse_the_same_fields(case: dict[str, Any]) -> None:
    form, api = through_the_form(case), through_the_api(case)
    if any("\x00" in str(value) for value in case.values()):
        # A NUL character stops the API's body at once (PostgreSQL refuses them), naming the
        # first field holding one; the form goes on to name the others too.
        assert api and api <= form
    else:
        assert form == api


VALID = {
    "name": "train-1",
    "namespace": "team-a",
    "replicas": 4,
    "min_available": None,
    "duration_seconds": None,
    "cpu_milli": 8000,
    "memory_gib": 32,
    "cards": 8,
}


def test_a_valid_submission_passes_both() -> None:
    assert through_the_form(VALID) == through_the_api(VALID) == set()


def test_each_difference_found_is_gone() -> None:
    """What one door accepted and the other refused before they shared one definition."""
    cases = [
        # A pod asking for nothing: the API refused it, the form sent it to the service.
        {**VALID, "cpu_milli": 0, "memory_gib": 0, "cards": 0},
        # More of a resource than one pod may have: the form refused it, the API took it.
        {**VALID, "cpu_milli": PER_POD["cpu"].maximum + 1000},
        {**VALID, "memory_gib": PER_POD["memory"].typed + 1},
        {**VALID, "cards": CARDS_PER_POD + 1},
        # More pods that must start together than pods: both refused it, in different words.
        {**VALID, "min_available": 5},
    ]
    for case in cases:
        refused = through_the_form(case)
        assert refused, case
        assert refused == through_the_api(case), case
