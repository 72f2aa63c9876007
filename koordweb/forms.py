"""Forms of the UI pages: filters (GET) and the admin's uploads. Validation only, no writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.db.models import QuerySet

from koordweb.kubenames import NAME_CHARACTERS, namespace_errors
from koordweb.limits import (
    DURATION,
    GATHER_STRATEGIES,
    JOB_NAME_MAX,
    MIN_AVAILABLE,
    POD_COUNT,
    TOKEN_DAYS,
    job_name_errors,
)
from koordweb.models import Job
from koordweb.presenters.quantities import resource_choices
from koordweb.presenters.words import layer_word
from koordweb.selectors.devices import VENDORS
from scheduler.vocabulary import NVIDIA_GPU

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
    vendor = forms.ChoiceField(
        required=False, choices=[("", "all vendors"), *VENDORS.items()], label="Vendor"
    )
    # Blocks depend on the cluster: the view fills the widget's choices.
    block = forms.CharField(
        required=False, max_length=253, widget=forms.Select(choices=[("", "all blocks")])
    )


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


class JobSubmitForm(forms.Form):
    """A gang of identical pods, as the API's JSON submission has it, each field bounded as there
    (`koordweb.limits`; the service validates the rest against the cluster: quota membership,
    layers, shapes no node can hold)."""

    # Kubernetes' rules for the pods' names ("<name>-<index>") and namespace, as the API's.
    name = forms.CharField(
        max_length=JOB_NAME_MAX, help_text=f"A Kubernetes name: {NAME_CHARACTERS}."
    )
    namespace = forms.CharField(max_length=63, initial="default")
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
    gpus = forms.IntegerField(min_value=0, max_value=64, initial=8, label="GPUs per pod")
    cpu = forms.DecimalField(min_value=0, max_value=10_000, initial=8, label="CPU cores per pod")
    memory = forms.DecimalField(min_value=0, max_value=100_000, initial=32, label="Memory GiB")
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
        priority_classes: list[str],
        layers: list[str],
        admin: bool = False,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        # A tenant must name one of its quotas; only admins may submit without one.
        none = [("", "none (admins)")] if admin else []
        _choices(self, "quota").choices = none + [(q, q) for q in quotas]
        self.fields["quota"].required = not admin
        _choices(self, "priority_class").choices = [("", "cluster default")] + [
            (p, p) for p in priority_classes
        ]
        _choices(self, "gather_layer").choices = [("", "no constraint")] + [
            (n, layer_word(n)) for n in layers
        ]

    # After max_length, as the API: no pattern ever runs over megabytes of text.
    def clean_name(self) -> str:
        return _kubernetes(self.cleaned_data["name"], job_name_errors)

    def clean_namespace(self) -> str:
        return _kubernetes(self.cleaned_data["namespace"], namespace_errors)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        replicas, minimum = data.get("replicas"), data.get("min_available")
        if replicas and minimum and minimum > replicas:
            self.add_error("min_available", "cannot exceed the number of pods")
        return data

    def requests(self) -> dict[str, int]:
        data = self.cleaned_data
        requests = {"cpu": int(data["cpu"] * MILLI), "memory": int(data["memory"] * GIB)}
        if data["gpus"]:
            requests[NVIDIA_GPU] = int(data["gpus"])
        return {name: amount for name, amount in requests.items() if amount}


class TokenCreateForm(forms.Form):
    """A new API token's lifetime, bounded as the API's (`limits.TOKEN_DAYS`)."""

    expiry_days = forms.IntegerField(
        min_value=TOKEN_DAYS.minimum,
        max_value=TOKEN_DAYS.maximum,
        required=False,
        label="Expires in (days)",
    )
