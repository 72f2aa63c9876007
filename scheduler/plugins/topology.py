"""NetworkTopology plugin. Extension points: PreFilter (rule validation), Placement.

Runs the reference algorithm (`scheduler.placement`) on the offer slots the Filter plugins
computed. Arguments (profile options, our extensions): `podCountMultiple` (honour a rule's
pod_count_multiple, default true: inert unless a job asks), `parentFragmentation` (slot ties go
to the candidate whose parent is most used, default false), `preferGatherScore` (PreferGather
layers score candidates instead of a strict walk, default false), `bestFit` (inside the chosen
domain, children and nodes with the fewest offer slots first instead of the most: pods fill
partly used nodes before empty ones, which stay whole for larger pods; default true, false is
Koordinator's order), `packParents` (a job without a topology rule orders its nodes by every
level of the tree too, so with `bestFit` it fills the most used spine and block first and keeps
whole blocks free for gangs that must gather in one; default true, false is Koordinator's order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from scheduler.causes import POD_COUNT_NOT_MULTIPLE, TOPOLOGY_INVALID, TOPOLOGY_UNKNOWN_LAYER
from scheduler.framework import Arg, Code, Handle, IntArray, Status
from scheduler.model import JobInfo, PodInfo
from scheduler.placement import NodeScores, PlacementOptions, PlacementOutcome, place
from scheduler.plugin_args import PluginArgs
from scheduler.state import CycleState


class NetworkTopology:
    name = "NetworkTopology"
    extension_points = frozenset({"PreFilter", "Placement"})
    arguments: ClassVar[Mapping[str, Arg]] = {
        "podCountMultiple": Arg("bool", default=True),
        "parentFragmentation": Arg("bool", default=False),
        "preferGatherScore": Arg("bool", default=False),
        "bestFit": Arg("bool", default=True),
        "packParents": Arg("bool", default=True),
    }

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        read = PluginArgs(self.arguments, args)
        self.pod_count_multiple = read.flag("podCountMultiple")
        self.options = PlacementOptions(
            parent_fragmentation=read.flag("parentFragmentation"),
            prefer_gather_score=read.flag("preferGatherScore"),
            best_fit=read.flag("bestFit"),
            pack_parents=read.flag("packParents"),
        )

    def pre_filter(self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]) -> Status:
        rule = job.topology
        if rule is None or not rule.gather:
            return Status.success()
        tree = state.topology
        if tree.error:
            reason = f"invalid network topology: {tree.error}"
            return Status(
                Code.INVALID, reason, {}, self.name, TOPOLOGY_INVALID, {"error": tree.error}
            )
        unknown = sorted({g.layer for g in rule.gather if tree.layer_position(g.layer) is None})
        if unknown:
            return Status(
                Code.INVALID,
                f"unknown topology layer(s) {', '.join(unknown)} in network-topology-spec; "
                f"the cluster defines {', '.join(tree.levels[1:])}",
                {"unknown_layers": unknown},
                self.name,
                TOPOLOGY_UNKNOWN_LAYER,
                {"unknown_layers": tuple(unknown), "cluster_layers": tuple(tree.levels[1:])},
            )
        multiple = self.multiple(job)
        if multiple > 1 and len(pods) % multiple:
            return Status(
                Code.INVALID,
                f"{len(pods)} pending pods is not a multiple of podCountMultiple {multiple}",
                {"pod_count_multiple": multiple},
                self.name,
                POD_COUNT_NOT_MULTIPLE,
                {"pods": len(pods)},
            )
        return Status.success()

    def multiple(self, job: JobInfo) -> int:
        if not self.pod_count_multiple or job.topology is None:
            return 1
        return max(1, job.topology.pod_count_multiple)

    def place(
        self,
        state: CycleState,
        job: JobInfo,
        desired: int,
        slots: IntArray,
        scores: NodeScores | None,
        among: IntArray | None = None,
    ) -> PlacementOutcome:
        """`among`: the only nodes whose slots may be non-zero (a preemption attempt's)."""
        multiple = self.multiple(job)
        if multiple > 1:
            slots = slots - slots % multiple  # every node (hence domain) holds a multiple of N
        return place(state.topology, slots, desired, job.topology, scores, self.options, among)
