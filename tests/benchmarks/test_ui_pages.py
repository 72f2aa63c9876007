"""The page-times benchmark's code path on a small cluster, without its timing: the generated
cluster has every kind of card, node reports, card samples, rounds and preemptions; every page
answers 200 to the admin (and the tenant, but for the admins' pages); the table has a row per
page."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import caches

from benchmarks import ui_pages as bench
from koordweb.models import CardSample, Device, NodeMetric, Preemption

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _private_cache(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "ui"}
    }
    caches["default"].clear()
    from koordweb import tasks

    # The rounds are run here, one simulated minute at a time; nothing is queued for a worker.
    monkeypatch.setattr(tasks.run_round, "apply_async", lambda *args, **kwargs: None)


def test_every_page_answers_and_has_a_row_on_a_small_cluster() -> None:
    world = bench.build_world(nodes=40, minutes=14)
    cluster = world.cluster
    assert cluster.nodes.count() == 40
    vendors = set(Device.objects.filter(node__cluster=cluster).values_list("vendor", flat=True))
    assert vendors == {"nvidia", "huawei", "cambricon"}
    assert NodeMetric.objects.filter(node__cluster=cluster).exists()
    assert CardSample.objects.exists()
    assert Preemption.objects.filter(cluster=cluster).exists()

    timings = bench.measure_all(world, repeat=1)
    answers = {(t.role, t.label): t.status for t in timings}
    labels = [page.label for page in bench.pages(cluster)]
    skipped = {page.label: page.not_for_tenant for page in bench.pages(cluster)}
    skipped = {label: why for label, why in skipped.items() if why}
    assert set(skipped) == {"quota edit", "import", "job: running NPU job"}
    assert {label for role, label in answers if role == "admin"} == set(labels)
    assert {label for role, label in answers if role == "tenant"} == set(labels) - set(skipped)
    assert {key: code for key, code in answers.items() if code != 200} == {}
    assert all(t.queries > 0 and t.size_bytes > 0 for t in timings)

    result = bench.summary(world, timings)
    section = bench.markdown(result, repeat=1)
    assert section.startswith(bench.BEGIN) and section.endswith(bench.END)
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == labels
    for label, why in skipped.items():
        assert next(r for r in rows if r.startswith(f"| {label} |")).endswith(f"| {why} | | | |")


def test_the_section_is_rewritten_between_its_markers() -> None:
    section = f"{bench.BEGIN}\nnew table\n{bench.END}"
    heading = "## Page times at 1,000 nodes"
    text = f"# The web UI\n\n{heading}\n\n{bench.BEGIN}\nold\n{bench.END}\n\n## Tests\n"
    rewritten = bench.rewrite_between(text, section)
    assert "old" not in rewritten and "new table" in rewritten
    assert rewritten.count(bench.BEGIN) == 1 and rewritten.endswith("## Tests\n")
    appended = bench.rewrite_between("# The web UI\n", section)
    assert appended.endswith(f"{heading}\n\n{section}\n")
