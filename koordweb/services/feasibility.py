"""Can a job's shape ever run here? Room for its pods in the domains its topology rule allows.

`ClusterRoom.room` counts how many pods of one shape fit, per allowed domain, either on the empty
cluster (`empty=True`: allocatable only) or on the live state (what occupying pods leave free).
`ClusterRoom.never_fits` says why a job can never run even on an empty cluster ("the largest block
has room for 8 such pods, the job needs 10"); `job_feasibility_check` raises it as a
ValidationError keyed by the submission's field, so the API answers 400 and the UI form shows
it. Only reads: nothing here writes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from koordweb.models import Cluster, Device, Node
from koordweb.presenters.quantities import shape_text
from koordweb.presenters.words import layer_word, pods
from koordweb.selectors.topology import (
    cluster_layers,
    layer_chain,
    node_allocations,
    node_domains,
    offer_slots,
)
from scheduler.vocabulary import NODE_LAYER, NVIDIA_GPU, VENDOR_NVIDIA

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
    """The cluster's nodes (allocatable, labels) and topology, read once, asked many times."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        cards: dict[int, int] = defaultdict(int)
        for node_id in Device.objects.filter(
            node__cluster=cluster, device_type=Device.Type.GPU, vendor=VENDOR_NVIDIA
        ).values_list("node_id", flat=True):
            cards[node_id] += 1
        self.nodes: dict[str, tuple[dict[str, int], dict[str, str]]] = {}
        for node_id, name, allocatable, labels, unschedulable in Node.objects.filter(
            cluster=cluster
        ).values_list("id", "name", "allocatable", "labels", "unschedulable"):
            if unschedulable:
                continue
            amounts = {k: int(v) for k, v in (allocatable or {}).items() if isinstance(v, int)}
            if cards.get(node_id):
                amounts.setdefault(NVIDIA_GPU, cards[node_id])
            self.nodes[name] = (amounts, dict(labels or {}))
        self.declared = {r for amounts, _ in self.nodes.values() for r in amounts}
        self.chain = layer_chain(cluster_layers(cluster))
        self._used: dict[str, dict[str, int]] | None = None

    def room(
        self, requests: Mapping[str, int], topology_spec: Mapping[str, Any] | None, *, empty: bool
    ) -> Room | None:
        """Room for pods of `requests` in the domains the rule allows; None when unknowable
        (no nodes yet, an unknown layer, or a resource no node declares)."""
        shape = {r: a for r, a in requests.items() if a > 0 and r not in _UNCHECKED}
        if not self.nodes or not shape or not set(shape) <= self.declared:
            return None  # shared-device resources and unknown names are other checks' concern
        if not empty and self._used is None:
            self._used = node_allocations(self.cluster)
        used = {} if empty else (self._used or {})
        layer = must_gather_layer(topology_spec)
        domains = self.domains(layer)
        if domains is None:
            return None  # an unknown layer: the layer check reports it
        room: dict[str, int] = defaultdict(int)
        for name, (amounts, _labels) in self.nodes.items():
            free = dict(amounts)
            for resource, amount in used.get(name, {}).items():
                free[resource] = free.get(resource, 0) - amount
            if name in domains:
                room[domains[name]] += offer_slots(free, shape)
        if not room:
            return Room(layer, 0, "", 0)
        best_domain, best = max(room.items(), key=lambda item: (item[1], item[0]))
        return Room(layer, best, best_domain, len(room))

    def domains(self, layer: str) -> dict[str, str] | None:
        """Node name -> the domain it serves a MustGather rule on `layer` in ("" without a rule;
        the node itself on the node layer); nodes outside the topology serve none. None for an
        unknown layer."""
        depth = next((i for i, spec in enumerate(self.chain) if spec.name == layer), None)
        if layer and depth is None and layer != NODE_LAYER:
            return None
        found: dict[str, str] = {}
        for name, (_amounts, labels) in self.nodes.items():
            if layer and depth is None:
                found[name] = f"{layer}/{name}"  # gathered on one node
            elif depth is not None:
                path = node_domains(self.chain, name, labels)
                if path:
                    found[name] = path[depth]
            else:
                found[name] = ""
        return found

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
        domains = self.domains(layer)
        if not self.nodes or not resources or not resources <= self.declared or domains is None:
            return ""
        least = {
            r: sum(sorted(int(requests.get(r, 0)) for requests in pod_requests)[:pod_count])
            for r in resources
        }
        totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for name, domain in domains.items():
            for resource, amount in self.nodes[name][0].items():
                totals[domain][resource] += amount
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
        names = [spec.name for spec in self.chain]
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
