"""Can a job's shape ever run here? Room for its pods in the domains its topology rule allows.

`ClusterRoom.room` counts how many pods of one shape fit, per allowed domain, either on the empty
cluster (`empty=True`: nothing bound) or on the live state, by asking the engine
(`scheduler.api`): its offer slots, its cordons and taints, its card counts and its topology
domains, so a refusal here is what a round would decide.
`ClusterRoom.never_fits` says why a job can never run even on an empty cluster ("the largest block
has room for 8 such pods, the job needs 10"); `job_feasibility_check` raises it as a
ValidationError keyed by the submission's field, so the API answers 400 and the UI form shows
it. Only reads: nothing here writes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError

from koordweb.engine.reads import ClusterRead, cluster_read
from koordweb.models import Cluster
from koordweb.presenters.quantities import shape_text
from koordweb.presenters.words import layer_word, pods
from scheduler.api import EngineState, IntArray, PodTemplate, gather_domains

# Resources every node has implicitly or that the engine accounts for itself.
_UNCHECKED = {"pods", "ephemeral-storage"}


@dataclass(frozen=True)
class Room:
    """Pods of the shape that fit: in the best allowed domain, and which domain that is."""

    layer: str  # the MustGather layer, "" without a rule
    best: int
    best_domain: str
    domains: int  # how many domains the rule allows


def must_gather_layer(topology_spec: Mapping[str, Any] | None) -> str:
    """The lowest layer a MustGather rule names (the strictest), or ''."""
    rules = (topology_spec or {}).get("gatherStrategy") or []
    return next(
        (str(r.get("layer")) for r in reversed(rules) if r.get("strategy") == "MustGather"), ""
    )


class ClusterRoom:
    """The cluster as the engine sees it (`scheduler.api.EngineState`), live or empty, asked
    many times: the engine's offer slots summed into the domains the engine's tree groups nodes
    in. The states are the ones every page shares (`koordweb.engine.reads`), looked up once
    when first asked."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    @cached_property
    def read(self) -> ClusterRead:
        return cluster_read(self.cluster)

    @cached_property
    def nodes(self) -> ClusterRead:
        """The cluster read without pods or jobs: every empty-cluster question asks it."""
        return cluster_read(self.cluster, nodes_only=True)

    @property
    def empty(self) -> EngineState:
        return self.nodes.empty()

    @property
    def live(self) -> EngineState:
        return self.read.live()

    @cached_property
    def schedulable(self) -> list[int]:
        """Indices of the nodes a pod may be placed on at all (not cordoned, ready)."""
        return [i for i, node in enumerate(self.empty.nodes) if not node.unschedulable]

    @cached_property
    def declared(self) -> set[str]:
        """Resources some schedulable node offers (`scheduler.api.node_offers`)."""
        nodes = self.empty.nodes
        return {r for i in self.schedulable for r in nodes[i].allocatable}

    @property
    def layers(self) -> list[str]:
        return list(self.empty.tree.layers)

    def slots(self, requests: Mapping[str, int], *, empty: bool) -> IntArray:
        """Per node (name order), the engine's offer slots for one pod of `requests`."""
        read = self.nodes if empty else self.read
        return read.offer_slots(PodTemplate(dict(requests)), empty=empty)

    def room(
        self, requests: Mapping[str, int], topology_spec: Mapping[str, Any] | None, *, empty: bool
    ) -> Room | None:
        """Room for pods of `requests` in the domains the rule allows; None when unknowable
        (no nodes yet, an unknown layer, or a resource no node declares)."""
        shape = {r: a for r, a in requests.items() if a > 0 and r not in _UNCHECKED}
        if not self.schedulable or not shape or not set(shape) <= self.declared:
            return None  # a resource no node offers: the shape check names it
        layer = must_gather_layer(topology_spec)
        grouped = gather_domains(self.empty.tree, layer)
        if grouped is None:
            return None  # an unknown layer: the layer check reports it
        keys, of_node = grouped
        slots = self.slots(shape, empty=empty)
        serving = of_node >= 0
        if not serving.any():
            return Room(layer, 0, "", 0)
        room = np.bincount(of_node[serving], weights=slots[serving], minlength=len(keys))
        used = np.unique(of_node[serving])
        # the roomiest, then the last key (as before: the greatest (room, key))
        best = max(used.tolist(), key=lambda d: (int(room[d]), keys[d]))
        return Room(layer, int(room[best]), keys[best], len(used))

    def never_fit_together(
        self,
        pod_requests: Sequence[Mapping[str, int]],
        pod_count: int,
        topology_spec: Mapping[str, Any] | None,
    ) -> str:
        """Why no `pod_count` of these pods (each its own requests) can ever run together here,
        or '' if that is not certain: with every node empty, no allowed domain holds, resource by
        resource, what the `pod_count` smallest requests add up to."""
        resources = {
            r for requests in pod_requests for r, a in requests.items() if a > 0
        } - _UNCHECKED
        layer = must_gather_layer(topology_spec)
        grouped = gather_domains(self.empty.tree, layer)
        if not self.schedulable or not resources or not resources <= self.declared:
            return ""
        if grouped is None:
            return ""  # an unknown layer: the layer check reports it
        least = {
            r: sum(sorted(int(requests.get(r, 0)) for requests in pod_requests)[:pod_count])
            for r in resources
        }
        _keys, of_node = grouped
        nodes = self.empty.nodes
        totals: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for i in self.schedulable:
            if of_node[i] >= 0:
                for resource, amount in nodes[i].allocatable.items():
                    totals[int(of_node[i])][resource] += amount
        if any(all(have[r] >= need for r, need in least.items()) for have in totals.values()):
            return ""
        need = shape_text({r: a for r, a in least.items() if a > 0})
        smallest = f"the job's smallest {pods(pod_count)}"
        if layer:
            return (
                f"with every node empty, no {layer_word(layer)} has the {need} that {smallest} "
                "need together"
            )
        return f"with every node empty, the whole cluster has less than the {need} {smallest} need"

    def never_fits(
        self, requests: Mapping[str, int], pod_count: int, topology_spec: Mapping[str, Any] | None
    ) -> str:
        """Why `pod_count` pods of `requests` can never run together here, or '' if they can."""
        room = self.room(requests, topology_spec, empty=True)
        if room is None or room.best >= pod_count or (room.best == 0 and not room.layer):
            return ""
        shape = shape_text(requests)
        if room.layer:
            where = layer_word(room.layer)
            return (
                f"with every node empty, the roomiest {where}, "
                f"{room.best_domain.partition('/')[2]}, has room for {pods(room.best)} of {shape}, "
                f"and the job needs {pods(pod_count)} together in one {where}"
            )
        return (
            f"with every node empty, the whole cluster has room for {pods(room.best)} of "
            f"{shape}, and the job needs {pods(pod_count)} at once"
        )

    def what_would_fit(
        self, requests: Mapping[str, int], pod_count: int, topology_spec: Mapping[str, Any] | None
    ) -> str:
        """For a job that can never run: the changes that would let it (fewer pods, a looser
        rule), each checked on the empty cluster."""
        options = []
        same = self.room(requests, topology_spec, empty=True)
        if same is not None and same.best > 0:
            options.append(f"as at most {pods(same.best)} with this rule")
        layer = must_gather_layer(topology_spec)
        names = self.layers
        if layer:
            looser = [
                {"gatherStrategy": [{"layer": name, "strategy": "MustGather"}]}
                for name in reversed(names[: names.index(layer)] if layer in names else names)
            ]
            for rule in [*looser, None]:
                room = self.room(requests, rule, empty=True)
                if room is not None and room.best >= pod_count:
                    where = layer_word(must_gather_layer(rule)) if rule else ""
                    options.append(
                        f"with MustGather on a {where} (room for {pods(room.best)})"
                        if rule
                        else f"without a topology rule (room for {pods(room.best)})"
                    )
                    break
        return f"It could run {' or '.join(options)}." if options else ""


def job_feasibility_check(
    cluster: Cluster, spec: Any, shapes: Sequence[Mapping[str, int]] = ()
) -> None:
    """Refuse a submission (a `services.jobs.JobSpec`) that can never run: a ValidationError on
    `topology` when a looser rule would let it run, else on `replicas`.

    `shapes`: each pod's requests when they differ (a YAML job); by default every pod is
    `spec.pod`. Such a job is judged shape by shape (the pods of one shape it cannot do without,
    its minimum less the pods of every other shape, must fit on their own) and then as a whole
    by amounts (some allowed domain must hold what its smallest pods add up to). Passing both
    does not prove the pods pack onto nodes together; the rounds judge that."""
    needed = spec.min_available or spec.replicas
    counts = Counter(tuple(sorted(dict(shape).items())) for shape in shapes)
    groups = [(dict(key), count) for key, count in counts.items()] or [
        (dict(spec.pod.requests), spec.replicas)
    ]
    total = sum(count for _shape, count in groups)
    rules = {"gatherStrategy": [{"layer": g.layer, "strategy": g.strategy} for g in spec.gather]}
    room = ClusterRoom(cluster)
    for requests, count in groups:
        pod_count = needed - (total - count)
        if pod_count > 0 and (reason := room.never_fits(requests, pod_count, rules)):
            looser = room.never_fits(requests, pod_count, None)
            _refuse(reason, rule_to_blame=bool(must_gather_layer(rules)) and not looser)
    if len(groups) > 1 and (reason := room.never_fit_together(shapes, needed, rules)):
        looser = room.never_fit_together(shapes, needed, None)
        _refuse(reason, rule_to_blame=bool(must_gather_layer(rules)) and not looser)


def _refuse(reason: str, *, rule_to_blame: bool) -> None:
    """The 400 of a job that can never run: on `topology` when a looser rule would let it."""
    raise ValidationError(
        {"topology" if rule_to_blame else "replicas": [f"can never run: {reason}"]}
    )
