"""PreferLabel: a Score plugin. Extension point: Score.

Nodes carrying the label `label` (with the value `value`, when given) score `weight`, the others
0. Scores order the nodes inside the domain a job is placed in (and break ties between equally
good domains); they never override offer slots, so a labelled node is preferred among nodes with
equal room, it is not forced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from scheduler.framework import Arg, FloatArray, Handle, IntArray
from scheduler.model import JobInfo
from scheduler.state import CycleState


class PreferLabel:
    name = "PreferLabel"
    extension_points = frozenset({"Score"})
    arguments: ClassVar[Mapping[str, Arg]] = {
        "label": Arg("string"),
        "value": Arg("string", maximum=63),
        "weight": Arg("int", minimum=1, maximum=100),
    }

    def __init__(self, args: Mapping[str, Any], handle: Handle) -> None:
        # the profile builder has checked the arguments against `arguments`
        self.label = str(args.get("label", "koordweb.example/preferred"))
        self.value = args.get("value")
        self.weight = float(args.get("weight", 10))

    def score_nodes(self, state: CycleState, job: JobInfo, node_indices: IntArray) -> FloatArray:
        labelled = _labelled(state, self.label, self.value)
        return np.where(labelled[node_indices], self.weight, 0.0)


def _labelled(state: CycleState, label: str, value: Any) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Per node (in `state.nodes` order), whether it carries the label; once a round."""
    key = f"PreferLabel/{label}={value}"
    found = state.plugin_data.get(key)
    if found is None:
        found = np.array(
            [
                label in n.labels and (value is None or n.labels[label] == value)
                for n in state.nodes
            ],
            dtype=np.bool_,
        )
        state.plugin_data[key] = found
    return found
