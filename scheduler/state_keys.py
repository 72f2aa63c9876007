"""Typed per-round plugin state: kube-scheduler's `StateKey` idea for `CycleState`.

A plugin that keeps data for the round names it with a `StateKey[T]`, a module (or plugin)
constant that says what type the data is and how to build it the first time it is asked for:

    SIZES: StateKey[JobSizes] = StateKey("PrioritySort/sizes", job_sizes)
    sizes = state.get_or_create(SIZES)      # built by `job_sizes(state)` once a round
    book = state.read(QUOTA_BOOK)           # None until the quota plugin's Setup wrote it

A key is one object: two keys of the same name are two keys, so plugins cannot collide by
name. A state is never copied: a preemption dry run treats victims as gone through
`CycleState.releasing` on the same state, and a what-if question builds a new snapshot and so a
new state; data kept under a key therefore lives exactly one round (or one `EngineState`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from scheduler.state import CycleState

T = TypeVar("T")


class StateKey(Generic[T]):
    """Names one kind of per-round data of type `T`; `factory(state)` builds it for
    `CycleState.get_or_create` (a key without one is only written, by a Setup, and read)."""

    __slots__ = ("factory", "name")

    def __init__(self, name: str, factory: Callable[[CycleState], T] | None = None) -> None:
        self.name = name
        self.factory = factory

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"
