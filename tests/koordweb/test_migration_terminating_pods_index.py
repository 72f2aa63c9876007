"""Migration 0018 indexes the pods still terminating, by cluster: the sync's read of them uses it
instead of scanning every pod the cluster ever ran. A plain CREATE INDEX: the pod table keeps the
change-position triggers. Forward and back, on the test database."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from koordweb.models import Cluster, PodPhase
from tests.koordweb.schema import index_definition, migrate_to, table_triggers

BEFORE = [("koordweb", "0017_change_position_set_by_writers")]
INDEX = "pod_terminating_active"


@pytest.mark.django_db(transaction=True)
def test_terminating_pods_index_comes_and_goes(latest: Any) -> None:
    triggers = table_triggers("koordweb_pod")
    definition = index_definition(INDEX)
    assert definition and "WHERE" in definition.upper() and "terminating" in definition
    if connection.vendor == "postgresql":
        # The sync's own query (koordweb.backends.simulated) is answered from the index.
        cluster = Cluster.objects.create(name="c")
        gone = cluster.pods.filter(terminating=True, terminating_since__lte=timezone.now())
        gone = gone.exclude(phase__in=(PodPhase.SUCCEEDED, PodPhase.FAILED))
        with connection.cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")
            plan = gone.values_list("job_id", flat=True).explain()
            cursor.execute("RESET enable_seqscan")
        assert INDEX in plan

    migrate_to(BEFORE)
    assert index_definition(INDEX) is None
    assert table_triggers("koordweb_pod") == triggers

    migrate_to(latest)
    assert index_definition(INDEX) == definition
    assert table_triggers("koordweb_pod") == triggers
