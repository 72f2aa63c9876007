"""A kubelet stand-in for every node: admits bound pods, finishes terminating ones.

Admission (`admit`), run as soon as a pod is bound (or created with `spec.nodeName`) to a node
that has a Node object, checks what the real kubelet's predicate admit handler checks, in its
order, and reports the first failure only:
  pods count, cpu, memory, ephemeral-storage, then extended resources by name (only those the
  node's `status.allocatable` lists) -> reason `OutOf<resource>`, message
  "Node didn't have enough resource: <name>, requested: N, used: N, capacity: N";
  nodeSelector / required node affinity -> `NodeAffinity`; an untolerated NoExecute taint ->
  `TaintToleration`; then card claims (the device-allocated annotation) against the node's
  Device object -> `UnexpectedAdmissionError` ("Allocate failed due to ..., which is unexpected").
What is in use is every other non-terminal pod bound there that the kubelet has admitted,
terminating pods included: they hold their resources until they are gone. An admitted pod goes
Running (Ready, startTime, one status per container); a rejected one goes Failed with the reason
and the message "Pod was rejected: <message>", as the kubelet's rejectPod writes them. The
decision lives in `admission`, the statuses written in `podstatus`.

Termination: a pod given a deletionTimestamp is killed after its grace period, scaled by
`time_scale` wall seconds per grace second (0: at once, inside the request that deleted it), then
goes to `terminal_phase` and is deleted (the DELETED watch event). With `manual = True` nothing
finishes until `finish_terminating()` says so, which makes "victims still terminating for several
rounds" deterministic. `Settings.pod_grace_seconds > 0` (older tests) overrides the scaled grace
with that many wall seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tests.fakekube import errors, podstatus, usage
from tests.fakekube.admission import Verdict, judge
from tests.fakekube.resources import served
from tests.fakekube.store import Obj, ObjectStore, meta

PODS = served("v1", "Pod")
NODES = served("v1", "Node")
DEVICES = served("scheduling.koordinator.sh/v1alpha1", "Device")
Key = tuple[str, str, str]  # namespace, name, uid


class Kubelet:
    """Every node's kubelet. Thread safe; `start()`/`stop()` run the termination timer."""

    def __init__(
        self, store: ObjectStore, after_write: Callable[[], None], legacy_grace: Callable[[], float]
    ) -> None:
        self.store = store
        self._after_write = after_write  # the disruption controller's resync
        self._legacy_grace = legacy_grace  # Settings.pod_grace_seconds
        self.admission = True  # False: bound pods stay Pending until admit_pending()
        self.manual = False  # True: terminating pods stay until finish_terminating()
        self.time_scale = 0.0  # wall seconds per second of grace period
        self.terminal_phase = "Failed"  # what a killed pod reports before it is deleted
        self._due: dict[Key, float] = {}  # terminating pods -> monotonic time to finish
        self._forced: dict[tuple[str, str], Verdict] = {}
        self._wake = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True, name="fake-kubelet")
        self._thread.start()

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def configure(self, **options: Any) -> None:
        """Set `admission`, `manual`, `time_scale` or `terminal_phase` (unknown names: 400)."""
        for name, value in options.items():
            if name not in ("admission", "manual", "time_scale", "terminal_phase"):
                raise errors.bad_request(f"unknown kubelet option {name!r}")
            if name == "terminal_phase" and value not in usage.TERMINAL:
                raise errors.bad_request("terminal_phase must be Succeeded or Failed")
            if name == "time_scale":
                try:
                    value = float(value)
                except (TypeError, ValueError) as exc:
                    raise errors.bad_request("time_scale must be a number of seconds") from exc
            setattr(self, name, value)
        with self._wake:
            self._wake.notify_all()

    def state(self) -> dict[str, Any]:
        return {
            "admission": self.admission,
            "manual": self.manual,
            "time_scale": self.time_scale,
            "terminal_phase": self.terminal_phase,
            "terminating": [{"namespace": ns, "name": name} for ns, name in self.terminating()],
        }

    # --- admission -----------------------------------------------------------------------
    def reject_next_admission(
        self,
        namespace: str,
        name: str,
        reason: str = "UnexpectedAdmissionError",
        message: str = "Allocate failed due to injected failure, which is unexpected",
    ) -> None:
        """Make the next admission of this pod fail with `reason` and `message`."""
        self._forced[(namespace, name)] = Verdict(False, reason, message)

    def admit(self, namespace: str, name: str) -> Verdict | None:
        """Admit or reject one bound Pending pod now; None when there is nothing to decide
        (not bound, not Pending, terminating, gone, or no Node object: no kubelet there)."""
        with self.store.cond:
            pod = self.store.find(PODS, namespace, name)
            if pod is None or not self._waiting(pod):
                return None
            node_name = pod["spec"]["nodeName"]
            node = self.store.find(NODES, None, node_name)
            if node is None:
                return None
            verdict = self._forced.pop((namespace, name), None)
            if verdict is None:
                device = self.store.find(DEVICES, None, node_name)
                verdict = judge(pod, node, self._holding(node_name, pod), device)
            status = (
                podstatus.running(pod) if verdict.admitted else podstatus.rejected(pod, verdict)
            )

            def write(current: Obj) -> Obj:
                current["status"] = status
                return current

            self.store.update(PODS, namespace, name, write)
        self._after_write()
        return verdict

    def admit_pending(self) -> dict[str, Verdict]:
        """Admit every bound Pending pod, oldest first; `ns/name` -> verdict."""
        pods, _ = self.store.select(PODS, None, self._waiting)
        pods.sort(key=lambda p: (meta(p).get("creationTimestamp") or "", _name(p)))
        verdicts = {}
        for pod in pods:
            verdict = self.admit(meta(pod)["namespace"], meta(pod)["name"])
            if verdict is not None:
                verdicts[_name(pod)] = verdict
        return verdicts

    def maybe_admit(self, pod: Obj) -> None:
        if self.admission and self._waiting(pod):
            self.admit(meta(pod)["namespace"], meta(pod)["name"])

    @staticmethod
    def _waiting(pod: Obj) -> bool:
        return (
            bool((pod.get("spec") or {}).get("nodeName"))
            and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
            and not meta(pod).get("deletionTimestamp")
        )

    def _holding(self, node_name: str, pod: Obj) -> list[Obj]:
        """Pods the kubelet runs on the node besides `pod`: admitted, not yet terminal."""

        def runs_there(other: Obj) -> bool:
            return (
                usage.holds_resources(other, node_name)
                and meta(other)["uid"] != meta(pod)["uid"]
                and (other.get("status") or {}).get("phase", "Pending") != "Pending"
            )

        pods, _ = self.store.select(PODS, None, runs_there)
        return pods

    # --- running to completion -------------------------------------------------------------
    def complete(self, namespace: str, name: str, phase: str = "Succeeded") -> Obj:
        """Let a bound pod's containers exit: it reports `phase` and stays (no deletion)."""
        if phase not in usage.TERMINAL:
            raise errors.bad_request("phase must be Succeeded or Failed")

        def write(current: Obj) -> Obj:
            current["status"] = podstatus.terminal(current, phase)
            return current

        done = self.store.update(PODS, namespace, name, write)
        self._after_write()
        return done

    # --- termination -----------------------------------------------------------------------
    def terminating(self) -> list[tuple[str, str]]:
        """(namespace, name) of every pod with a deletionTimestamp, in key order."""
        pods, _ = self.store.select(PODS, None, lambda p: bool(meta(p).get("deletionTimestamp")))
        return [(meta(p)["namespace"], meta(p)["name"]) for p in pods]

    def pod_terminating(self, pod: Obj, shortened_by: int = 0) -> None:
        """A pod got (or shortened) its deletionTimestamp: plan when it finishes."""
        key = (meta(pod)["namespace"], meta(pod)["name"], meta(pod)["uid"])
        grace = int(meta(pod).get("deletionGracePeriodSeconds") or 0)
        legacy = self._legacy_grace()
        with self._wake:
            if key in self._due and shortened_by:
                self._due[key] -= shortened_by * self.time_scale
            elif key not in self._due:
                wall = legacy if legacy > 0 else grace * self.time_scale
                self._due[key] = time.monotonic() + wall
            self._wake.notify_all()
        if not self.manual and self._due.get(key, 1.0) <= time.monotonic():
            self._finish(key)

    def finish_terminating(
        self, namespace: str | None = None, name: str | None = None
    ) -> list[tuple[str, str]]:
        """Kill and delete terminating pods now (all, a namespace's, or one), in manual or
        automatic mode alike; returns the (namespace, name) of those finished."""
        finished = []
        pods, _ = self.store.select(PODS, None, lambda p: bool(meta(p).get("deletionTimestamp")))
        for pod in pods:
            ns, pod_name = meta(pod)["namespace"], meta(pod)["name"]
            chosen = (namespace is None or ns == namespace) and (name is None or pod_name == name)
            if chosen and self._finish((ns, pod_name, meta(pod)["uid"])):
                finished.append((ns, pod_name))
        return finished

    def _finish(self, key: Key) -> bool:
        namespace, name, uid = key
        with self._wake:
            self._due.pop(key, None)
        with self.store.cond:
            pod = self.store.find(PODS, namespace, name)
            if pod is None or meta(pod)["uid"] != uid or not meta(pod).get("deletionTimestamp"):
                return False
            if not usage.is_terminal(pod):

                def write(current: Obj) -> Obj:
                    current["status"] = podstatus.terminal(current, self.terminal_phase)
                    return current

                self.store.update(PODS, namespace, name, write)
            self.store.delete(PODS, namespace, name)
        self._after_write()
        return True

    def _loop(self) -> None:
        while True:
            with self._wake:
                if self._stopped:
                    return
                now = time.monotonic()
                due = [k for k, at in self._due.items() if at <= now]
                if self.manual or not due:
                    upcoming = [at for at in self._due.values() if at > now]
                    wait = 0.5 if self.manual or not upcoming else min(upcoming) - now
                    self._wake.wait(max(0.01, min(wait, 0.5)))
                    continue
            for key in due:
                try:
                    self._finish(key)
                except errors.ApiError:
                    continue  # deleted meanwhile


def _name(pod: Obj) -> str:
    return f"{meta(pod)['namespace']}/{meta(pod)['name']}"
