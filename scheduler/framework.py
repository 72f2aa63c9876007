"""The plugin framework: extension points, statuses and the contracts plugins implement.

A round walks each pending job (gang group) through these points, like kube-scheduler's cycle but
for a whole job at once:

- QueueSort   `sort_key(state, job) -> tuple`: orders pending jobs (smaller first).
- PreFilter   `pre_filter(state, job, pods) -> Status`: job-level checks before any node is looked
              at (gang validity, topology rule validity, quota admission).
- Filter      two flavours, a plugin may implement either or both:
              `node_mask(state, pod) -> NodeMask`: a static yes/no per node for one pod template
              (selectors, affinity, taints), with the reason for rejected nodes;
              `slot_limits(state, job, pods, node_indices) -> np.ndarray` (slot-limit protocol):
              for every node index given, how many of `pods` (the job's pending pods, in placement
              order) fit that node by this plugin's criteria, assuming each accepted pod onto the
              node before trying the next. The engine takes the minimum over plugins, so a plugin
              that does not constrain a job returns `None` (cheapest) instead of an array. Counts
              must be non-negative integers <= len(pods), and a node's count may depend only on
              that node's own state and the pods' templates (`state.template`: requests, node
              constraints, scheduling annotations). A plugin whose count depends on per-node
              usage (devices) must treat the pods a preemption dry run removes as gone:
              `state.released_mask` marks them over `state.bound_keys`.
              `node_checks(state, on_node) -> {node: NodeCheck}`: during a preemption dry run,
              for each node of `on_node` (node index -> the pods a plan puts there), whether
              all those pods fit it with the pods the dry run releases gone, answered again as
              some of them are kept back (a preemption keeps victims back one by one); a node
              is left out when releasing bound pods never changes this plugin's count there or
              the plugin does not constrain its pods. One call per plan, so a plugin can read
              all of the plan's nodes at once.
              `explain(state, job, pods, node_indices) -> dict[Refusal, int]` counts, over the
              given nodes (those where the job got 0 slots), how many nodes fail for each reason
              (`Refusal(INSUFFICIENT, "Insufficient nvidia.com/gpu", "nvidia.com/gpu")`: 40),
              each with its code (`scheduler.causes`); a plain text key counts as
              `NodeRejected`. Called only when a job does not fit.
- Score       `score_nodes(state, job, node_indices) -> np.ndarray` (float, higher is better):
              breaks ties among equally good domains and orders nodes inside the chosen domain.
- Placement   the network-topology plugin turns offer slots into a `Plan` (pod -> node).
- Permit      `permit(state, job, plan) -> Status`: the gang decides whether the plan may proceed.
- Reserve     `reserve(state, job, plan) -> ReserveResult`: commit per-pod side data (devices,
              annotations, quota usage); `unreserve(state, job, plan)` undoes it if a later plugin
              rejects the plan. Devices return `PodAllocation`s keyed by pod key.
- PostFilter  `post_filter(state, job, failure) -> PostFilterResult`: preemption for a job that did
              not fit.

- Setup       `setup(state)`: once when the round starts, precompute per-round data and keep it
              under the plugin's typed key (`state.write(KEY, data)`, `scheduler.state_keys`).
- Fallback    `fallback_pods(state, job, pods)` offers a smaller pod set to try when the whole job
              does not fit, `places_partially(job)` whether members that fit may go alone (gang).
- RuntimeQuota `runtime_quota(state) -> QuotaLedger | None`: the quota plugin's accounting, which
              other plugins read through `Handle.runtime_quota` (a service, not a cycle step).

Plugins are classes built from a `Profile` entry with their arguments and the framework's `Handle`
(`__init__(self, args, handle)`, both always given: `args` a `PluginArgs` mapping, the profile's
values over the declared defaults); each implements only the points it needs and declares them in
`extension_points`, and declares the arguments it takes in `arguments` (name -> `Arg`, with its
default). The
profile builder holds a plugin to what it declares (`scheduler.contracts.conformance_problems`):
every declared point's methods are there, no undeclared point's method is, and no method name
looks like a misspelt one. Plugins read node capacity through `state.free(...)` (read-only) and
never write `state.used`; the framework assumes placed pods. What a plugin needs of the framework
or of another plugin it asks the `Handle`, never `CycleState`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from scheduler.causes import NODE_REJECTED
from scheduler.model import JobInfo, PodInfo

if TYPE_CHECKING:
    from scheduler.placement import NodeScores, PlacementOutcome
    from scheduler.state import CycleState

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


class Code(Enum):
    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"  # may fit after preemption
    UNRESOLVABLE = "UnschedulableAndUnresolvable"  # preemption cannot help
    INVALID = "Invalid"  # the job itself is malformed (validation error)
    WAIT = "Wait"  # e.g. waiting for preemption victims to terminate


@dataclass(frozen=True)
class Status:
    code: Code = Code.SUCCESS
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    plugin: str = ""
    # Why, as a stable code the web formats from (`scheduler.causes`, `scheduler.result.Cause`):
    # "" leaves the round to name it after the status code.
    cause: str = ""
    # The numbers behind the cause (plain values, or a `Cause` of a failure it stands on), handed
    # on as they are: nobody reads them back out of `reason`.
    values: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @staticmethod
    def success() -> Status:
        return _SUCCESS


_SUCCESS = Status()


@dataclass(frozen=True)
class NodeMask:
    """A Filter's static verdict for one pod template: allowed nodes and the rejection reason."""

    allowed: BoolArray
    reason: str
    plugin: str = ""  # the Filter that gave it (the framework fills it in)
    code: str = NODE_REJECTED  # the reason as a code (`scheduler.causes`)


@dataclass(frozen=True)
class Refusal:
    """Why a Filter rules a node out: a code (`scheduler.causes`: `Insufficient`, `TooManyPods`,
    ...), kube-scheduler's words nodes are counted under, and the resource it concerns."""

    code: str
    text: str
    resource: str = ""


@dataclass(frozen=True)
class PodAllocation:
    """What Reserve attaches to one placed pod: device allocation and annotations to write."""

    devices: Mapping[str, Any] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """Where a job's pending pods go: pod key -> node index, plus the "why here" decision."""

    assignment: Mapping[str, int]
    decision: Mapping[str, Any] = field(default_factory=dict)
    # (level, domain index) of the covering candidates, best first; preemption tries several
    candidates: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class ReserveResult:
    status: Status = field(default_factory=Status.success)
    allocations: Mapping[str, PodAllocation] = field(default_factory=dict)


@dataclass(frozen=True)
class Failure:
    """Why a job did not fit, passed to PostFilter and reported as the unschedulable reason."""

    status: Status
    node_reasons: Mapping[str, int] = field(default_factory=dict)
    # The same counts by the Filter plugin that gave them (plugin -> refusal -> nodes).
    explained: Mapping[str, Mapping[Refusal, int]] = field(default_factory=dict)
    # The numbers behind the status, for its `Cause` (e.g. available_nodes, best_offer_slots).
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PostFilterResult:
    """A preemption decision (or why there is none)."""

    status: Status
    victim_job_ids: tuple[str, ...] = ()
    victim_pod_keys: tuple[str, ...] = ()
    nominations: Mapping[str, str] = field(default_factory=dict)
    cost: Mapping[str, Any] = field(default_factory=dict)
    rule: str = ""  # which victim-selection rule applied (the plugin's own words)


class Plugin(Protocol):
    name: str
    extension_points: frozenset[str]


@dataclass(frozen=True)
class Arg:
    """The JSON shape of one plugin argument, which a plugin declares in its `arguments` mapping
    (`scheduler.profile.check_args` validates a profile's arguments against it): `bool`; `int`
    within [minimum, maximum]; `choice` among `choices`; `per_resource`, an object of resource
    name -> int within [minimum, maximum]; `duration`, a Kubernetes duration string ("5m",
    "300s", "1h30m"); `object`, an object whose keys are `fields` (name, Arg); `string`, a
    non-empty string of at most `maximum` characters (253, a label key's length, when unset).
    `default` is the value a profile that leaves the argument out means (None: no default, the
    plugin reads it as absent); the plugin reads both through `scheduler.plugin_args.PluginArgs`."""

    kind: Literal["bool", "int", "choice", "per_resource", "duration", "object", "string"]
    minimum: int = 0
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    fields: tuple[tuple[str, Arg], ...] = ()
    default: Any = field(default=None, hash=False)


@runtime_checkable
class QueueSortPlugin(Protocol):
    def sort_key(self, state: CycleState, job: JobInfo) -> tuple[Any, ...]: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    def pre_filter(self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]) -> Status: ...


@runtime_checkable
class NodeMaskPlugin(Protocol):
    name: str

    def node_mask(self, state: CycleState, pod: PodInfo) -> NodeMask | None: ...


class NodeCheck(Protocol):
    """One node, some pods planned on it, a dry run's bound pods gone (see `node_checks`)."""

    def holds_keeping(self, kept: Sequence[int]) -> bool:
        """Whether the pods still fit with the bound pods `kept` (ids) back as well."""
        ...

    def keep(self, kept: Sequence[int]) -> None:
        """Take the bound pods `kept` back for good."""
        ...


@runtime_checkable
class SlotLimitPlugin(Protocol):
    """The slot-limit protocol (see module docstring); the devices plugin implements it."""

    name: str

    def slot_limits(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> IntArray | None: ...

    def node_checks(
        self, state: CycleState, on_node: Mapping[int, Sequence[PodInfo]]
    ) -> Mapping[int, NodeCheck]: ...

    def explain(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo], node_indices: IntArray
    ) -> Mapping[Refusal, int] | Mapping[str, int]: ...


@runtime_checkable
class ScorePlugin(Protocol):
    def score_nodes(
        self, state: CycleState, job: JobInfo, node_indices: IntArray
    ) -> FloatArray: ...


@runtime_checkable
class PermitPlugin(Protocol):
    def permit(self, state: CycleState, job: JobInfo, plan: Plan) -> Status: ...


@runtime_checkable
class ReservePlugin(Protocol):
    def reserve(self, state: CycleState, job: JobInfo, plan: Plan) -> ReserveResult: ...

    def unreserve(self, state: CycleState, job: JobInfo, plan: Plan) -> None: ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    def post_filter(
        self, state: CycleState, job: JobInfo, failure: Failure
    ) -> PostFilterResult: ...


@runtime_checkable
class PlacementPlugin(Protocol):
    def place(
        self,
        state: CycleState,
        job: JobInfo,
        desired: int,
        slots: IntArray,
        scores: NodeScores | None,
        among: IntArray | None = None,
    ) -> PlacementOutcome: ...


@runtime_checkable
class SetupPlugin(Protocol):
    def setup(self, state: CycleState) -> None: ...


@runtime_checkable
class FallbackPlugin(Protocol):
    def fallback_pods(
        self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]
    ) -> list[PodInfo] | None: ...

    def places_partially(self, job: JobInfo) -> bool: ...


class QuotaLedger(Protocol):
    """A quota plugin's accounting this round, read-only to everyone else: per quota its
    runtime quota (what it may use now, lent and borrowed quota included), what it uses (bound
    pods and those placed so far this round) and its min."""

    @property
    def runtime(self) -> Mapping[str, Mapping[str, int]]: ...

    @property
    def used(self) -> Mapping[str, Mapping[str, int]]: ...

    def min_of(self, quota: str) -> Mapping[str, int]: ...


@runtime_checkable
class RuntimeQuotaPlugin(Protocol):
    def runtime_quota(self, state: CycleState) -> QuotaLedger | None: ...


class Handle(Protocol):
    """What a plugin may ask of the framework and, through it, of other plugins (kube-scheduler's
    framework.Handle): given to every plugin at construction. The pipeline methods run the
    profile's own Filter and Score plugins, so a preemption dry run is checked exactly as a
    normal placement is."""

    def pod_mask(self, state: CycleState, pod: PodInfo) -> NodeMask:
        """Every node-mask Filter's verdict for the pod's template, combined (cached a round)."""
        ...

    def mask_verdicts(self, state: CycleState, pod: PodInfo) -> list[NodeMask]:
        """Each node-mask Filter's own verdict for the pod's template (for explanations)."""
        ...

    def offer_slots(self, state: CycleState, job: JobInfo, pods: Sequence[PodInfo]) -> IntArray:
        """Per node, how many of `pods` fit in order, by every slot-limit Filter."""
        ...

    def node_scores(self, state: CycleState, job: JobInfo) -> NodeScores | None:
        """Every Score plugin's per-node score for the job, summed."""
        ...

    def try_place(
        self,
        state: CycleState,
        job: JobInfo,
        pods: Sequence[PodInfo],
        within: IntArray | None = None,
        slots: IntArray | None = None,
        scores: NodeScores | None = None,
    ) -> Plan | Failure:
        """Offer slots -> placement -> pod assignment, changing nothing."""
        ...

    def node_checks(
        self, state: CycleState, on_node: Mapping[int, Sequence[PodInfo]]
    ) -> dict[int, list[NodeCheck]]:
        """Every slot-limit Filter's `node_checks`, per node."""
        ...

    def runtime_quota(self, state: CycleState) -> QuotaLedger | None:
        """The RuntimeQuota plugin's ledger (None without quotas or without such a plugin)."""
        ...


EXTENSION_POINTS = (
    "QueueSort",
    "Setup",
    "PreFilter",
    "Filter",
    "Score",
    "Placement",
    "Permit",
    "Reserve",
    "PostFilter",
    "Fallback",
    "RuntimeQuota",
)

# The methods each point's Protocol asks for; Filter takes either flavour or both, and a
# slot-limit Filter all three of its methods.
POINT_METHODS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "QueueSort": (("sort_key",),),
    "Setup": (("setup",),),
    "PreFilter": (("pre_filter",),),
    "Filter": (("node_mask",), ("slot_limits", "node_checks", "explain")),
    "Score": (("score_nodes",),),
    "Placement": (("place",),),
    "Permit": (("permit",),),
    "Reserve": (("reserve", "unreserve"),),
    "PostFilter": (("post_filter",),),
    "Fallback": (("fallback_pods", "places_partially"),),
    "RuntimeQuota": (("runtime_quota",),),
}

POINT_PROTOCOLS: Mapping[str, tuple[type, ...]] = {
    "QueueSort": (QueueSortPlugin,),
    "Setup": (SetupPlugin,),
    "PreFilter": (PreFilterPlugin,),
    "Filter": (NodeMaskPlugin, SlotLimitPlugin),
    "Score": (ScorePlugin,),
    "Placement": (PlacementPlugin,),
    "Permit": (PermitPlugin,),
    "Reserve": (ReservePlugin,),
    "PostFilter": (PostFilterPlugin,),
    "Fallback": (FallbackPlugin,),
    "RuntimeQuota": (RuntimeQuotaPlugin,),
}
