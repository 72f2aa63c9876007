"""The engine's scenario files (tests/scenarios/{topology,preemption,gang,quota}_*.yaml) hold.

`manage.py simulate` (elsewhere) parses these files through koordweb's importer; here a minimal
reader of just the fields these scenarios use turns them into a snapshot, so the engine and the
expected JSON are checked without a database.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler import (
    ClusterSnapshot,
    GangInfo,
    JobInfo,
    LayerGather,
    NodeInfo,
    PodInfo,
    QuotaInfo,
    TopologyLayerSpec,
    TopologyRule,
    TopologySpec,
    run_rounds,
)

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
MINE = sorted(
    p
    for prefix in ("topology_", "preemption_", "gang_", "quota_")
    for p in SCENARIOS.glob(f"{prefix}*.yaml")
)
GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
TOPOLOGY_SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(resource: str, text: str | int) -> int:
    """Just enough of Kubernetes quantities for these files: plain, m, Ki..Ti."""
    value = str(text)
    match = re.fullmatch(r"(\d+)(m|Ki|Mi|Gi|Ti)?", value)
    assert match, value
    number, suffix = int(match.group(1)), match.group(2)
    if suffix == "m":
        return number
    if suffix:
        return number * BINARY[suffix]
    return number * 1000 if resource == "cpu" else number


def resources(block: dict[str, Any]) -> dict[str, int]:
    return {k: quantity(k, v) for k, v in block.items()}


def load(path: Path) -> ClusterSnapshot:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    nodes, pods, quotas, groups = [], [], [], {}
    topology = None
    for doc in docs:
        kind, meta = doc["kind"], doc["metadata"]
        if kind == "Node":
            alloc = resources(doc["status"]["allocatable"])
            nodes.append(NodeInfo(meta["name"], alloc, meta.get("labels", {})))
        elif kind == "ClusterNetworkTopology":
            layers = tuple(
                TopologyLayerSpec(
                    item["topologyLayer"],
                    item.get("parentTopologyLayer"),
                    tuple(item.get("labelKey", [])),
                )
                for item in doc["spec"]["networkTopologySpec"]
            )
            topology = TopologySpec(layers)
        elif kind == "PodGroup":
            groups[f"{meta['namespace']}/{meta['name']}"] = doc
        elif kind == "ElasticQuota":
            spec = doc["spec"]
            quotas.append(QuotaInfo(meta["name"], resources(spec["min"]), resources(spec["max"])))
        elif kind == "Pod":
            pods.append(doc)
    pod_infos, members = [], {}
    for doc in pods:
        meta, spec = doc["metadata"], doc["spec"]
        ns, labels = meta["namespace"], meta.get("labels", {})
        group = labels.get(GROUP_LABEL)
        job_id = f"{ns}/{group}" if group else f"{ns}/{meta['name']}"
        requests: dict[str, int] = {}
        for container in spec["containers"]:
            for k, v in resources(container["resources"]["requests"]).items():
                requests[k] = requests.get(k, 0) + v
        info = PodInfo(
            ns,
            meta["name"],
            job_id,
            requests,
            labels=labels,
            priority=spec.get("priority", 0),
            preemption_policy=spec.get("preemptionPolicy", "PreemptLowerPriority"),
            node=spec.get("nodeName"),
            phase=doc.get("status", {}).get("phase", "Pending"),
            quota=labels.get("quota.scheduling.koordinator.sh/name"),
            gang_id=job_id if group else None,
        )
        pod_infos.append(info)
        members.setdefault(job_id, []).append(info)
    jobs = []
    for order, (job_id, infos) in enumerate(sorted(members.items())):
        group_doc = groups.get(job_id)
        gangs, rule = (), None
        if group_doc:
            gangs = (GangInfo(job_id, group_doc["spec"]["minMember"], len(infos)),)
            raw = group_doc["metadata"].get("annotations", {}).get(TOPOLOGY_SPEC)
            if raw:
                gather = json.loads(raw)["gatherStrategy"]
                rule = TopologyRule(tuple(LayerGather(g["layer"], g["strategy"]) for g in gather))
        jobs.append(
            JobInfo(
                job_id,
                tuple(p.key for p in infos),
                gangs,
                priority=max(p.priority for p in infos),
                quota=infos[0].quota,
                topology=rule,
                submission_order=float(order),
                preemption_policy=infos[0].preemption_policy,
            )
        )
    return ClusterSnapshot(tuple(nodes), tuple(pod_infos), tuple(jobs), tuple(quotas), (), topology)


def test_every_engine_example_has_a_scenario() -> None:
    assert len(MINE) >= 9


@pytest.mark.parametrize("path", MINE, ids=[p.stem for p in MINE])
def test_scenario_matches_expected(path: Path) -> None:
    expected = json.loads(path.with_suffix("").with_suffix(".expected.json").read_text())
    final, results = run_rounds(load(path))
    bound = {p.key: p.node for p in final.pods if p.node}
    assert {k: bound.get(k) for k in expected["final"]} == expected["final"]
    victims = sorted(k for r in results for record in r.preemptions for k in record.victim_pods)
    assert victims == sorted(expected["preemptions"])
    still = sorted(results[-1].unschedulable)
    assert still == sorted(expected["unschedulable"])
