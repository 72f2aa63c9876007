"""`RoundResult.to_dict` turns the engine's values into plain JSON-ready ones: numpy numbers into
Python numbers, read-only mappings and tuples into dicts and lists, at any depth, with the plain
values of a round (strings, numbers, dicts) taken as they are."""

from __future__ import annotations

import json
from types import MappingProxyType

import numpy as np

from scheduler.result import RoundResult


def test_decisions_become_plain_at_every_depth() -> None:
    why = {
        "chosen_domain": "block-1",
        "slots": np.int64(7),
        "score": np.float64(0.5),
        "alternatives": MappingProxyType({"block-2": (np.int32(3), None, True)}),
        "nested": {1: [{"deep": np.int16(2)}]},
    }
    plain = RoundResult({}, (), {}, {"team/job": why}).to_dict()["decisions"]["team/job"]
    assert plain == {
        "chosen_domain": "block-1",
        "slots": 7,
        "score": 0.5,
        "alternatives": {"block-2": [3, None, True]},
        "nested": {"1": [{"deep": 2}]},
    }
    assert type(plain["slots"]) is int and type(plain["score"]) is float
    json.dumps(plain)  # every value is JSON's own
