"""The demo cluster `make run` shows: H800 SuperPods, an Ascend and a Cambricon block, three teams.

Idempotent: seeding again changes nothing that exists (users keep their passwords).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from koordweb.models import (
    Cluster,
    Device,
    ElasticQuota,
    Job,
    JobState,
    Node,
    Pod,
    PodPhase,
    PriorityClass,
    TopologyLayer,
)
from koordweb.services.demo_gpu import demo_gpu_seed
from scheduler.vocabulary import (
    ANNOTATION_DEVICE_ALLOCATED,
    GANG_MIN_AVAILABLE,
    GANG_NAME,
    GANG_TOPOLOGY_SPEC,
    GANG_TOTAL_NUMBER,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    LABEL_HOSTNAME,
    LABEL_NETWORK_BLOCK,
    LABEL_NETWORK_SPINE,
    NODE_LAYER,
    NPU_CORE,
    NPU_CPU,
    NPU_DVPP,
    NVIDIA_GPU,
    QUOTA_NAME,
    RDMA,
)

GI = 1024**3
PRIORITY_CLASSES = (
    ("koord-prod", 9000, "Production: latency-sensitive training and serving."),
    ("koord-mid", 7000, "Mid priority: important batch training."),
    ("koord-batch", 5000, "Batch: preemptible training and experiments."),
    ("koord-free", 3000, "Free tier: opportunistic work, first to be preempted."),
)
TEAMS = (("team-vision", "alice"), ("team-nlp", "bob"), ("team-speech", "carol"))


@dataclass(frozen=True)
class AcceleratorKind:
    vendor: str
    model: str
    memory_bytes: int
    per_card: tuple[tuple[str, int], ...]  # node-level vendor resources each card adds


H800 = AcceleratorKind("nvidia", "H800", 80 * GI, ((NVIDIA_GPU, 1),))
# 910B3: 20 AI cores, 7 AI CPUs and a whole DVPP per card (Huawei's device plugin resources).
ASCEND = AcceleratorKind(
    "huawei",
    "Ascend-910B3",
    64 * GI,
    ((NPU_CORE, 20), (NPU_CPU, 7), (NPU_DVPP, 100)),
)
# MLU370-X8: dynamic sMLU slices, asked for in Koordinator's gpu-core / gpu-memory (the Device
# CR's cards advertise them).
MLU = AcceleratorKind("cambricon", "MLU370", 48 * GI, ())


def credentials_path() -> Path:
    return Path(settings.VAR_DIR) / "demo-credentials.json"


def demo_seed() -> dict[str, int]:
    """Create the demo cluster if absent, on the KOORDWEB_BACKEND backend; return how many rows
    of each kind exist. A cluster that exists keeps its backend (the admin changes it)."""
    with transaction.atomic():
        cluster, created = Cluster.objects.get_or_create(
            name=settings.KOORDWEB_CLUSTER,
            defaults={
                "description": "Demo: 2 H800 spines, an Ascend and a Cambricon block",
                "backend": settings.KOORDWEB_BACKEND,
            },
        )
        if created or not cluster.nodes.exists():
            _seed_topology(cluster)
            _seed_nodes(cluster)
            _seed_priorities(cluster)
            _seed_quotas(cluster)
            _seed_jobs(cluster)
            demo_gpu_seed(cluster, now=timezone.now())
        _seed_users(cluster)
    return {
        "nodes": cluster.nodes.count(),
        "devices": Device.objects.filter(node__cluster=cluster).count(),
        "jobs": cluster.jobs.count(),
        "pods": cluster.pods.count(),
        "quotas": cluster.quotas.count(),
    }


def _seed_topology(cluster: Cluster) -> None:
    layers: tuple[tuple[str, str, list[str]], ...] = (
        ("SpineLayer", "", [LABEL_NETWORK_SPINE]),
        ("BlockLayer", "SpineLayer", [LABEL_NETWORK_BLOCK]),
        (NODE_LAYER, "BlockLayer", []),
    )
    for position, (name, parent, keys) in enumerate(layers):
        TopologyLayer.objects.create(
            cluster=cluster, name=name, parent_name=parent, label_keys=keys, position=position
        )


def _node_blocks() -> list[tuple[str, str, AcceleratorKind, int]]:
    """(spine, block, accelerator, node count) for every block of the demo."""
    blocks = []
    for s in (1, 2):
        for b in range(1, 5):
            blocks.append((f"s{s}", f"b{(s - 1) * 4 + b}", H800, 8))
    blocks.append(("s3", "b9", ASCEND, 4))
    blocks.append(("s3", "b10", MLU, 4))
    return blocks


def _seed_nodes(cluster: Cluster) -> None:
    serial = 0
    for spine, block, kind, count in _node_blocks():
        for _ in range(count):
            serial += 1
            _create_node(cluster, f"node-{serial:03d}", spine, block, kind)


def _create_node(
    cluster: Cluster, name: str, spine: str, block: str, kind: AcceleratorKind
) -> Node:
    cards = 8
    allocatable = {
        "cpu": 192_000,
        "memory": 2048 * GI,
        "pods": 110,
        **{name: amount * cards for name, amount in kind.per_card},
        GPU_CORE: 100 * cards,
        GPU_MEMORY_RATIO: 100 * cards,
        GPU_MEMORY: kind.memory_bytes * cards,
    }
    if kind is H800:
        allocatable[RDMA] = 100 * 4
    labels = {
        LABEL_NETWORK_SPINE: spine,
        LABEL_NETWORK_BLOCK: block,
        LABEL_HOSTNAME: name,
        LABEL_GPU_VENDOR: kind.vendor,
        LABEL_GPU_MODEL: kind.model,
    }
    node = Node.objects.create(
        cluster=cluster,
        name=name,
        labels=labels,
        allocatable=allocatable,
        capacity=dict(allocatable),
        conditions=[{"type": "Ready", "status": "True"}],
    )
    devices = []
    for minor in range(cards):
        numa, pcie = minor // 4, minor // 2
        devices.append(
            Device(
                node=node,
                device_type=Device.Type.GPU,
                vendor=kind.vendor,
                model=kind.model,
                minor=minor,
                uuid=f"{kind.vendor}-{name}-{minor}",
                resources={
                    GPU_CORE: 100,
                    GPU_MEMORY_RATIO: 100,
                    GPU_MEMORY: kind.memory_bytes,
                },
                socket_id=numa,
                numa_node=numa,
                pcie_id=f"pci{pcie}",
                bus_id=f"0000:{0x18 + minor * 0x10:02x}:00.0",
            )
        )
    if kind is H800:
        for nic in range(4):
            devices.append(
                Device(
                    node=node,
                    device_type=Device.Type.RDMA,
                    vendor="mellanox",
                    model="ConnectX-7",
                    minor=nic + 1,
                    uuid=f"mlx5_{nic}",
                    resources={RDMA: 100},
                    socket_id=nic // 2,
                    numa_node=nic // 2,
                    pcie_id=f"pci{nic}",
                    bus_id=f"0000:{0x1F + nic * 0x20:02x}:00.0",
                    vfs=[
                        {"minor": vf, "busID": f"0000:{0x1F + nic * 0x20:02x}:00.{vf + 1}"}
                        for vf in range(4)
                    ],
                )
            )
    Device.objects.bulk_create(devices)
    return node


def _seed_priorities(cluster: Cluster) -> None:
    for name, value, description in PRIORITY_CLASSES:
        PriorityClass.objects.create(
            cluster=cluster, name=name, value=value, description=description
        )


def _seed_quotas(cluster: Cluster) -> None:
    root = ElasticQuota.objects.create(
        cluster=cluster,
        name="root",
        is_parent=True,
        min={NVIDIA_GPU: 512, "cpu": 15_000_000},
        max={NVIDIA_GPU: 512, "cpu": 15_000_000},
    )
    shares = {"team-vision": 192, "team-nlp": 192, "team-speech": 128}
    for team, _ in TEAMS:
        ElasticQuota.objects.create(
            cluster=cluster,
            name=team,
            namespace=team,
            parent=root,
            min={NVIDIA_GPU: shares[team], "cpu": 4_000_000},
            max={NVIDIA_GPU: 384, "cpu": 10_000_000},
        )


def _seed_users(cluster: Cluster) -> None:
    path = credentials_path()
    known: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}
    user_model = get_user_model()
    changed = False
    for username, is_admin, team in [("admin", True, None)] + [
        (user, False, team) for team, user in TEAMS
    ]:
        user = user_model.objects.filter(username=username).first()
        if user is None:
            password = known.get(username) or secrets.token_urlsafe(9)
            user = user_model.objects.create_user(
                username=username, password=password, is_staff=is_admin, is_superuser=is_admin
            )
            known[username] = password
            changed = True
        if team:
            quota = cluster.quotas.filter(name=team).first()
            if quota:
                quota.members.add(user)
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known, indent=2))
        path.chmod(0o600)


def _seed_jobs(cluster: Cluster) -> None:
    """Running jobs fill part of spine s1; pending ones of mixed shapes wait for the first round."""
    now = timezone.now()
    prio = {pc.name: pc for pc in cluster.priority_classes.all()}
    quotas = {q.name: q for q in cluster.quotas.all()}
    h800 = [n for n in cluster.nodes.order_by("name") if n.labels.get(LABEL_GPU_MODEL) == "H800"]
    running = [
        ("team-vision", "vit-pretrain", "koord-batch", 8, h800[0:8], 1800),
        ("team-nlp", "llm-sft", "koord-mid", 4, h800[8:12], 900),
        ("team-speech", "asr-finetune", "koord-free", 2, h800[16:18], 600),
    ]
    for team, name, pc, replicas, nodes, duration in running:
        job = _job(cluster, team, name, prio[pc], quotas[team], replicas, now, duration, "")
        job.state = JobState.RUNNING
        job.scheduled_at = job.started_at = now
        job.save(update_fields=["state", "scheduled_at", "started_at"])
        for index, node in enumerate(nodes):
            allocation = {
                "gpu": [
                    {
                        "minor": m,
                        "resources": {
                            GPU_CORE: 100,
                            GPU_MEMORY_RATIO: 100,
                            GPU_MEMORY: 80 * GI,
                        },
                    }
                    for m in range(8)
                ]
            }
            _pod(
                job,
                index,
                gpus=8,
                node=node,
                phase=PodPhase.RUNNING,
                now=now,
                annotations={
                    ANNOTATION_DEVICE_ALLOCATED: json.dumps(allocation, separators=(",", ":"))
                },
            )
    pending = [
        ("team-vision", "detector-sweep", "koord-batch", 4, 8, "BlockLayer", "MustGather", 300),
        ("team-nlp", "llm-pretrain-70b", "koord-mid", 16, 8, "SpineLayer", "MustGather", 1200),
        ("team-speech", "tts-eval", "koord-free", 2, 1, "", "", 240),
        ("team-nlp", "embedding-index", "koord-batch", 8, 8, "BlockLayer", "PreferGather", 600),
    ]
    for team, name, pc, replicas, gpus, layer, strategy, duration in pending:
        job = _job(
            cluster,
            team,
            name,
            prio[pc],
            quotas[team],
            replicas,
            now,
            duration,
            json.dumps({"gatherStrategy": [{"layer": layer, "strategy": strategy}]})
            if layer
            else "",
        )
        for index in range(replicas):
            _pod(job, index, gpus=gpus, node=None, phase=PodPhase.PENDING, now=now, annotations={})


def _job(
    cluster: Cluster,
    team: str,
    name: str,
    pc: PriorityClass,
    quota: ElasticQuota,
    replicas: int,
    now: datetime,
    duration: int,
    topology: str,
) -> Job:
    return Job.objects.create(
        cluster=cluster,
        namespace=team,
        name=name,
        kind=Job.Kind.GANG,
        quota=quota,
        priority_class=pc,
        priority=pc.value,
        min_available=replicas,
        total_number=replicas,
        topology_spec=json.loads(topology) if topology else {},
        submitted_at=now - timedelta(minutes=5),
        duration_seconds=duration,
    )


def _pod(
    job: Job,
    index: int,
    *,
    gpus: int,
    node: Node | None,
    phase: str,
    now: datetime,
    annotations: dict[str, str],
) -> Pod:
    gang = {
        GANG_NAME: job.name,
        GANG_MIN_AVAILABLE: str(job.min_available),
        GANG_TOTAL_NUMBER: str(job.total_number),
    }
    if job.topology_spec:
        gang[GANG_TOPOLOGY_SPEC] = json.dumps(job.topology_spec, separators=(",", ":"))
    return Pod.objects.create(
        cluster=job.cluster,
        job=job,
        namespace=job.namespace,
        name=f"{job.name}-{index}",
        requests={"cpu": 8000 * gpus, "memory": 64 * GI * gpus, NVIDIA_GPU: gpus},
        labels={QUOTA_NAME: job.quota.name if job.quota else ""},
        annotations={**gang, **annotations},
        priority=job.priority,
        priority_class_name=job.priority_class.name if job.priority_class else "",
        node=node,
        phase=phase,
        created_at=now,
        bound_at=now if node else None,
        started_at=now if phase == PodPhase.RUNNING else None,
    )
