"""A busy superpod: spines of blocks of 8-GPU nodes, three teams with running and pending gangs,
and the submissions the preemption tests add to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordweb import models
from tests.builders.accounts import UserFactory
from tests.builders.cluster import GIB, ClusterFactory, PriorityClassFactory, QuotaFactory
from tests.builders.devices import gpu_node, whole_cards
from tests.builders.jobs import gang
from tests.builders.topology import topology


def superpod(
    cluster: models.Cluster, *, spines: int, blocks: int, nodes: int, cpu: int = 128000
) -> list[models.Node]:
    """The topology and `spines` x `blocks` (a spine) x `nodes` (a block) nodes of 8 H100s,
    named node-001, ... and placed in blocks b1, b2, ... across the spines in order."""
    topology(cluster)
    made = []
    for index in range(spines * blocks * nodes):
        block = index // nodes
        made.append(
            gpu_node(
                cluster,
                f"node-{index + 1:03d}",
                spine=f"s{block // blocks + 1}",
                block=f"b{block + 1}",
                cpu=cpu,
            )
        )
    return made


@dataclass
class Busy:
    """Three teams on two spines of two 4-node blocks (16 nodes of 8 GPUs): running gangs hold
    half of it, pending gangs of every topology rule wait for the first round, which places them
    all and fills the cluster."""

    cluster: models.Cluster
    nodes: list[models.Node]
    running: list[models.Job]  # vit-pretrain (b1), llm-sft (b2), asr-finetune (b3)
    pending: list[models.Job]  # detector-sweep (MustGather block), tts-eval, embedding-index


def busy_cluster(name: str = "default") -> Busy:
    """GPU quotas: root 128 (the cluster); team-vision (alice) min 32, team-nlp (bob) min 64,
    team-speech (carol) min 32; each at most 96. Priority classes koord-prod 9000, koord-mid
    7000, koord-batch 5000, koord-free 3000."""
    cluster = ClusterFactory(name=name)
    nodes = superpod(cluster, spines=2, blocks=2, nodes=4)
    classes = {
        pc: PriorityClassFactory(cluster=cluster, name=pc, value=value)
        for pc, value in (
            ("koord-prod", 9000),
            ("koord-mid", 7000),
            ("koord-batch", 5000),
            ("koord-free", 3000),
        )
    }
    root = QuotaFactory(
        cluster=cluster,
        name="root",
        is_parent=True,
        min={"nvidia.com/gpu": 128},
        max={"nvidia.com/gpu": 128},
    )
    quotas = {
        team: QuotaFactory(
            cluster=cluster,
            name=team,
            namespace=team,
            parent=root,
            min={"nvidia.com/gpu": low},
            max={"nvidia.com/gpu": 96},
            members=[UserFactory(username=user)],
        )
        for team, user, low in (
            ("team-vision", "alice", 32),
            ("team-nlp", "bob", 64),
            ("team-speech", "carol", 32),
        )
    }
    whole = whole_cards(8)
    eight = {"cpu": 64000, "memory": 512 * GIB, "nvidia.com/gpu": 8}
    running = [
        gang(
            cluster,
            name,
            quota=quotas[team],
            priority_class=classes[pc],
            replicas=len(on),
            requests=eight,
            nodes=on,
            annotations=whole,
            duration_seconds=duration,
        )
        for team, name, pc, on, duration in (
            ("team-vision", "vit-pretrain", "koord-batch", nodes[0:4], 1800),
            ("team-nlp", "llm-sft", "koord-mid", nodes[4:6], 900),
            ("team-speech", "asr-finetune", "koord-free", nodes[8:10], 600),
        )
    ]
    pending = [
        gang(
            cluster,
            name,
            quota=quotas[team],
            priority_class=classes[pc],
            replicas=replicas,
            requests=eight,
            gather=gather,
            duration_seconds=duration,
        )
        for team, name, pc, replicas, gather, duration in (
            ("team-vision", "detector-sweep", "koord-batch", 4, ("BlockLayer", "MustGather"), 300),
            ("team-speech", "tts-eval", "koord-free", 2, None, 240),
            ("team-nlp", "embedding-index", "koord-batch", 2, ("BlockLayer", "PreferGather"), 600),
        )
    ]
    return Busy(cluster, nodes, running, pending)


def nlp_submits(
    cluster: models.Cluster,
    name: str,
    *,
    priority_class: str,
    replicas: int,
    cpu: int = 8000,
    gather: str | None = None,
) -> models.Job:
    """bob submits, through the submission service, a job of 8-GPU pods to team-nlp of
    `busy_cluster()`; `gather` names the layer its pods must share (MustGather)."""
    from koordweb.services.jobs import GatherRule, JobSpec, PodShape, job_submit

    bob = cluster.quotas.get(name="team-nlp").members.get()
    job, _ = job_submit(
        user=bob,
        spec=JobSpec(
            name=name,
            namespace="team-nlp",
            quota="team-nlp",
            priority_class=priority_class,
            replicas=replicas,
            pod=PodShape(requests={"cpu": cpu, "nvidia.com/gpu": 8}),
            gather=(GatherRule(gather, "MustGather"),) if gather else (),
        ),
    )
    return job


def urgent_spine_gang(cluster: models.Cluster, replicas: int = 4) -> models.Job:
    """prod-refresh: koord-prod pods of 8 GPUs that must share a spine of `busy_cluster()`.
    After the first round fills the cluster, only evictions make room for it."""
    return nlp_submits(
        cluster, "prod-refresh", priority_class="koord-prod", replicas=replicas, gather="SpineLayer"
    )
