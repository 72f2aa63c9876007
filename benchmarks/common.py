"""Shared pieces of the quality benchmarks: the two GPU topologies, gang jobs, metrics, output.

Topologies (every node: 8 GPUs, 128 cores, 1 TiB; one pod of a gang takes a whole node):
- `lingjun`: the 847 hosts of the Alibaba Lingjun 2023 dataset (shared/data/alibaba-lingjun-2023,
  Apache-2.0). Its single core switch (DSW) is the cluster root; `SpineLayer` is the aggregation
  switch (PSW, 3 of them) and `BlockLayer` the ToR switch (ASW, 119 racks of 2-8 hosts). ASW names
  repeat across PSWs, so a block is named "PSW/ASW".
- `synthetic`: a 4 x 8 x 8 x 2 tree: 4 spines x 8 blocks a spine x 8 racks a block x 2 nodes a
  rack (512 nodes, 4,096 GPUs). `SpineLayer` > `BlockLayer` (16 nodes) > `RackLayer` (2 nodes).

Node names carry no topology order (lingjun: the hashed IP; synthetic: a seeded shuffle), because
the engine breaks ties by node name: a name order that follows the racks would hand a
topology-blind baseline locality it did not earn.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.round_scale import whole_gang
from scheduler import (
    JobInfo,
    LayerGather,
    NodeInfo,
    PodInfo,
    Profile,
    TopologyLayerSpec,
    TopologyRule,
    TopologySpec,
)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
LINGJUN_CSV = ROOT.parent / "shared" / "data" / "alibaba-lingjun-2023" / "topo.csv"
SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"
RACK = "network.topology.nvidia.com/rack"
GI = 1024**3
GPUS_PER_NODE = 8
GPU = "nvidia.com/gpu"

SPINE_BLOCK = TopologySpec(
    (
        TopologyLayerSpec("SpineLayer", None, (SPINE,)),
        TopologyLayerSpec("BlockLayer", "SpineLayer", (BLOCK,)),
        TopologyLayerSpec("NodeTopologyLayer", "BlockLayer"),
    )
)
SPINE_BLOCK_RACK = TopologySpec(
    (
        TopologyLayerSpec("SpineLayer", None, (SPINE,)),
        TopologyLayerSpec("BlockLayer", "SpineLayer", (BLOCK,)),
        TopologyLayerSpec("RackLayer", "BlockLayer", (RACK,)),
        TopologyLayerSpec("NodeTopologyLayer", "RackLayer"),
    )
)


@dataclass(frozen=True)
class Topology:
    """A cluster layout: nodes with their labels, the spec, and the label of each layer."""

    name: str
    nodes: tuple[NodeInfo, ...]
    spec: TopologySpec
    layer_labels: tuple[str, ...]  # root-most first, e.g. (SPINE, BLOCK)

    def block_of(self) -> dict[str, str]:
        return {n.name: n.labels[BLOCK] for n in self.nodes}

    def spine_of(self) -> dict[str, str]:
        return {n.name: n.labels[SPINE] for n in self.nodes}

    def block_sizes(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for n in self.nodes:
            sizes[n.labels[BLOCK]] = sizes.get(n.labels[BLOCK], 0) + 1
        return sizes

    def cut(self, blocks: Iterable[str]) -> Topology:
        """Only the nodes of these blocks (for the exact model's cuts)."""
        keep = set(blocks)
        nodes = tuple(n for n in self.nodes if n.labels[BLOCK] in keep)
        return Topology(f"{self.name}-cut", nodes, self.spec, self.layer_labels)


def gpu_node(name: str, labels: Mapping[str, str], gpus: int = GPUS_PER_NODE) -> NodeInfo:
    alloc = {"cpu": 128_000, "memory": 1024 * GI, GPU: gpus, "pods": 110}
    return NodeInfo(name, alloc, dict(labels))


def lingjun(path: Path = LINGJUN_CSV) -> Topology:
    nodes = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            labels = {SPINE: row["PSW"], BLOCK: f"{row['PSW']}-{row['ASW']}"}
            nodes.append(gpu_node(f"h-{row['ip'][:12]}", labels))
    return Topology("lingjun", tuple(nodes), SPINE_BLOCK, (SPINE, BLOCK))


def synthetic(
    spines: int = 4, blocks: int = 8, racks: int = 8, per_rack: int = 2, seed: int = 11
) -> Topology:
    total = spines * blocks * racks * per_rack
    names = [f"n-{i:05d}" for i in range(total)]
    random.Random(seed).shuffle(names)
    nodes = []
    for i, name in enumerate(names):
        rack = i // per_rack
        block = rack // racks
        spine = block // blocks
        labels = {SPINE: f"s{spine}", BLOCK: f"s{spine}-b{block}", RACK: f"s{spine}-r{rack}"}
        nodes.append(gpu_node(name, labels))
    return Topology("synthetic", tuple(nodes), SPINE_BLOCK_RACK, (SPINE, BLOCK, RACK))


def topology_by_name(name: str) -> Topology:
    if name == "lingjun":
        return lingjun()
    if name == "synthetic":
        return synthetic()
    raise ValueError(f"unknown topology {name!r} (lingjun, synthetic)")


RuleKind = str  # "must-block" | "prefer-spine" | "none"
RULES: dict[RuleKind, TopologyRule | None] = {
    "must-block": TopologyRule((LayerGather("BlockLayer", "MustGather"),)),
    "prefer-spine": TopologyRule((LayerGather("SpineLayer", "PreferGather"),)),
    "none": None,
}


def gang_job(
    gang_id: str,
    size: int,
    kind: RuleKind,
    gpus: int = GPUS_PER_NODE,
    priority: int = 0,
    order: float = 0.0,
    node: Sequence[str] | None = None,
    strip_rules: bool = False,
) -> tuple[JobInfo, list[PodInfo]]:
    """A gang of `size` identical pods of `gpus` GPUs; bound when `node` names their nodes."""
    namespace, name = gang_id.split("/")
    requests = {"cpu": gpus * 12_000, "memory": gpus * 96 * GI, GPU: gpus}
    pods = [
        PodInfo(
            namespace,
            f"{name}-{k}",
            gang_id,
            requests,
            priority=priority,
            gang_id=gang_id,
            node=node[k] if node else None,
            phase="Running" if node else "Pending",
        )
        for k in range(size)
    ]
    job = whole_gang(
        gang_id,
        pods,
        priority=priority,
        topology=None if strip_rules else RULES[kind],
        submission_order=order,
    )
    return job, pods


def core_profile() -> Profile:
    """The default profile on whole-GPU pods (device objects are not modelled here)."""
    return Profile.default().without("DeviceShare", "LoadAware")


PROFILES: dict[str, tuple[Profile, bool]] = {
    # name -> (profile, strip the jobs' topology rules)
    "default": (core_profile(), False),
    "reference": (Profile.reference().without("DeviceShare", "LoadAware"), False),
    "parent-fragmentation": (
        core_profile().with_args("NetworkTopology", parentFragmentation=True),
        False,
    ),
    "extensions": (
        core_profile().with_args(
            "NetworkTopology", parentFragmentation=True, preferGatherScore=True
        ),
        False,
    ),
    "best-fit": (core_profile().with_args("NetworkTopology", bestFit=True), False),
    "best-fit+largest-first": (
        core_profile()
        .with_args("NetworkTopology", bestFit=True)
        .with_args("PrioritySort", largestFirst=True),
        False,
    ),
    "topology-blind": (core_profile(), True),
}


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return float(ordered[rank])


def write_json(path: str | None, report: Mapping[str, Any]) -> str:
    text = json.dumps(report, indent=2, sort_keys=False)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + "\n")
    return text


def rewrite_section(text: str, heading: str, body: str) -> str:
    """Replace what lies between `heading` and the next `## ` heading (keeps the rest)."""
    start = text.index(heading) + len(heading)
    following = text.find("\n## ", start)
    end = following + 1 if following >= 0 else len(text)
    return text[:start] + "\n" + body.rstrip("\n") + "\n\n" + text[end:]


def rewrite_between(text: str, section: str, heading: str = "") -> str:
    """`section` in place of the one between the same markers (its first and last lines) in
    `text`, or appended, under `heading` when one is given."""
    begin, end = section.splitlines()[0], section.splitlines()[-1]
    if begin in text and end in text:
        start = text.index(begin)
        stop = text.index(end) + len(end)
        return text[:start] + section + text[stop:]
    above = f"{heading}\n\n" if heading else ""
    return text.rstrip("\n") + "\n\n" + above + section + "\n"
