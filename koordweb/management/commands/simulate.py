"""`python manage.py simulate FILE.yaml [--rounds N] [--scheduler-args JSON] [--check]`: rounds on
a YAML dump, nothing kept.

The objects are imported into a scratch cluster in a private in-memory database
(`koordweb.services.scratch`), so the configured database is never read, written or locked and
need not even be migrated; rounds run through the same code as the real ones (the simulated
backend enacts them), until a round changes nothing or N rounds have run. The decisions are
printed as JSON on stdout. `--scheduler-args` runs them with plugin arguments, as a cluster's
`scheduler_args` would (e.g. '{"NetworkTopology": {"bestFit": true}}'), to compare profiles.
`--check` has the round oracle (`scheduler.oracle`) check every round against the snapshot it was
planned from, with the rules the profile's plugins keep: the violations are added to each round's
JSON and printed in words on stderr, and the command exits 1 when there are any.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError
from django.utils import timezone

from koordweb.backends.simulated import SimulatedBackend
from koordweb.engine.pipeline import round_execute
from koordweb.manifests import ManifestError, import_manifests, load_documents
from koordweb.manifests.loader import MAX_MANIFEST_BYTES
from koordweb.models import Cluster, Pod, PodPhase, Round
from koordweb.services.scratch import scratch_database
from scheduler.api import (
    Profile,
    RoundResult,
    check_args,
    check_round,
    problem_lines,
    rules_for_plugins,
)
from scheduler.model import ClusterSnapshot


class Command(BaseCommand):
    help = "Run scheduling rounds on the objects of a multi-document YAML file; print JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="multi-document Kubernetes/Koordinator YAML")
        parser.add_argument("--rounds", type=int, default=10, help="at most this many rounds")
        parser.add_argument("--indent", type=int, default=None, help="pretty-print the JSON")
        parser.add_argument(
            "--scheduler-args",
            default="{}",
            help='plugin arguments as JSON, e.g. \'{"NetworkTopology": {"bestFit": true}}\'',
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="check every round with the oracle; print the violations, exit 1 on any",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        rounds = options["rounds"]
        if rounds < 1 or rounds > 1000:
            raise CommandError("--rounds must be between 1 and 1000", returncode=2)
        scheduler_args = _scheduler_args(options["scheduler_args"])
        documents = _read(Path(options["file"]))
        try:
            with scratch_database():
                output = simulate(documents, rounds, scheduler_args, check=options["check"])
        except ManifestError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        except DatabaseError as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CommandError(f"the objects could not be stored: {reason}", returncode=2) from exc
        self.stdout.write(json.dumps(output, indent=options["indent"], sort_keys=True))
        if options["check"]:
            found = [
                f"round {number}: {v['rule']}: {v['message']}"
                for number, rnd in enumerate(output["rounds"], start=1)
                for v in rnd["violations"]
            ]
            for line in found:
                self.stderr.write(line)
            if found:
                raise CommandError(
                    f"the oracle found {len(found)} violation(s) in the simulated rounds",
                    returncode=1,
                )


def _scheduler_args(text: str) -> dict[str, Any]:
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"--scheduler-args: not JSON: {exc.msg}", returncode=2) from exc
    problems = check_args(config, settings.KOORDWEB_SCHEDULER_PLUGINS)
    if problems:
        listed = "; ".join(problem_lines(problems))
        raise CommandError(f"--scheduler-args: {listed}", returncode=2)
    return dict(config)


def _read(path: Path) -> list[Any]:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror}", returncode=2) from exc
    if size > MAX_MANIFEST_BYTES:
        raise CommandError(
            f"{path}: {size} bytes is over the {MAX_MANIFEST_BYTES} byte limit", returncode=2
        )
    try:
        return load_documents(path.read_bytes())
    except ManifestError as exc:
        raise CommandError(f"{path}: {exc}", returncode=2) from exc


def _violations(
    snapshot: ClusterSnapshot, profile: Profile | None, result: RoundResult
) -> list[dict[str, str]]:
    """The oracle's findings on one round, with the rules the profile's plugins keep."""
    plugins = [spec.name for spec in (profile or Profile.default()).plugins]
    return [
        {"rule": v.rule, "job": v.job, "pod": v.pod, "node": v.node, "message": v.message}
        for v in check_round(snapshot, result, rules_for_plugins(plugins))
    ]


def simulate(
    documents: list[Any],
    max_rounds: int,
    scheduler_args: dict[str, Any] | None = None,
    check: bool = False,
) -> dict[str, Any]:
    """Import into a scratch cluster and run rounds until nothing changes; with `check`, each
    round's violations of the oracle's rules under "violations"."""
    cluster = Cluster.objects.create(
        name=f"simulate-{timezone.now().strftime('%H%M%S%f')}",
        scheduler_args=scheduler_args or {},
    )
    import_manifests(cluster, documents)
    backend = SimulatedBackend()
    now = timezone.now()
    rounds: list[dict[str, Any]] = []
    for number in range(max_rounds):
        # The scratch database has no change positions (its tables come from the models): cold.
        outcome = round_execute(
            cluster=cluster, backend=backend, trigger=Round.Trigger.MANUAL, now=now, warm=False
        )
        plain = outcome.result.to_dict()
        rounds.append(
            {
                "placements": plain["placements"],
                "preemptions": [
                    {
                        "preemptor": p["preemptor"],
                        "victims": p["victim_pods"],
                        "victim_jobs": p["victim_jobs"],
                        "nominations": p["nominations"],
                        "reason": p["reason"],
                        "cost": p["cost"],
                    }
                    for p in plain["preemptions"]
                ],
                "unschedulable": {
                    job: {"reason": v["reason"], "details": v["details"]}
                    for job, v in plain["unschedulable"].items()
                },
            }
        )
        if check:
            assert outcome.snapshot is not None
            rounds[-1]["violations"] = _violations(
                outcome.snapshot, outcome.profile, outcome.result
            )
        if not plain["placements"] and not plain["preemptions"]:
            break
        now += timedelta(seconds=1 + number)
    final = {
        f"{ns}/{name}": node
        for ns, name, node in Pod.objects.filter(
            cluster=cluster, node__isnull=False, phase__in=[PodPhase.PENDING, PodPhase.RUNNING]
        )
        .order_by("namespace", "name")
        .values_list("namespace", "name", "node__name")
    }
    return {"rounds": rounds, "final": final}
