"""Gangs and network topology, by Koordinator's Coscheduling and NetworkTopology rules.

- Gang: a job (gang group) that gets new pods this round must, for every member gang, have at
  least its min-available members running afterwards: placed this round, or bound, not
  finished, not terminating and not evicted this round; as Koordinator's match policy says
  (`core/gang.go` isGangValidForPermit): `only-waiting` counts only the pods placed this round,
  `waiting-and-running` both, and the default `once-satisfied` lets a gang with a member running
  (satisfied once) place the rest one by one. This holds for Strict and NonStrict gangs
  alike (NonStrict only lets a failed member leave the group's other members waiting; the group
  still waits for min-available in Permit); a Strict gang that has nothing running therefore
  gets at least min-available of its pods in one round, never fewer. A pod names its gang by
  `gang_id`; a pod without one belongs to its job's only gang.
- MustGather: every MustGather layer of a job's topology rule holds all the pods placed this
  round in one domain of that layer, read from the nodes' labels (koordinator.md, "Network
  topology": the first of the layer's label keys the node has; a node missing the label of the
  layer just above the nodes is a domain of its own; a node missing a higher label is outside
  the tree and can hold no MustGather pod).
"""

from __future__ import annotations

from scheduler.model import ClusterSnapshot, JobInfo, NodeInfo, TopologyLayerSpec
from scheduler.oracle.view import RoundView, holds_node
from scheduler.oracle.violation import GANG, MUST_GATHER, Violation


def _running(view: RoundView, key: str) -> bool:
    pod = view.pods.get(key)
    return pod is not None and holds_node(pod) and not pod.terminating and key not in view.victims


def _members(view: RoundView, job: JobInfo, gang_id: str) -> list[str]:
    only = len(job.gangs) == 1
    return [
        key
        for key in job.pod_keys
        if (pod := view.pods.get(key)) is not None
        and (pod.gang_id == gang_id or (pod.gang_id is None and only))
    ]


def check_gangs(view: RoundView) -> list[Violation]:
    found = []
    placements = view.result.placements
    for job in view.snapshot.jobs:
        if not job.gangs or not any(k in placements for k in job.pod_keys):
            continue
        for gang in job.gangs:
            members = _members(view, job, gang.id)
            placed = sum(1 for k in members if k in placements)
            running = sum(1 for k in members if _running(view, k))
            policy = gang.match_policy
            if policy == "once-satisfied" and running:
                continue  # satisfied once: the rest bind one by one (Koordinator's default)
            counted = placed if policy == "only-waiting" else placed + running
            if counted < gang.min_available:
                found.append(
                    Violation(
                        GANG,
                        job.id,
                        "",
                        "",
                        f"{job.id} placed with gang {gang.id} ({gang.mode}) at {placed} placed "
                        f"+ {running} running, below its min-available {gang.min_available}",
                    )
                )
    return found


def domain(snap: ClusterSnapshot, node: NodeInfo, layer: str) -> tuple[str, ...] | None:
    """The node's domain at `layer`: the path of its label values from the top layer down;
    None when it misses a higher label (outside the tree) or the layer is unknown."""
    assert snap.topology is not None
    specs = {spec.name: spec for spec in snap.topology.layers}
    if layer not in specs:
        return None
    parents = {spec.parent for spec in snap.topology.layers if spec.label_keys}
    lowest = next(
        (s.name for s in snap.topology.layers if s.label_keys and s.name not in parents), None
    )
    chain: list[TopologyLayerSpec] = []
    current: str | None = layer
    while current is not None and current in specs:
        chain.append(specs[current])
        current = specs[current].parent
    path: list[str] = []
    for spec in reversed(chain):
        labelled = [node.labels[key] for key in spec.label_keys if key in node.labels]
        if labelled:
            path.append(labelled[0])
        elif not spec.label_keys or spec.name == lowest:
            path.append(node.name)
        else:
            return None
    return tuple(path)


def check_must_gather(view: RoundView) -> list[Violation]:
    found: list[Violation] = []
    snap, placements = view.snapshot, view.result.placements
    if snap.topology is None:
        return found
    for job in snap.jobs:
        placed = [k for k in job.pod_keys if k in placements]
        if not placed or job.topology is None:
            continue
        for gather in job.topology.gather:
            if gather.strategy != "MustGather":
                continue
            domains = {
                domain(snap, view.nodes[placements[k].node], gather.layer)
                for k in placed
                if placements[k].node in view.nodes
            }
            if len(domains) > 1 or None in domains:
                shown = sorted("/".join(d) if d else "outside the topology" for d in domains)
                found.append(
                    Violation(
                        MUST_GATHER,
                        job.id,
                        "",
                        "",
                        f"{job.id} must gather in one {gather.layer} domain but is placed "
                        f"across {', '.join(shown)}",
                    )
                )
    return found
