"""Room on a node, by kube-scheduler's NodeResourcesFit and its nominated pods.

- NodeResourcesFit: on every node given new pods, for each resource one of them asks for (a
  positive request), what holds the node (bound pods that have not finished, terminating pods and
  this round's victims included: they keep their room until they are gone) plus the new pods must
  stay within the node's allocatable; a resource the node does not list is 0 there. The `pods`
  resource counts pods, one each; a node that does not list `pods` has no pod limit.
- Nominated pods (kube-scheduler's `addNominatedPods`): a pod is filtered on a node as if the
  pods nominated there, of equal or higher priority and of other jobs, already ran. So for every
  new pod q on a node, the same sum plus those nominated pods must fit, for the resources q asks
  for and the pod count. A pod is nominated to a node when the snapshot says so and it is still
  pending, not placed this round and its gang did not give its nominations up (a timeout): it
  holds its room against every new pod. A pod this round's preemptions nominate there (and not
  placed) holds it only against the pods scheduled after its preemption, those of jobs later in
  the queue (kube's PrioritySort): a lower priority, or the same priority submitted later; a pod
  placed before the preemption was there when its victims were chosen.
- Placement: every placed pod is a pending pod of the snapshot and goes to one of its nodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from scheduler.model import PodInfo
from scheduler.oracle.view import RoundView
from scheduler.oracle.violation import NOMINATED_PODS, PLACEMENT, RESOURCE_FIT, Violation

PODS = "pods"


def summed(pods: Iterable[PodInfo]) -> dict[str, int]:
    """Requests summed per resource, with `pods` the number of pods."""
    total: dict[str, int] = defaultdict(int)
    for pod in pods:
        for r, v in pod.requests.items():
            if r != PODS:
                total[r] += int(v)
        total[PODS] += 1
    return total


def asked(pod: PodInfo) -> set[str]:
    """The resources a pod's fit is checked on: those it asks for, and the pod count."""
    return {r for r, v in pod.requests.items() if v > 0} | {PODS}


def check_placements(view: RoundView) -> list[Violation]:
    found = []
    for key, placement in view.result.placements.items():
        pod = view.pods.get(key)
        job = pod.job_id if pod else ""
        if pod is None:
            message = f"{key} is placed but is not a pod of the snapshot"
        elif not pod.is_pending:
            message = f"{key} is placed but is not pending (node {pod.node}, {pod.phase})"
        elif placement.node not in view.nodes:
            message = f"{key} is placed on {placement.node}, which is not a node of the snapshot"
        else:
            continue
        found.append(Violation(PLACEMENT, job, key, placement.node, message))
    return found


def _over(view: RoundView, name: str, total: dict[str, int], resources: set[str]) -> list[str]:
    allocatable = view.nodes[name].allocatable
    over = []
    for r in sorted(resources):
        if r == PODS and PODS not in allocatable:
            continue
        if total.get(r, 0) > allocatable.get(r, 0):
            over.append(f"{r} {total.get(r, 0)} > {allocatable.get(r, 0)}")
    return over


def check_fit(view: RoundView) -> list[Violation]:
    found = []
    for name, new in view.placed.items():
        if name not in view.nodes:
            continue
        total = summed([*view.holders.get(name, ()), *new])
        resources = set().union(*(asked(p) for p in new))
        over = _over(view, name, total, resources)
        if over:
            found.append(
                Violation(
                    RESOURCE_FIT,
                    "",
                    "",
                    name,
                    f"{name} over-committed after placing {', '.join(p.key for p in new)}: "
                    + "; ".join(over),
                )
            )
    return found


Nominee = tuple[PodInfo, bool]
"""A pod nominated to a node, and whether this round nominated it (else an earlier one did)."""


def nominated_pods(view: RoundView) -> dict[str, list[Nominee]]:
    """Node -> the pods nominated there and not placed this round."""
    placed = view.result.placements
    given_up = set(view.result.timeouts)
    nominated: dict[str, tuple[PodInfo, str, bool]] = {}
    for pod in view.snapshot.pods:
        if (
            pod.nominated_node
            and pod.is_pending
            and pod.key not in placed
            and pod.job_id not in given_up
        ):
            nominated[pod.key] = (pod, pod.nominated_node, False)
    for record in view.result.preemptions:
        for key, node in record.nominations.items():
            member = view.pods.get(key)
            earlier = nominated.get(key)
            if member is None or key in placed or (earlier and earlier[1] == node):
                continue
            nominated[key] = (member, node, True)
    by_node: dict[str, list[Nominee]] = defaultdict(list)
    for pod, node, now in nominated.values():
        by_node[node].append((pod, now))
    return by_node


def _queue_key(view: RoundView, pod: PodInfo) -> tuple[int, float | None]:
    job = view.jobs.get(pod.job_id)
    return (-pod.priority, job.submission_order if job is not None else None)


def _holds_against(view: RoundView, nominee: Nominee, pod: PodInfo) -> bool:
    """Whether `nominee` holds its room against new pod `pod` (see the module docstring)."""
    waiting, now = nominee
    if waiting.job_id == pod.job_id or waiting.priority < pod.priority:
        return False
    if not now or waiting.priority > pod.priority:
        return True
    (_, first), (_, second) = _queue_key(view, waiting), _queue_key(view, pod)
    return first is not None and second is not None and first < second


def check_nominations(view: RoundView) -> list[Violation]:
    found = []
    by_node = nominated_pods(view)
    for name, new in view.placed.items():
        waiting = by_node.get(name)
        if not waiting or name not in view.nodes:
            continue
        base = summed([*view.holders.get(name, ()), *new])
        for pod in new:
            ahead = [w for w, now in waiting if _holds_against(view, (w, now), pod)]
            if not ahead:
                continue
            extra = summed(ahead)
            total = {r: base.get(r, 0) + extra.get(r, 0) for r in set(base) | set(extra)}
            over = _over(view, name, total, asked(pod))
            if over:
                found.append(
                    Violation(
                        NOMINATED_PODS,
                        pod.job_id,
                        pod.key,
                        name,
                        f"{pod.key} (priority {pod.priority}) placed on {name} takes room "
                        f"nominated to {', '.join(sorted(w.key for w in ahead))}: "
                        + "; ".join(over),
                    )
                )
    return found
