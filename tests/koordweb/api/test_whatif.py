"""whatif/: the plan on the live state, nothing written."""

from __future__ import annotations

from koordweb.models import Job, JobState, Pod
from tests import builders as f
from tests.builders import simulated_round, submission

WHATIF = "/api/v1/whatif/"


def fill_with_low_priority_jobs(world, *, quotas) -> None:
    """One running priority-1 job taking all 8 GPUs of every node, quotas taken in turn."""
    low = f.PriorityClassFactory(cluster=world.cluster, name="low", value=1)
    for i, node in enumerate(world.nodes):
        job = f.JobFactory(
            cluster=world.cluster,
            quota=quotas[i % len(quotas)],
            name=f"low-{i}",
            priority=1,
            priority_class=low,
            state=JobState.RUNNING,
            total_number=1,
            min_available=1,
        )
        f.PodFactory(
            job=job,
            name=f"low-{i}-0",
            node=node,
            phase="Running",
            priority=1,
            requests={"cpu": 8000, "nvidia.com/gpu": 8},
        )


def test_fits_on_an_idle_block(alice_api, world):
    response = alice_api.post(WHATIF, submission(), format="json")
    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["outcome"] == "placed" and plan["feasible"] is True, plan
    nodes = set(plan["placement"].values())
    assert len(plan["placement"]) == 2 and len(nodes) == 1  # MustGather Block: one node per block
    assert Job.objects.count() == 0 and Pod.objects.count() == 0


def test_a_job_that_can_never_fit_is_refused_with_the_field(alice_api, world):
    # Two 8-GPU nodes per spine, four in all: 3 pods fit the cluster but never one spine.
    body = submission(
        replicas=3, topology={"gather": [{"layer": "SpineLayer", "strategy": "MustGather"}]}
    )
    body["pod"] = {"requests": {"cpu": "8", "nvidia.com/gpu": "8"}}
    response = alice_api.post(WHATIF, body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["topology"] == [
        "can never run: with every node empty, the roomiest spine, s1, has room for 2 pods of "
        "8 GPUs, 8 cores, and the job needs 3 pods together in one spine"
    ]
    body["replicas"] = 5  # no rule would help: the field is the pod count
    response = alice_api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400, response.content
    assert "the whole cluster" not in response.json()["replicas"][0]
    assert Job.objects.count() == 0


def test_does_not_fit_now_says_why(alice_api, world):
    fill_with_low_priority_jobs(world, quotas=(world.team_a,))
    body = submission(replicas=1, topology=None)
    body["pod"] = {"requests": {"cpu": "8", "nvidia.com/gpu": "8"}}
    plan = alice_api.post(WHATIF, body, format="json").json()
    assert plan["feasible"] is False and plan["placement"] == {}
    assert plan["verdict"]["reason"]
    assert Job.objects.filter(state=JobState.PENDING).count() == 0


def test_preemption_names_only_visible_victims(alice_api, world):
    fill_with_low_priority_jobs(world, quotas=(world.team_a, world.team_b))
    body = submission(replicas=1, topology=None)
    body["pod"] = {"requests": {"cpu": "8", "nvidia.com/gpu": "8"}}
    plan = alice_api.post(WHATIF, body, format="json").json()
    assert plan["outcome"] == "preempting", plan
    preemption = plan["preemption"]
    assert preemption["other_tenants_victim_jobs"] + len(preemption["victim_jobs"]) >= 1
    assert all("low-1" not in v and "low-3" not in v for v in preemption["victim_jobs"])
    assert Job.objects.filter(state=JobState.RUNNING).count() == 4


def test_whatif_validates_like_a_submission(alice_api, world):
    response = alice_api.post(WHATIF, submission(quota="team-b"), format="json")
    assert response.status_code == 400 and "quota" in response.json()


def _next_round(world) -> None:
    from django.db import transaction

    with transaction.atomic():
        simulated_round(world.cluster)


def test_whatif_agrees_with_what_the_next_round_does(alice_api, world):
    body = submission(replicas=3, topology=None)
    body["pod"] = {"requests": {"cpu": "4", "nvidia.com/gpu": "2"}}
    plan = alice_api.post(WHATIF, body, format="json").json()
    assert plan["outcome"] == "placed", plan
    created = alice_api.post("/api/v1/jobs/", body, format="json")
    assert created.status_code == 201, created.content
    _next_round(world)
    job = Job.objects.get(name=body["name"])
    actual = {f"{p.namespace}/{p.name}": p.node.name for p in job.pods.select_related("node")}
    assert actual == plan["placement"]


def test_whatif_agrees_with_the_next_round_on_a_preemption(alice_api, world):
    fill_with_low_priority_jobs(world, quotas=(world.team_a,))
    body = submission(replicas=1, topology=None)
    body["pod"] = {"requests": {"cpu": "8", "nvidia.com/gpu": "8"}}
    plan = alice_api.post(WHATIF, body, format="json").json()
    assert plan["outcome"] == "preempting", plan
    assert alice_api.post("/api/v1/jobs/", body, format="json").status_code == 201
    _next_round(world)
    from koordweb.models import Preemption

    record = Preemption.objects.get(preemptor__name=body["name"])
    evicted = sorted(v.job.name for v in record.victims.select_related("job"))
    assert evicted == sorted(v.rsplit("/", 1)[-1] for v in plan["preemption"]["victim_jobs"])
    assert record.nominations == plan["preemption"].get("nominations", record.nominations)
