"""Load (issue #9 item 1): many clients submitting through gunicorn while rounds run.

The app runs as in production: `gunicorn koordweb.wsgi -w 2` on a free 127.0.0.1 port and a
`celery worker -B` (timed rounds every second, plus the round each submission asks for), both on
the test database and on a broker and cache of their own (a private redis-server on a free port
when the suite runs on Redis, a filesystem broker in a temp dir otherwise), so nothing of another
test run takes their tasks. Client threads POST /api/v1/jobs/ with Idempotency-Keys, half of the
submissions reusing a key another thread has just sent. Checked: every answer 200/201 (0 5xx),
jobs created = unique keys, every key answered with one job id, 0 failed rounds.

`KOORDWEB_LOAD_CLIENTS` x `KOORDWEB_LOAD_SUBMISSIONS` sets the load (CI: 8 x 40; the benchmark
benchmarks/reliability_load.py runs 8 x 250); `KOORDWEB_RELIABILITY_RESULTS` names a JSON file
for the figures. The stack is `tests/reliability/stack.py`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from koordweb.models import Job, Round
from tests.builders import load_world
from tests.reliability.stack import AppStack, Submission, Submitter, private_broker

pytestmark = pytest.mark.django_db(transaction=True)
CLIENTS = int(os.environ.get("KOORDWEB_LOAD_CLIENTS", "8"))
SUBMISSIONS = int(os.environ.get("KOORDWEB_LOAD_SUBMISSIONS", "40"))


def percentile(sorted_values: list[float], pct: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(pct / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


def key_plan(client: int, count: int, clients: int) -> list[str]:
    """Keys client `client` sends: even positions new, odd ones the neighbour's previous key.

    The neighbour sends that key at about the same moment, so replays race the first submission
    as well as follow it.
    """
    keys = []
    for j in range(count):
        if j % 2 == 0:
            keys.append(f"k{client}-{j}")
        else:
            keys.append(f"k{(client + 1) % clients}-{j - 1}")
    return keys


def test_load_through_gunicorn(tmp_path: Path) -> None:
    world = load_world()
    plans = [key_plan(i, SUBMISSIONS, CLIENTS) for i in range(CLIENTS)]
    unique_keys = {key for plan in plans for key in plan}
    with private_broker(tmp_path) as broker, AppStack(tmp_path, broker) as stack:
        stack.start_web(workers=2)
        stack.start_worker(beat_seconds=1.0)
        before = timezone.now()
        results: list[list[Submission]] = [[] for _ in range(CLIENTS)]
        errors: list[BaseException] = []

        def client(index: int) -> None:
            try:
                submitter = Submitter(stack.url, world.tokens[index % len(world.tokens)])
                for key in plans[index]:
                    results[index].append(submitter.submit(key, retries=0))
            except BaseException as exc:  # reported below; a thread cannot fail the test
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        t0 = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        wall = time.monotonic() - t0
        assert not errors, errors
        # Rounds keep running after the burst: wait for one that started after the last answer.
        last_answer = timezone.now()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if Round.objects.filter(cluster=world.cluster, started_at__gt=last_answer).exists():
                break
            time.sleep(0.5)
        stack.stop()

    answers = [s for client_results in results for s in client_results]
    codes: dict[int, int] = {}
    for s in answers:
        codes[s.status] = codes.get(s.status, 0) + 1
    ids_by_key: dict[str, set[int]] = {}
    for s in answers:
        if s.job_id is not None:
            ids_by_key.setdefault(s.key, set()).add(s.job_id)
    jobs = Job.objects.filter(cluster=world.cluster, idempotency_key__in=unique_keys)
    job_ids_by_key: dict[str, list[int]] = {}
    for key, job_id in jobs.values_list("idempotency_key", "id"):
        job_ids_by_key.setdefault(str(key), []).append(job_id)
    rounds = Round.objects.filter(cluster=world.cluster, started_at__gte=before)
    latencies = sorted(s.seconds for s in answers)
    figures: dict[str, Any] = {
        "clients": CLIENTS,
        "submissions_per_client": SUBMISSIONS,
        "requests": len(answers),
        "unique_keys": len(unique_keys),
        "answers_by_status": {str(k): v for k, v in sorted(codes.items())},
        "jobs_created": jobs.count(),
        "keys_lost": sorted(unique_keys - set(job_ids_by_key))[:10],
        "keys_duplicated": sum(1 for ids in job_ids_by_key.values() if len(ids) > 1),
        "keys_answered_with_two_ids": sum(1 for ids in ids_by_key.values() if len(ids) > 1),
        "latency_ms": {
            "p50": round(percentile(latencies, 50) * 1000, 1),
            "p95": round(percentile(latencies, 95) * 1000, 1),
            "max": round(latencies[-1] * 1000, 1),
        },
        "throughput_per_s": round(len(answers) / wall, 1),
        "wall_seconds": round(wall, 1),
        "rounds": rounds.count(),
        "rounds_failed": rounds.filter(state=Round.State.FAILED).count(),
        "database": stack.database_label,
        "broker": broker.label,
    }
    print(json.dumps(figures, indent=2))
    results_file = os.environ.get("KOORDWEB_RELIABILITY_RESULTS")
    if results_file:
        Path(results_file).write_text(json.dumps(figures, indent=2) + "\n")

    assert figures["requests"] == CLIENTS * SUBMISSIONS
    assert not [code for code in codes if code >= 500], (codes, stack.logs_tail())
    assert set(codes) <= {200, 201}, codes
    assert codes.get(201, 0) == len(unique_keys)
    assert figures["jobs_created"] == len(unique_keys)
    assert figures["keys_lost"] == []
    assert figures["keys_duplicated"] == 0
    assert figures["keys_answered_with_two_ids"] == 0
    assert all(ids == set(job_ids_by_key[key]) for key, ids in ids_by_key.items())
    assert figures["rounds"] >= 2, stack.logs_tail()
    assert figures["rounds_failed"] == 0, list(
        rounds.filter(state=Round.State.FAILED).values_list("error", flat=True)[:3]
    )
