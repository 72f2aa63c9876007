"""Every device kind in its own words (issue #37, item 7): an Ascend job holding AI cores and a
Cambricon job holding an MLU slice, both idle for hours, read NPU and MLU on the overview, the
job page and the jobs table, never GPU; counts take their plural ("1 job", "2 jobs"), never
"job(s)"; the overview counts unhealthy cards once. Django's test client on
`builders.pages_world`."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from koordweb.models import ElasticQuota, Job, JobGpuState
from tests.builders import Pages
from tests.builders.cluster import GIB
from tests.builders.devices import DEVICE_ALLOCATED, gpu_node
from tests.builders.jobs import gang

NPU_CORE = "huawei.com/npu-core"
MLU_VCORE = "cambricon.com/mlu.smlu.vcore"
GPU_CORE = "koordinator.sh/gpu-core"


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _idle_job(ui: Pages, name: str, vendor: str, requests: dict[str, int], card: dict) -> Job:
    """A team-b job alone on its own node of `vendor`, holding card 0, idle for five hours."""
    node = gpu_node(
        ui.cluster, f"node-{name}", spine="s3", block=f"b-{name}", vendor=vendor, resource="x/y"
    )
    now = timezone.now()
    job = gang(
        ui.cluster,
        name,
        quota=ElasticQuota.objects.get(cluster=ui.cluster, name="team-b"),
        requests={"cpu": 4000, "memory": 32 * GIB, **requests},
        nodes=[node],
        annotations={DEVICE_ALLOCATED: json.dumps({"gpu": [{"minor": 0, "resources": card}]})},
        started_at=now - timedelta(hours=5),
    )
    JobGpuState.objects.create(
        job=job, idle_since=now - timedelta(hours=5), idle_allocated=5 * 3600 * 100
    )
    return job


def _npu_job(ui: Pages) -> Job:
    return _idle_job(ui, "npu-notebook", "huawei", {NPU_CORE: 20}, {NPU_CORE: 20, GPU_CORE: 100})


def _mlu_job(ui: Pages) -> Job:
    return _idle_job(ui, "mlu-slice", "cambricon", {MLU_VCORE: 50}, {GPU_CORE: 50})


def _idle_line(html: str) -> str:
    found = re.search(r'data-count="idle-jobs">.*?</a>', html, re.S)
    assert found, html
    return _text(found.group(0).split(">", 1)[1]).strip()


def test_the_overview_names_one_idle_npu_job_in_npu_words(ui: Pages, as_admin: Client) -> None:
    _npu_job(ui)
    html = as_admin.get(reverse("overview")).content.decode()
    assert _idle_line(html) == "1 job with NPUs idle too long"
    assert "GPUs idle" not in _text(html)


def test_the_overview_says_cards_for_idle_jobs_of_two_kinds(ui: Pages, as_admin: Client) -> None:
    _npu_job(ui)
    _mlu_job(ui)
    html = as_admin.get(reverse("overview")).content.decode()
    assert _idle_line(html) == "2 jobs with cards idle too long"
    assert "npu-notebook" in html and "mlu-slice" in html


def test_the_overview_says_mlus_for_an_idle_mlu_slice(ui: Pages, as_admin: Client) -> None:
    _mlu_job(ui)
    html = as_admin.get(reverse("overview")).content.decode()
    assert _idle_line(html) == "1 job with MLUs idle too long"


def test_the_overview_counts_no_idle_job_in_the_plural(ui: Pages, as_admin: Client) -> None:
    html = as_admin.get(reverse("overview")).content.decode()
    assert _idle_line(html) == "0 jobs with GPUs idle too long"


@pytest.mark.parametrize(("make", "word"), [(_npu_job, "NPU"), (_mlu_job, "MLU")])
def test_the_job_page_names_its_idle_cards_by_their_kind(
    ui: Pages, as_admin: Client, make: object, word: str
) -> None:
    job = make(ui)  # type: ignore[operator]
    html = as_admin.get(reverse("job-detail", args=[job.pk])).content.decode()
    usage = re.search(r'<section aria-label="card usage">(.*?)</section>', html, re.S)
    assert usage, html
    text = _text(usage.group(1))
    assert f"{word} usage" in text and f"Idle {word}s: its cards have been idle for 5 h" in text
    assert f"5.00 {word}-hours lost so far" in text
    assert "GPU usage" not in text and "Idle GPUs" not in text, text


@pytest.mark.parametrize(("make", "word"), [(_npu_job, "NPUs"), (_mlu_job, "MLUs")])
def test_the_jobs_table_names_idle_cards_by_their_kind(
    ui: Pages, as_admin: Client, make: object, word: str
) -> None:
    job = make(ui)  # type: ignore[operator]
    html = as_admin.get(reverse("jobs"), {"state": "all"}).content.decode()
    row = re.search(rf'<tr data-job="{job.name}">(.*?)</tr>', html, re.S)
    assert row
    text = _text(row.group(1))
    assert f"{word} idle for 5 h" in text and "GPU" not in text, text


def test_a_gpu_job_still_reads_gpus_on_its_page(ui: Pages, as_admin: Client) -> None:
    now = timezone.now()
    JobGpuState.objects.create(job=ui.running, idle_since=now - timedelta(hours=5))
    html = as_admin.get(reverse("job-detail", args=[ui.running.pk])).content.decode()
    assert "GPU usage" in _text(html) and "Idle GPUs:" in _text(html)


def test_the_overview_counts_unhealthy_cards_once_and_never_says_s(
    ui: Pages, as_admin: Client
) -> None:
    html = as_admin.get(reverse("overview")).content.decode()
    # node-3's card 7 is unhealthy: one count (the tile), its name once below it
    assert len(re.findall(r'data-count="unhealthy[^"]*"', html)) == 1
    assert re.search(r'data-count="unhealthy-cards">1<', html)
    text = _text(html)
    assert "1 unhealthy card of" in text and text.count("node-3 #7") == 1
    assert "(s)" not in text
    # node-5 has no spine: outside the topology, counted in the singular
    assert "1 node outside the topology: node-5" in text
