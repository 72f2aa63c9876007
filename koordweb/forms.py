"""Forms of the UI pages: filters (GET) and the admin's uploads. Validation only, no writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.db.models import QuerySet

from koordweb.kubenames import NAME_CHARACTERS
from koordweb.limits import (
    DURATION,
    GATHER_STRATEGIES,
    JOB_NAME_MAX,
    MIN_AVAILABLE,
    POD_COUNT,
    TOKEN_DAYS,
)
from koordweb.models import Job
from koordweb.presenters.quantities import amount_in_unit, resource_choices, resource_label
from koordweb.presenters.words import layer_word
from koordweb.selectors.device_filters import CARD_STATES, CardFilter
from koordweb.selectors.devices import VENDORS
from koordweb.selectors.submission import SUBMIT_DEVICES
from koordweb.submission import (
    CARDS_PER_POD,
    NAMESPACE_MAX,
    PER_POD,
    TEXT_RULES,
    request_errors,
    submission_errors,
)
from scheduler.vocabulary import (
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    NVIDIA_GPU,
)

MILLI = 1000
GIB = 1024**3


def _choices(form: forms.Form, name: str) -> forms.ChoiceField:
    """A form's choice field, typed, so choices known only at request time can be set."""
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField)
    return field


class PodShapeForm(forms.Form):
    """The pod shape whose free "slots" the topology page counts, and a job to highlight."""

    resource = forms.ChoiceField(label="Accelerator")
    count = forms.IntegerField(label="per pod", min_value=0, max_value=1000, initial=8)
    cpu = forms.DecimalField(label="CPU cores", min_value=0, max_value=10_000, initial=0)
    memory = forms.DecimalField(label="Memory GiB", min_value=0, max_value=100_000, initial=0)
    # An id, not a choice: a job past the first 300 listed can still be highlighted by link.
    job = forms.IntegerField(label="Highlight job", required=False, widget=forms.Select)

    def __init__(self, *args: Any, resources: list[str], jobs: QuerySet[Job], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.jobs = jobs
        _choices(self, "resource").choices = resource_choices(resources)
        self.fields["resource"].initial = default_resource(resources)
        self.fields["job"].widget.choices = [("", "none")] + [(j.pk, str(j)) for j in jobs[:300]]

    def clean_job(self) -> Job | None:
        pk = self.cleaned_data.get("job")
        if pk is None:
            return None
        job = self.jobs.filter(pk=pk).first()
        if job is None:
            raise forms.ValidationError("no such job")
        return job

    def shape(self) -> dict[str, int]:
        data = self.cleaned_data
        shape = {data["resource"]: int(data["count"] or 0)}
        if data.get("cpu"):
            shape["cpu"] = int(data["cpu"] * MILLI)
        if data.get("memory"):
            shape["memory"] = int(data["memory"] * GIB)
        return shape

    @staticmethod
    def default_shape(resources: list[str]) -> dict[str, int]:
        resource = default_resource(resources)
        return {resource: 8 if resource != "cpu" else 1000}


def default_resource(resources: list[str]) -> str:
    """The resource a page shows first: GPUs when the cluster has them, else the first."""
    return NVIDIA_GPU if NVIDIA_GPU in resources else resources[0]


class DeviceFilterForm(forms.Form):
    """The devices page's filters. Blocks, teams and models depend on the cluster and the
    viewer: the view fills those widgets' choices, each with the cards it would show
    (`selectors.devices.device_grid`'s facets); a value no choice has matches no card."""

    vendor = forms.ChoiceField(
        required=False, choices=[("", "all vendors"), *VENDORS.items()], label="Vendor"
    )
    block = forms.CharField(
        required=False, max_length=253, widget=forms.Select(choices=[("", "all blocks")])
    )
    show = forms.ChoiceField(
        required=False, choices=[("", "every card"), *CARD_STATES.items()], label="Cards"
    )
    team = forms.CharField(
        required=False, max_length=253, widget=forms.Select(choices=[("", "all teams")])
    )
    model = forms.CharField(
        required=False,
        max_length=253,
        label="Model",
        widget=forms.Select(choices=[("", "all models")]),
    )

    def card_filter(self) -> CardFilter:
        """The valid filters (none when the form is unbound or invalid)."""
        if not self.is_valid():
            return CardFilter()
        data = {name: self.cleaned_data[name] or "" for name in self.fields}
        data["group"] = data.pop("block")
        return CardFilter(**data)

    def count_choices(
        self, name: str, values: list[tuple[str, str]], counts: dict[str, int]
    ) -> None:
        """A filter's choices with the cards each would show: 'team-a (16 cards)'."""
        labelled = []
        for value, words in values:
            n = counts.get(value, 0)
            labelled.append((value, f"{words} ({n:,} card{'' if n == 1 else 's'})"))
        field = self.fields[name]
        if isinstance(field, forms.ChoiceField):
            field.choices = labelled
        else:
            field.widget.choices = labelled  # type: ignore[attr-defined]


class PreemptionFilterForm(forms.Form):
    quota = forms.ChoiceField(required=False, label="Tenant (quota)")
    since = forms.DateTimeField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    until = forms.DateTimeField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )

    def __init__(self, *args: Any, quotas: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        _choices(self, "quota").choices = [("", "all tenants")] + [(q, q) for q in quotas]


class QuotaResourceForm(forms.Form):
    """The resource the quota chart shows: words with units on screen, the key submitted."""

    resource = forms.ChoiceField(label="Resource")

    def __init__(self, *args: Any, resources: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        _choices(self, "resource").choices = resource_choices(resources)


class ManifestUploadForm(forms.Form):
    """Kubernetes/Koordinator YAML, as a file or pasted; one of the two."""

    file = forms.FileField(required=False, label="YAML file")
    text = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 8}), label="or paste YAML"
    )
    dry_run = forms.BooleanField(required=False, initial=True, label="Validate only (dry run)")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("file")
        if upload is not None:
            try:
                data["yaml"] = upload.read().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise forms.ValidationError("the file is not UTF-8 text") from exc
        else:
            data["yaml"] = data.get("text") or ""
        if not data["yaml"].strip():
            raise forms.ValidationError("give a YAML file or paste YAML")
        return data


def _kubernetes(value: str, errors: Callable[[str], list[str]]) -> str:
    refused = errors(value)
    if refused:
        raise forms.ValidationError(refused)
    return value


# The inputs a pod's requests are made of (`JobSubmitForm.requests`).
REQUEST_INPUTS = frozenset({"device", "gpus", "gpu_share", "gpu_memory", "cpu", "memory"})


class JobSubmitForm(forms.Form):
    """A gang of identical pods, as the API's JSON submission has it, validated by the same rules
    (`koordweb.submission`, `koordweb.limits`; the service validates the rest against the
    cluster: quota membership, layers, shapes no node can hold)."""

    # Kubernetes' rules for the pods' names ("<name>-<index>") and namespace, as the API's.
    name = forms.CharField(
        max_length=JOB_NAME_MAX, help_text=f"A Kubernetes name: {NAME_CHARACTERS}."
    )
    namespace = forms.CharField(max_length=NAMESPACE_MAX, initial="default")
    quota = forms.ChoiceField(required=False)
    priority_class = forms.ChoiceField(required=False, label="Priority class")
    replicas = forms.IntegerField(
        min_value=POD_COUNT.minimum, max_value=POD_COUNT.maximum, initial=1, label="Pods"
    )
    min_available = forms.IntegerField(
        min_value=MIN_AVAILABLE.minimum,
        max_value=MIN_AVAILABLE.maximum,
        required=False,
        label="Pods that must start together",
    )
    device = forms.ChoiceField(label="Accelerator", required=False)
    gpus = forms.IntegerField(
        min_value=0, max_value=CARDS_PER_POD, initial=8, label="Cards per pod"
    )
    gpu_share = forms.IntegerField(
        min_value=1,
        max_value=100,
        required=False,
        label="GPU share per pod (% of a card)",
        help_text="For a GPU share: the part of one card's compute.",
    )
    gpu_memory = forms.DecimalField(
        min_value=0,
        max_value=PER_POD[GPU_MEMORY].typed,
        required=False,
        label="GPU memory per pod (GiB)",
        help_text="For a GPU share: the card memory it needs (else its share of the memory).",
    )
    cpu = forms.DecimalField(
        min_value=0, max_value=PER_POD["cpu"].typed, initial=8, label="CPU cores per pod"
    )
    memory = forms.DecimalField(
        min_value=0, max_value=PER_POD["memory"].typed, initial=32, label="Memory GiB"
    )
    gather_layer = forms.ChoiceField(required=False, label="Keep pods within layer")
    gather_strategy = forms.ChoiceField(
        choices=list(
            zip(
                GATHER_STRATEGIES,
                ["all pods must stay in one", "preferably in one, may spread if needed"],
                strict=True,
            )
        ),
        required=False,
        label="Within one of that layer",
    )
    duration_seconds = forms.IntegerField(
        min_value=DURATION.minimum, max_value=DURATION.maximum, required=False, label="Duration (s)"
    )

    def __init__(
        self,
        *args: Any,
        quotas: list[str],
        priority_classes: list[str] | list[tuple[str, str]],
        layers: list[str],
        admin: bool = False,
        devices: list[tuple[str, str]] | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        # The kinds of accelerator the cluster has (`SUBMIT_DEVICES`), NVIDIA GPUs first.
        offered = devices if devices is not None else [("gpu", SUBMIT_DEVICES["gpu"][0])]
        _choices(self, "device").choices = [*offered, ("", "none (CPU only)")]
        self.fields["device"].initial = offered[0][0] if offered else ""
        # A tenant must name one of its quotas; only admins may submit without one.
        none = [("", "none (admins)")] if admin else []
        _choices(self, "quota").choices = none + [(q, q) for q in quotas]
        self.fields["quota"].required = not admin
        _choices(self, "priority_class").choices = [("", "cluster default")] + [
            (p, p) if isinstance(p, str) else p for p in priority_classes
        ]
        _choices(self, "gather_layer").choices = [("", "no constraint")] + [
            (n, layer_word(n)) for n in layers
        ]

    def clean_device(self) -> str:
        # A post without the field (an older form, a script) meant NVIDIA GPUs.
        if "device" not in self.data:
            return str(self.fields["device"].initial or "")
        return str(self.cleaned_data.get("device") or "")

    # After max_length, as the API: no pattern ever runs over megabytes of text.
    def clean_name(self) -> str:
        return _kubernetes(self.cleaned_data["name"], TEXT_RULES["name"])

    def clean_namespace(self) -> str:
        return _kubernetes(self.cleaned_data["namespace"], TEXT_RULES["namespace"])

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("device") == "gpu-share" and not data.get("gpu_share"):
            self.add_error("gpu_share", "a GPU share needs the part of a card it uses")
        if not self.errors.keys() & REQUEST_INPUTS:
            # The pod's requests are made of several inputs: their refusal is said above them.
            for message in request_errors(self.requests()):
                self.add_error(None, message)
        if self.errors:
            return data  # the rules across fields read valid fields only, as the API's
        for field, messages in submission_errors(
            replicas=data["replicas"], min_available=data.get("min_available")
        ).items():
            for message in messages:
                self.add_error(field, message)
        return data

    def requests(self) -> dict[str, int]:
        data = self.cleaned_data
        requests = {"cpu": int(data["cpu"] * MILLI), "memory": int(data["memory"] * GIB)}
        device = data.get("device") or ""
        if device == "gpu-share":
            requests[GPU_CORE] = int(data.get("gpu_share") or 0)
            if data.get("gpu_memory"):
                requests[GPU_MEMORY] = int(data["gpu_memory"] * GIB)
            else:
                requests[GPU_MEMORY_RATIO] = int(data.get("gpu_share") or 0)
        elif device in SUBMIT_DEVICES and data["gpus"]:
            requests[SUBMIT_DEVICES[device][1]] = int(data["gpus"])
        return {name: amount for name, amount in requests.items() if amount}


class TokenCreateForm(forms.Form):
    """A new API token's lifetime, bounded as the API's (`limits.TOKEN_DAYS`)."""

    expiry_days = forms.IntegerField(
        min_value=TOKEN_DAYS.minimum,
        max_value=TOKEN_DAYS.maximum,
        required=False,
        label="Expires in (days)",
    )


def amount_from_unit(resource: str, value: Any) -> int:
    """The stored integer for an amount typed in the unit `amount_in_unit` shows: cores ->
    milli-cores, GiB -> bytes; cards, percents and counts as they are."""
    unit = amount_in_unit(resource, 0)[1]
    if unit == "cores":
        return round(value * MILLI)
    if unit == "GiB":
        return round(value * GIB)
    return int(value)


# A quota's single-value settings the edit form holds beside its resource lists.
SETTINGS = (
    "max_pending_jobs",
    "max_pending_pods",
    "gpu_idle_alert_minutes",
    "gpu_efficiency_threshold_percent",
)


class QuotaEditForm(forms.Form):
    """A quota's limits in units (cores, GiB, cards): min, max and shared weight per resource,
    the pending limits and the idle-alert threshold. A blank amount leaves the resource out of
    the list. On a Kubernetes cluster only what koordweb owns is enabled (`services.ownership`);
    the service checks the rest (min within max, within the parent's max) and records it."""

    max_pending_jobs = forms.IntegerField(
        min_value=0, max_value=1_000_000, label="Jobs that may wait at once"
    )
    max_pending_pods = forms.IntegerField(
        min_value=0, max_value=10_000_000, label="Pods that may wait at once"
    )
    gpu_idle_alert_minutes = forms.IntegerField(
        min_value=1, max_value=60 * 24 * 30, label="Flag GPUs idle for longer than (minutes)"
    )
    gpu_efficiency_threshold_percent = forms.IntegerField(
        min_value=0, max_value=100, label="Flag jobs using less of their GPUs than (%)"
    )

    LISTS = (("min", "Min"), ("max", "Max"), ("shared_weight", "Shared weight"))

    def __init__(
        self,
        *args: Any,
        quota: Any,
        resources: list[str],
        owned_only: frozenset[str] | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.resources = resources
        self.rows: list[tuple[str, list[forms.BoundField]]] = []
        for i, resource in enumerate(resources):
            _, unit = amount_in_unit(resource, 0)
            for key, word in self.LISTS:
                name = f"{key}_{i}"
                stored = (getattr(quota, key) or {}).get(resource)
                shown = None if stored is None else amount_in_unit(resource, stored)[0]
                if shown is not None and unit not in ("cores", "GiB"):
                    shown = int(shown)
                self.fields[name] = forms.DecimalField(
                    required=False,
                    min_value=0,
                    max_digits=20,
                    decimal_places=3 if unit in ("cores", "GiB") else 0,
                    label=f"{word}: {resource_label(resource)}",
                    initial=shown,
                )
        for name in SETTINGS:
            self.fields[name].initial = getattr(quota, name)
        if owned_only is not None:
            for name, field in self.fields.items():
                field.disabled = name not in owned_only
        for i, resource in enumerate(resources):
            self.rows.append(
                (resource_label(resource), [self[f"{key}_{i}"] for key, _ in self.LISTS])
            )

    def values(self) -> dict[str, Any]:
        """The quota's new fields as the rows hold them (resource lists in integer units)."""
        data = self.cleaned_data
        values: dict[str, Any] = {name: data[name] for name in SETTINGS}
        for key, _ in self.LISTS:
            amounts = {
                resource: amount_from_unit(resource, data[f"{key}_{i}"])
                for i, resource in enumerate(self.resources)
                if data.get(f"{key}_{i}") is not None
            }
            values[key] = amounts if amounts or key != "shared_weight" else None
        return values
