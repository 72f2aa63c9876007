"""The pod statuses the kubelet writes: admitted (Running), rejected (Failed) and killed or
finished (a terminal phase with terminated containers)."""

from __future__ import annotations

from typing import Any

from tests.fakekube.admission import Verdict
from tests.fakekube.store import Obj, meta, now_rfc3339


def running(pod: Obj) -> dict[str, Any]:
    now = now_rfc3339()
    status = dict(pod.get("status") or {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
    for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"):
        conditions.append(
            {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        )
    status.update(
        {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": "10.0.0.1",
            "startTime": status.get("startTime") or now,
            "containerStatuses": [
                {
                    "name": c.get("name", ""),
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"containerd://{meta(pod)['uid']}-{c.get('name', '')}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for c in (pod.get("spec") or {}).get("containers") or []
            ],
        }
    )
    return status


def rejected(pod: Obj, verdict: Verdict) -> dict[str, Any]:
    old = pod.get("status") or {}
    status: dict[str, Any] = {
        "phase": "Failed",
        "reason": verdict.reason,
        "message": f"Pod was rejected: {verdict.message}",
        "startTime": old.get("startTime") or now_rfc3339(),
    }
    if old.get("qosClass"):
        status["qosClass"] = old["qosClass"]
    kept = [c for c in old.get("conditions") or [] if c.get("type") in ("PodScheduled",)]
    if kept:
        status["conditions"] = kept
    return status


def terminal(pod: Obj, phase: str) -> dict[str, Any]:
    now = now_rfc3339()
    status = dict(pod.get("status") or {})
    exit_code, reason = (0, "Completed") if phase == "Succeeded" else (143, "Error")
    conditions = []
    for condition in status.get("conditions") or []:
        if condition.get("type") in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
            condition = {**condition, "status": "False", "lastTransitionTime": now}
            if condition["type"] != "PodReadyToStartContainers":
                condition["reason"] = "PodCompleted"
        conditions.append(condition)
    status["conditions"] = conditions
    status["phase"] = phase
    status["containerStatuses"] = [
        {
            **cs,
            "ready": False,
            "started": False,
            "state": {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": reason,
                    "startedAt": ((cs.get("state") or {}).get("running") or {}).get("startedAt"),
                    "finishedAt": now,
                    "containerID": cs.get("containerID"),
                }
            },
        }
        for cs in status.get("containerStatuses") or []
    ]
    return status
